//! The streaming table writer: entries in key order go into data blocks that
//! are flushed at increasing offsets of a temp file; `finish` appends the
//! index, the caller's header and the footer, then installs the file
//! atomically. Memory stays O(block + index).

use super::format::*;
use crate::engine::error::{Error, Result};
use crate::engine::format::{Codec, TEMP_MARKER, masked_crc};
use crate::engine::tag::{Key, STORE_ID_LEN, StoreId, TAG_LEN, block_tag, page_tag, table_tag};
use crate::engine::io::files::random_suffix;
use crate::engine::io::vfs::{Vfs, VfsFile, retry_interrupted, write_all_at};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes buffered before a write to the temp file.
const WRITE_BUFFER_BYTES: usize = 64 << 10;

/// What a table records besides its entries.
#[derive(Debug, Clone)]
pub struct TableSpec {
    /// The store's codec, carried only to be checked by the reader.
    pub codec: Codec,
    /// The seq the snapshot covers.
    pub seq: u64,
    /// A tagged store's key and id: block tags and a table tag are written.
    pub tagging: Option<(Key, StoreId)>,
    /// Target size of a data block body (`TABLE_BLOCK_BYTES`, 4 KiB, by default,
    /// at most `MAX_TABLE_BLOCK_BYTES`, 64 KiB, else `Error::TooLarge`); an entry larger
    /// than it gets a block of its own (so 0 puts every entry in its own block).
    pub block_bytes: usize,
    /// A delta table's parent seq (FORMAT.md §14): the table then holds only
    /// the entries written after it. `None` (the default): a full table.
    pub parent: Option<u64>,
    /// Index entries per index page (FORMAT.md §11.8): `TABLE_PAGE_ENTRIES`,
    /// 64, by default, at most `MAX_TABLE_PAGE_ENTRIES`, 1024, else
    /// `Error::TooLarge`. 0 writes the unpaged index of table versions 2 and 3
    /// (§11.3), which a build before version 4 reads; tests use it to keep
    /// both readers covered.
    pub page_entries: usize,
}

impl TableSpec {
    /// A spec with the default block size.
    pub fn new(codec: Codec, seq: u64, tagging: Option<(Key, StoreId)>) -> TableSpec {
        TableSpec {
            codec,
            seq,
            tagging,
            block_bytes: TABLE_BLOCK_BYTES,
            parent: None,
            page_entries: TABLE_PAGE_ENTRIES,
        }
    }
}

/// Streams a table to `<name>.tmp-<16 hex>` and installs it as `name` on
/// [`finish`](TableWriter::finish). Dropped unfinished, it removes its temp file.
pub struct TableWriter {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    target: PathBuf,
    temp: PathBuf,
    file: Box<dyn VfsFile>,
    spec: TableSpec,
    file_header: [u8; TABLE_HEADER_LEN],
    /// Bytes not yet written; they start at file offset `flushed`.
    buf: Vec<u8>,
    flushed: u64,
    /// The open block's body and entry count.
    block: Vec<u8>,
    block_entries: u32,
    blocks: u64,
    /// The index body (unpaged), or the pages written so far (paged).
    index: Vec<u8>,
    /// Paged: the open page and the directory of the closed ones.
    page: OpenPage,
    directory: Vec<u8>,
    pages: u32,
    last_key: Option<Vec<u8>>,
    entries: u64,
    /// Set once a write failed: nothing more is accepted.
    failed: bool,
    /// Set once installed: the temp file is gone.
    done: bool,
}

/// The index page being filled (paged index, FORMAT.md §11.8).
#[derive(Debug, Default)]
struct OpenPage {
    /// Where it starts in `index`.
    start: usize,
    /// Its last entry's position, from `start`.
    last_at: u32,
    blocks: u32,
    first_block: u64,
    first_offset: u64,
    entries: u64,
}

impl fmt::Debug for TableWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableWriter")
            .field("temp", &self.temp)
            .field("seq", &self.spec.seq)
            .field("tagged", &self.spec.tagging.is_some())
            .field("entries", &self.entries)
            .field("blocks", &self.blocks)
            .field("offset", &self.offset())
            .finish()
    }
}

impl TableWriter {
    /// Creates the temp file (exclusively, never through a symlink) in `dir`.
    pub fn create(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        name: &str,
        spec: TableSpec,
    ) -> Result<TableWriter> {
        let temp = dir.join(format!("{name}{TEMP_MARKER}{}", random_suffix()));
        if spec.block_bytes > MAX_TABLE_BLOCK_BYTES {
            return Err(Error::TooLarge {
                what: "table block target",
                len: spec.block_bytes as u64,
                max: MAX_TABLE_BLOCK_BYTES as u64,
            });
        }
        if spec.page_entries > MAX_TABLE_PAGE_ENTRIES {
            return Err(Error::TooLarge {
                what: "table index page entries",
                len: spec.page_entries as u64,
                max: MAX_TABLE_PAGE_ENTRIES as u64,
            });
        }
        let file = vfs
            .create_new(&temp)
            .map_err(|e| Error::io("create table temp file", &temp, e))?;
        let flags = if spec.tagging.is_some() {
            TABLE_FLAG_TAGGED
        } else {
            0
        };
        let file_header = encode_file_header(
            spec.codec.id(),
            flags,
            spec.seq,
            spec.parent,
            spec.page_entries > 0,
        );
        let mut buf = Vec::with_capacity(WRITE_BUFFER_BYTES);
        buf.extend_from_slice(&file_header);
        Ok(TableWriter {
            target: dir.join(name),
            dir: dir.to_path_buf(),
            vfs,
            temp,
            file,
            spec,
            file_header,
            buf,
            flushed: 0,
            block: Vec::new(),
            block_entries: 0,
            blocks: 0,
            index: Vec::new(),
            page: OpenPage::default(),
            directory: Vec::new(),
            pages: 0,
            last_key: None,
            entries: 0,
            failed: false,
            done: false,
        })
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Adds one entry. Keys must be strictly increasing (bytewise), else
    /// `Error::Mismatch` naming the key; over-limit lengths are `Error::TooLarge`.
    /// A refused entry leaves the writer as it was.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_usable()?;
        if key.len() > MAX_TABLE_KEY_LEN {
            return Err(Error::TooLarge {
                what: "table key",
                len: key.len() as u64,
                max: MAX_TABLE_KEY_LEN as u64,
            });
        }
        if value.len() > MAX_TABLE_VALUE_LEN {
            return Err(Error::TooLarge {
                what: "table value",
                len: value.len() as u64,
                max: MAX_TABLE_VALUE_LEN as u64,
            });
        }
        if let Some(last) = &self.last_key
            && key <= last.as_slice()
        {
            return Err(Error::Mismatch {
                path: self.target.clone(),
                reason: format!(
                    "table key {} is not after the previous key {} (keys must be strictly increasing)",
                    show_key(key),
                    show_key(last)
                ),
            });
        }
        let size = TABLE_ENTRY_HEADER_LEN + key.len() + value.len();
        if self.block_entries > 0 && self.block.len() + size > self.spec.block_bytes {
            self.close_block()?;
        }
        encode_entry(&mut self.block, key, value);
        self.block_entries += 1;
        self.entries += 1;
        match &mut self.last_key {
            Some(k) => {
                k.clear();
                k.extend_from_slice(key);
            }
            None => self.last_key = Some(key.to_vec()),
        }
        Ok(())
    }

    /// Writes the index, the header block (`header`, opaque) and the footer;
    /// fsyncs the temp file, renames it over `name` and fsyncs the directory.
    /// Returns the file's size. On any error the temp file is removed.
    pub fn finish(mut self, header: &[u8]) -> Result<u64> {
        let r = self.finish_inner(header);
        if r.is_err() {
            // Drop removes the temp file.
            self.failed = true;
        }
        r
    }

    fn finish_inner(&mut self, header: &[u8]) -> Result<u64> {
        self.check_usable()?;
        if header.len() > MAX_TABLE_HEADER_LEN {
            return Err(Error::TooLarge {
                what: "table header",
                len: header.len() as u64,
                max: MAX_TABLE_HEADER_LEN as u64,
            });
        }
        if self.block_entries > 0 {
            self.close_block()?;
        }
        let paged = self.spec.page_entries > 0;
        if paged && self.page.blocks > 0 {
            self.close_page();
        }
        let index_offset = self.offset();
        let index = std::mem::take(&mut self.index);
        self.push(&index)?;
        // What the index's CRC (and the table tag) covers: the unpaged index
        // body, or a paged index's directory and page count (§11.8).
        let covered = if paged {
            let mut d = std::mem::take(&mut self.directory);
            d.extend_from_slice(&self.pages.to_le_bytes());
            self.push(&d)?;
            d
        } else {
            index
        };
        self.push(&masked_crc(&[&covered]).to_le_bytes())?;
        let index_len = self.offset() - index_offset;
        let header_offset = self.offset();
        self.push(header)?;
        self.push(&masked_crc(&[header]).to_le_bytes())?;
        let mut footer = Footer {
            entries: self.entries,
            blocks: self.blocks,
            index_offset,
            // Both bounded by their MAX_* (under 4 GiB) plus a checksum (and
            // a paged index's page count).
            index_len: index_len as u32,
            header_offset,
            header_len: (header.len() + TABLE_CRC_LEN) as u32,
            store_id: [0; STORE_ID_LEN],
            tag: [0; TAG_LEN],
        };
        if let Some((key, id)) = &self.spec.tagging {
            footer.store_id = *id;
            let prefix = footer_prefix(&footer);
            footer.tag = table_tag(
                key,
                id,
                self.spec.seq,
                &[&self.file_header, &covered, header, &prefix[..TF_TAG_AT]],
            );
        }
        self.push(&encode_footer(&footer))?;
        self.flush()?;
        let size = self.offset();
        let temp = &self.temp;
        retry_interrupted(|| self.file.sync_all())
            .map_err(|e| Error::io("fsync table temp file", temp, e))?;
        retry_interrupted(|| self.vfs.rename(temp, &self.target))
            .map_err(|e| Error::io("rename table temp file", &self.target, e))?;
        self.done = true;
        // Until the directory is synced the rename may not survive a crash; the
        // caller must not delete what this file replaces before Ok.
        retry_interrupted(|| self.vfs.sync_dir(&self.dir))
            .map_err(|e| Error::io("fsync directory after rename", &self.dir, e))?;
        Ok(size)
    }

    fn check_usable(&self) -> Result<()> {
        if self.failed {
            return Err(Error::TableWriterFailed {
                path: self.temp.clone(),
            });
        }
        Ok(())
    }

    /// The file offset of the next byte pushed.
    fn offset(&self) -> u64 {
        self.flushed + self.buf.len() as u64
    }

    fn close_block(&mut self) -> Result<()> {
        let offset = self.offset();
        let crc = masked_crc(&[&self.block]);
        let tag = self
            .spec
            .tagging
            .as_ref()
            .map(|(key, id)| block_tag(key, id, self.spec.seq, self.blocks, &self.block));
        let last_key = self.last_key.as_deref().unwrap_or_default();
        // A block holds at most the target or one entry: under MAX_TABLE_BLOCK_LEN.
        let len = (self.block.len() + TABLE_CRC_LEN) as u32;
        let before = self.index.len();
        encode_index_entry(
            &mut self.index,
            offset,
            len,
            self.block_entries,
            last_key,
            tag.as_ref(),
        );
        let paged = self.spec.page_entries > 0;
        // A paged index also holds the directory, one more entry at most for
        // the open page, and its trailer.
        let total = self.index.len()
            + if paged {
                self.directory.len()
                    + dir_entry_len(self.spec.tagging.is_some())
                    + TABLE_DIR_TRAILER_LEN
            } else {
                0
            };
        if total > MAX_TABLE_INDEX_LEN {
            self.index.truncate(before);
            return Err(Error::TooLarge {
                what: "table index",
                len: total as u64,
                max: MAX_TABLE_INDEX_LEN as u64,
            });
        }
        if paged {
            let p = &mut self.page;
            if p.blocks == 0 {
                *p = OpenPage {
                    start: before,
                    first_block: self.blocks,
                    first_offset: offset,
                    ..OpenPage::default()
                };
            }
            // A page is at most MAX_TABLE_PAGE_ENTRIES entries of bounded size.
            p.last_at = (before - p.start) as u32;
            p.blocks += 1;
            p.entries += u64::from(self.block_entries);
        }
        let block = std::mem::take(&mut self.block);
        let r = self
            .push(&block)
            .and_then(|()| self.push(&crc.to_le_bytes()));
        self.block = block;
        self.block.clear();
        self.block_entries = 0;
        self.blocks += 1;
        if paged && self.page.blocks as usize >= self.spec.page_entries {
            self.close_page();
        }
        r
    }

    /// Ends the open page: its directory entry (CRC, tag) goes into `dir`.
    fn close_page(&mut self) {
        let p = std::mem::take(&mut self.page);
        let bytes = &self.index[p.start..];
        let tag = self
            .spec
            .tagging
            .as_ref()
            .map(|(key, id)| page_tag(key, id, self.spec.seq, u64::from(self.pages), bytes));
        encode_dir_entry(
            &mut self.directory,
            &DirEntry {
                // Pages lie within the index, under MAX_TABLE_INDEX_LEN.
                at: p.start as u32,
                last_at: p.last_at,
                blocks: p.blocks,
                crc: masked_crc(&[bytes]),
                first_block: p.first_block,
                first_offset: p.first_offset,
                entries: p.entries,
                tag: tag.as_ref().map(|t| &t[..]),
            },
        );
        self.pages += 1;
    }

    fn push(&mut self, bytes: &[u8]) -> Result<()> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= WRITE_BUFFER_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if let Err(e) = write_all_at(self.file.as_ref(), &self.buf, self.flushed) {
            self.failed = true;
            return Err(Error::io("write table temp file", &self.temp, e));
        }
        self.flushed += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

impl Drop for TableWriter {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.vfs.remove(&self.temp);
        }
    }
}

/// A key for an error message: text when printable, else hex; long keys cut.
pub(crate) fn show_key(key: &[u8]) -> String {
    const SHOWN: usize = 64;
    let cut = &key[..key.len().min(SHOWN)];
    let more = if key.len() > SHOWN { "…" } else { "" };
    match std::str::from_utf8(cut) {
        Ok(s) if s.chars().all(|c| !c.is_control()) => format!("{s:?}{more}"),
        _ => format!("0x{}{more}", crate::engine::tag::to_hex(cut)),
    }
}
