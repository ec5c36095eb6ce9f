//! The table reader: opening validates the file header, footer, index (a
//! paged table's: its page directory only, FORMAT.md §11.8) and header block
//! (never a data block); a lookup is a binary search of the index and one
//! block, each page and block checked before its first use. Everything here
//! is pure over the file's bytes except [`Table::open`].

use super::format::*;
use crate::engine::error::{Error, Result};
use crate::engine::format::{Codec, le_u16, le_u32, masked_crc};
use crate::engine::tag::{
    Key, STORE_ID_LEN, StoreId, TAG_LEN, block_tag, page_tag, table_tag, tags_equal,
};
use crate::engine::io::vfs::{FileBytes, Vfs};
use std::cmp::Ordering;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

/// An open table snapshot. Holds the file's bytes (a memory map on `RealFs`)
/// and what locates an index entry: per data block, its position (versions
/// 2 and 3), or the page directory's place (paged, versions 4 and 5).
pub struct Table {
    path: PathBuf,
    bytes: FileBytes,
    seq: u64,
    /// A delta's parent seq.
    parent: Option<u64>,
    codec: Codec,
    /// A tagged table's key and store id.
    tagging: Option<(Key, StoreId)>,
    entries: u64,
    /// The index body's byte range in the file (a paged index: its pages).
    index_at: usize,
    index_end: usize,
    index: Index,
    /// The number of data blocks.
    nblocks: usize,
    /// One bit per block: set once the block passed its check (see
    /// [`Table::block`]), so later lookups into it skip the CRC and the walk.
    checked: Bits,
    /// The header body's byte range in the file.
    header_at: usize,
    header_end: usize,
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.path)
            .field("seq", &self.seq)
            .field("codec", &self.codec)
            .field("tagged", &self.tagging.is_some())
            .field("entries", &self.entries)
            .field("blocks", &self.nblocks)
            .field("size", &self.size())
            .finish()
    }
}

/// How index entries are found.
enum Index {
    /// Versions 2 and 3: the index walked at open; per block, its entry's
    /// position in the index body.
    Flat(Vec<u32>),
    /// Versions 4 and 5 (FORMAT.md §11.8): `pages` directory entries at file
    /// offset `dir_at` (checked at open); a page is checked on first use.
    Paged {
        dir_at: usize,
        pages: usize,
        checked: Bits,
    },
}

/// One bit per item, set once it passed its check. The file never changes
/// once renamed into place, so a check holds for every later use.
struct Bits(Box<[AtomicU64]>);

impl Bits {
    fn new(n: usize) -> Bits {
        Bits((0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect())
    }

    fn get(&self, i: usize) -> bool {
        self.0
            .get(i / 64)
            .is_some_and(|w| w.load(AtomicOrdering::Relaxed) & (1 << (i % 64)) != 0)
    }

    fn set(&self, i: usize) {
        if let Some(w) = self.0.get(i / 64) {
            w.fetch_or(1 << (i % 64), AtomicOrdering::Relaxed);
        }
    }
}

/// A scan's place in a paged index: block `block`'s index entry is at byte
/// `pos` of page `page`.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    block: usize,
    page: usize,
    pos: usize,
}

/// An index page checked against its CRC, tag and directory entry.
#[derive(Clone, Copy)]
struct Page<'a> {
    bytes: &'a [u8],
    dir: DirEntry<'a>,
}

impl<'a> Page<'a> {
    /// The page's entries in order; the page was checked whole, so each decodes.
    fn entries(&self) -> impl Iterator<Item = IndexEntry<'a>> + 'a {
        let (bytes, tagged) = (self.bytes, self.dir.tag.is_some());
        let mut pos = 0;
        std::iter::from_fn(move || {
            let e = decode_index_entry(bytes.get(pos..)?, tagged)?;
            pos += e.size;
            Some(e)
        })
    }

    fn last(&self) -> Option<IndexEntry<'a>> {
        decode_index_entry(
            self.bytes.get(self.dir.last_at as usize..)?,
            self.dir.tag.is_some(),
        )
    }
}

/// A data block checked against its checksum, tag and index entry.
#[derive(Clone, Copy)]
struct Block<'a> {
    body: &'a [u8],
}

impl<'a> Block<'a> {
    /// The entry at `pos`; the block was checked whole, so `None` is unreachable.
    fn entry(&self, pos: usize) -> Option<Entry<'a>> {
        decode_entry(self.body.get(pos..)?).ok()
    }

    /// The value of `key`: a walk in key order that stops at the first key
    /// past it. The block was checked whole (every entry within the limits
    /// and the block), so the walk reads only the two lengths and the key of
    /// each entry; a length past the block (unreachable) ends it with `None`.
    fn find(&self, key: &[u8]) -> Option<&'a [u8]> {
        let b = self.body;
        let mut pos = 0;
        while let Some(head) = b.get(pos..pos + TABLE_ENTRY_HEADER_LEN) {
            let key_at = pos + TABLE_ENTRY_HEADER_LEN;
            let value_at = key_at + usize::from(le_u16(head, 0));
            let end = value_at + le_u32(head, size_of::<u16>()) as usize;
            match cmp_key(b.get(key_at..value_at)?, key) {
                Ordering::Less => pos = end,
                Ordering::Equal => return b.get(value_at..end),
                Ordering::Greater => return None,
            }
        }
        None
    }
}

/// `a.cmp(b)` for keys, as `<[u8]>::cmp` orders them: eight bytes at a time
/// (as big-endian integers, which order as their bytes do), then byte by byte.
/// Table keys are short and neighbours share long prefixes (`u0000001000`,
/// `u0000001099`); this costs less than a byte loop or a call to the C
/// library's `memcmp` per entry, and an open compares every index entry's key
/// with the one before it (§11.6).
pub(crate) fn cmp_key(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let (mut ca, mut cb) = (a[..n].chunks_exact(8), b[..n].chunks_exact(8));
    for (x, y) in (&mut ca).zip(&mut cb) {
        let (x, y) = (be_u64(x), be_u64(y));
        if x != y {
            return x.cmp(&y);
        }
    }
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

/// An eight-byte chunk as a big-endian integer.
fn be_u64(c: &[u8]) -> u64 {
    u64::from_be_bytes(c.try_into().unwrap_or([0; 8]))
}

impl Table {
    /// Validates the file header, footer, index and header block (checksums,
    /// limits, layout, and the table tag when tagged); reads no data block.
    /// A paged table (versions 4 and 5, FORMAT.md §11.8): the page directory
    /// in place of the index, so no index page is read either. Memory: one
    /// bit per block, and one `u32` per block for an unpaged table (versions
    /// 2 and 3, whose index is walked here) or one bit per page for a paged one.
    pub fn from_bytes(path: PathBuf, bytes: FileBytes, key: Option<&Key>) -> Result<Table> {
        let b: &[u8] = (*bytes).as_ref();
        let file_len = b.len();
        let corrupt = |offset: usize, seq: Option<u64>, reason: String| Error::Corrupt {
            path: path.clone(),
            offset: Some(offset as u64),
            seq,
            reason,
        };
        let fh = decode_file_header(b)
            .map_err(|r| corrupt(0, None, format!("table file header: {r}")))?;
        let seq = Some(fh.seq);
        let tagged = fh.flags & TABLE_FLAG_TAGGED != 0;
        match (tagged, key) {
            (true, None) => {
                return Err(Error::Key {
                    path,
                    reason: "table snapshot is tagged; open it with the store's key".into(),
                });
            }
            (false, Some(_)) => {
                return Err(Error::Key {
                    path,
                    reason: "table snapshot is not tagged, but a key was given".into(),
                });
            }
            _ => {}
        }
        let codec = Codec::from_id(fh.codec).ok_or_else(|| {
            corrupt(
                0,
                seq,
                format!("table file header: unknown codec byte {}", fh.codec),
            )
        })?;
        let min_len = TABLE_HEADER_LEN + 2 * TABLE_CRC_LEN + TABLE_FOOTER_LEN;
        if file_len < min_len {
            return Err(corrupt(
                file_len,
                seq,
                format!(
                    "table footer: file is {file_len} bytes, shorter than the smallest table ({min_len} bytes)"
                ),
            ));
        }
        let footer_at = file_len - TABLE_FOOTER_LEN;
        let f = decode_footer(&b[footer_at..])
            .map_err(|r| corrupt(footer_at, seq, format!("table footer: {r}")))?;
        let bad_footer = |r: String| corrupt(footer_at, seq, format!("table footer: {r}"));
        // Layout: blocks | index | header | footer, nothing between or after.
        let index_len = f.index_len as usize;
        let header_len = f.header_len as usize;
        // What follows an index body: its CRC, or a paged index's page count and CRC.
        let trailer = if fh.paged {
            TABLE_DIR_TRAILER_LEN
        } else {
            TABLE_CRC_LEN
        };
        if !(trailer..=MAX_TABLE_INDEX_LEN + trailer).contains(&index_len) {
            return Err(bad_footer(format!(
                "index length {index_len} outside {trailer}..={}",
                MAX_TABLE_INDEX_LEN + trailer
            )));
        }
        if !(TABLE_CRC_LEN..=MAX_TABLE_HEADER_LEN + TABLE_CRC_LEN).contains(&header_len) {
            return Err(bad_footer(format!(
                "header length {header_len} outside {TABLE_CRC_LEN}..={}",
                MAX_TABLE_HEADER_LEN + TABLE_CRC_LEN
            )));
        }
        let header_at = footer_at - header_len.min(footer_at);
        if f.header_offset != header_at as u64 || header_at < TABLE_HEADER_LEN + index_len {
            return Err(bad_footer(format!(
                "header block at offset {} of {} bytes does not end where the footer starts ({footer_at})",
                f.header_offset, f.header_len
            )));
        }
        let index_at = header_at - index_len;
        if f.index_offset != index_at as u64 {
            return Err(bad_footer(format!(
                "index at offset {} of {} bytes does not end where the header block starts ({header_at})",
                f.index_offset, f.index_len
            )));
        }
        let crc_at = index_at + index_len - TABLE_CRC_LEN;
        let header_end = header_at + header_len - TABLE_CRC_LEN;
        // The bytes the index CRC and the table tag cover: the index body, or
        // a paged index's directory and page count (§11.8).
        let (covered_at, index_end, pages) = if fh.paged {
            let dlen = dir_entry_len(tagged);
            let pages = le_u32(b, crc_at - size_of::<u32>()) as usize;
            let room = (index_len - TABLE_DIR_TRAILER_LEN) / dlen;
            if pages > room {
                return Err(corrupt(
                    crc_at - size_of::<u32>(),
                    seq,
                    format!(
                        "table page directory: {pages} pages do not fit the {index_len}-byte index"
                    ),
                ));
            }
            let dir_at = crc_at - size_of::<u32>() - pages * dlen;
            (dir_at, dir_at, Some(pages))
        } else {
            (index_at, crc_at, None)
        };
        let covered = &b[covered_at..crc_at];
        if le_u32(b, crc_at) != masked_crc(&[covered]) {
            let what = match pages {
                Some(_) => format!(
                    "table page directory (offset {covered_at}, {} bytes): checksum mismatch",
                    covered.len() + TABLE_CRC_LEN
                ),
                None => {
                    format!("table index (offset {index_at}, {index_len} bytes): checksum mismatch")
                }
            };
            return Err(corrupt(covered_at, seq, what));
        }
        let header = &b[header_at..header_end];
        if le_u32(b, header_end) != masked_crc(&[header]) {
            return Err(corrupt(
                header_at,
                seq,
                format!(
                    "table header block (offset {header_at}, {header_len} bytes): checksum mismatch"
                ),
            ));
        }
        // Every byte outside the data blocks now passes a checksum: a tagged
        // table's tag decides whether they are the writer's.
        let tagging = match key {
            Some(key) => {
                let prefix = &b[footer_at..footer_at + TF_TAG_AT];
                let want = table_tag(
                    key,
                    &f.store_id,
                    fh.seq,
                    &[&b[..TABLE_HEADER_LEN], covered, header, prefix],
                );
                if !tags_equal(&want, &f.tag) {
                    return Err(Error::Tampered {
                        path,
                        offset: None,
                        seq,
                        what: format!(
                            "table tag mismatch (file header, {}, header block or footer)",
                            if pages.is_some() {
                                "page directory"
                            } else {
                                "index"
                            }
                        ),
                    });
                }
                Some((key.clone(), f.store_id))
            }
            None => {
                if f.store_id != [0; STORE_ID_LEN] || f.tag != [0; TAG_LEN] {
                    return Err(bad_footer(
                        "an untagged table's store id and tag are not zero".into(),
                    ));
                }
                None
            }
        };
        let (index, nblocks) = match pages {
            None => {
                let body = &b[index_at..index_end];
                let blocks = walk_index(body, tagged, index_at, &f).map_err(|(at, r)| {
                    corrupt(
                        index_at + at,
                        seq,
                        format!("table index (offset {index_at}, {index_len} bytes): {r}"),
                    )
                })?;
                let n = blocks.len();
                (Index::Flat(blocks), n)
            }
            Some(pages) => {
                let dir = &b[index_end..index_end + pages * dir_entry_len(tagged)];
                walk_directory(dir, pages, tagged, index_end - index_at, index_at, &f).map_err(
                    |(at, r)| {
                        corrupt(
                            index_end + at,
                            seq,
                            format!(
                                "table page directory (offset {index_end}, {} bytes): {r}",
                                covered.len() + TABLE_CRC_LEN
                            ),
                        )
                    },
                )?;
                let index = Index::Paged {
                    dir_at: index_end,
                    pages,
                    checked: Bits::new(pages),
                };
                // The directory's block counts sum to the footer's (checked).
                (index, f.blocks as usize)
            }
        };
        let checked = Bits::new(nblocks);
        Ok(Table {
            path,
            bytes,
            seq: fh.seq,
            parent: fh.parent,
            codec,
            tagging,
            entries: f.entries,
            index_at,
            index_end,
            index,
            nblocks,
            checked,
            header_at,
            header_end,
        })
    }

    /// Reads `path` through `vfs.read_mapped` (a memory map on `RealFs`), then
    /// [`Table::from_bytes`]. Table snapshots are immutable and never truncated,
    /// so a map is safe even for readers that hold no lock.
    pub fn open(vfs: &dyn Vfs, path: &Path, key: Option<&Key>) -> Result<Table> {
        let bytes = vfs
            .read_mapped(path)
            .map_err(|e| Error::io("read table snapshot", path, e))?;
        Table::from_bytes(path.to_path_buf(), bytes, key)
    }

    /// The seq the snapshot covers.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// A delta table's parent seq (FORMAT.md §14); `None` for a full table.
    pub fn parent(&self) -> Option<u64> {
        self.parent
    }

    /// The codec byte recorded by the writer.
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// A tagged table's store id.
    pub fn store_id(&self) -> Option<StoreId> {
        self.tagging.as_ref().map(|(_, id)| *id)
    }

    /// The number of entries.
    pub fn len(&self) -> u64 {
        self.entries
    }

    /// True when the table holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The file's size in bytes.
    pub fn size(&self) -> u64 {
        self.file().len() as u64
    }

    /// The number of data blocks.
    pub fn blocks(&self) -> u64 {
        self.nblocks as u64
    }

    /// The number of index pages (0 for an unpaged table, versions 2 and 3).
    pub fn index_pages(&self) -> u64 {
        match &self.index {
            Index::Flat(_) => 0,
            Index::Paged { pages, .. } => *pages as u64,
        }
    }

    /// The path the table was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The caller's header given to [`TableWriter::finish`](super::TableWriter::finish).
    pub fn header(&self) -> &[u8] {
        self.file()
            .get(self.header_at..self.header_end)
            .unwrap_or_default()
    }

    /// The value of `key`: a binary search of the index (a paged index: of
    /// its pages, each checked before its first use), then one block, whose
    /// checksum (and tag) is checked before its first use by this reader.
    pub fn get(&self, key: &[u8]) -> Result<Option<&[u8]>> {
        let Some((i, ix)) = self.locate(key)? else {
            return Ok(None);
        };
        Ok(self.block_with(i, ix, None)?.find(key))
    }

    /// All entries in key order; each block is checked when first entered. An
    /// error is yielded once, then the iterator ends.
    pub fn iter(&self) -> TableIter<'_> {
        TableIter {
            table: self,
            released: 0,
            next_block: 0,
            block: None,
            pos: 0,
            start: None,
            failed: None,
            cursor: None,
            prev_last: None,
            done: false,
        }
    }

    /// The entries whose key is `start` or after, in key order.
    pub fn iter_from(&self, start: &[u8]) -> TableIter<'_> {
        let (next_block, failed) = match self.block_for(start) {
            Ok(i) => (i, None),
            Err(e) => (self.nblocks, Some(e)),
        };
        TableIter {
            table: self,
            released: 0,
            next_block,
            block: None,
            pos: 0,
            start: Some(start.to_vec()),
            failed,
            cursor: None,
            prev_last: None,
            done: false,
        }
    }

    /// Checks every index page (a paged table) and every data block:
    /// checksum, tag, entry lengths, key order within and across pages and
    /// blocks, and counts against the index and the footer.
    pub fn verify(&self) -> Result<()> {
        if let Index::Paged { pages, checked, .. } = &self.index {
            let mut prev_last: Option<&[u8]> = None;
            for p in 0..*pages {
                let page = self.check_page(p)?;
                checked.set(p);
                let first = page.entries().next().map(|e| e.last_key);
                if let (Some(prev), Some(first)) = (prev_last, first)
                    && cmp_key(first, prev) != Ordering::Greater
                {
                    return Err(self.page_damaged(
                        p,
                        &page,
                        "its first last key is not after the previous page's last key".into(),
                    ));
                }
                prev_last = page.last().map(|e| e.last_key);
            }
        }
        let mut n = 0u64;
        for i in 0..self.nblocks {
            self.check_block(i)?;
            n += u64::from(self.index_entry(i)?.entries);
        }
        if n != self.entries {
            return Err(self.corrupt(
                self.size().saturating_sub(TABLE_FOOTER_LEN as u64),
                format!(
                    "table footer: {} entries, the blocks hold {n}",
                    self.entries
                ),
            ));
        }
        Ok(())
    }

    fn file(&self) -> &[u8] {
        (*self.bytes).as_ref()
    }

    fn corrupt(&self, offset: u64, reason: String) -> Error {
        Error::Corrupt {
            path: self.path.clone(),
            offset: Some(offset),
            seq: Some(self.seq),
            reason,
        }
    }

    /// The index entry of block `i`: unpaged, checked at open (so an error is
    /// unreachable); paged, from its page, checked first if this reader has
    /// not entered it yet (an error is that page's damage).
    fn index_entry(&self, i: usize) -> Result<IndexEntry<'_>> {
        let index = self
            .file()
            .get(self.index_at..self.index_end)
            .unwrap_or_default();
        let unreadable = || {
            self.corrupt(
                self.index_at as u64,
                format!("table index: entry of block {i} unreadable"),
            )
        };
        match &self.index {
            Index::Flat(blocks) => blocks
                .get(i)
                .and_then(|&at| index.get(at as usize..))
                .and_then(|b| decode_index_entry(b, self.tagging.is_some()))
                .ok_or_else(unreadable),
            Index::Paged { .. } => {
                let page = self.page(self.page_of_block(i))?;
                let j = (i as u64).checked_sub(page.dir.first_block);
                j.and_then(|j| page.entries().nth(j as usize))
                    .ok_or_else(unreadable)
            }
        }
    }

    /// Block `i`'s index entry for a reader going block by block: read at
    /// `cur` when it points at block `i` (a paged index's entries are found
    /// by walking their page, so a scan keeps its place rather than walking
    /// from the page's start for every block), else as [`Table::index_entry`];
    /// `cur` then points at block `i + 1`.
    fn index_entry_seq(&self, i: usize, cur: &mut Option<Cursor>) -> Result<IndexEntry<'_>> {
        if matches!(self.index, Index::Flat(_)) {
            return self.index_entry(i);
        }
        let unreadable = || {
            self.corrupt(
                self.index_at as u64,
                format!("table index: entry of block {i} unreadable"),
            )
        };
        let (p, page, pos) = match cur.filter(|c| c.block == i) {
            Some(c) => (c.page, self.page(c.page)?, c.pos),
            None => {
                // Walk block i's page to its entry, once for the scan.
                let p = self.page_of_block(i);
                let page = self.page(p)?;
                let j = (i as u64)
                    .checked_sub(page.dir.first_block)
                    .ok_or_else(unreadable)?;
                let pos = page.entries().take(j as usize).map(|e| e.size).sum();
                (p, page, pos)
            }
        };
        let e = page
            .bytes
            .get(pos..)
            .and_then(|b| decode_index_entry(b, self.tagging.is_some()))
            .ok_or_else(unreadable)?;
        let next = pos + e.size;
        *cur = Some(if next >= page.bytes.len() {
            Cursor {
                block: i + 1,
                page: p + 1,
                pos: 0,
            }
        } else {
            Cursor {
                block: i + 1,
                page: p,
                pos: next,
            }
        });
        Ok(e)
    }

    /// The page listing block `i` (a paged index; from the directory).
    fn page_of_block(&self, i: usize) -> usize {
        let pages = match &self.index {
            Index::Paged { pages, .. } => *pages,
            Index::Flat(_) => 0,
        };
        partition(pages, |p| {
            self.dir_entry(p)
                .is_some_and(|d| d.first_block + u64::from(d.blocks) <= i as u64)
        })
    }

    /// Directory entry `p` (checked at open).
    fn dir_entry(&self, p: usize) -> Option<DirEntry<'_>> {
        let Index::Paged { dir_at, pages, .. } = &self.index else {
            return None;
        };
        if p >= *pages {
            return None;
        }
        let tagged = self.tagging.is_some();
        let len = dir_entry_len(tagged);
        decode_dir_entry(self.file().get(dir_at + p * len..)?, tagged)
    }

    /// Page `p`'s bytes and the file offset where its blocks end (the next
    /// page's first block, or the index for the last page).
    fn page_bytes(&self, p: usize, d: &DirEntry<'_>) -> Option<(&[u8], u64)> {
        let (end, blocks_end) = match self.dir_entry(p + 1) {
            Some(n) => (n.at as usize, n.first_offset),
            None => (self.index_end - self.index_at, self.index_at as u64),
        };
        let pages = self.file().get(self.index_at..self.index_end)?;
        Some((pages.get(d.at as usize..end)?, blocks_end))
    }

    /// Page `p`, checked before its first use by this reader (its bit), as
    /// [`Table::check_page`] does.
    fn page(&self, p: usize) -> Result<Page<'_>> {
        if let Index::Paged { checked, .. } = &self.index
            && checked.get(p)
            && let Some(dir) = self.dir_entry(p)
            && let Some((bytes, _)) = self.page_bytes(p, &dir)
        {
            return Ok(Page { bytes, dir });
        }
        let page = self.check_page(p)?;
        if let Index::Paged { checked, .. } = &self.index {
            checked.set(p);
        }
        Ok(page)
    }

    fn page_damaged(&self, p: usize, page: &Page<'_>, reason: String) -> Error {
        let at = self.index_at as u64 + u64::from(page.dir.at);
        self.corrupt(
            at,
            format!(
                "table index page {p} (offset {at}, {} bytes): {reason}",
                page.bytes.len()
            ),
        )
    }

    /// Page `p`, checked whole (FORMAT.md §11.8): CRC, tag, then every entry
    /// as the open of an unpaged table checks them, against the directory.
    fn check_page(&self, p: usize) -> Result<Page<'_>> {
        let (dir, (bytes, blocks_end)) = self
            .dir_entry(p)
            .and_then(|d| Some((d, self.page_bytes(p, &d)?)))
            .ok_or_else(|| {
                self.corrupt(
                    self.index_end as u64,
                    format!("table page directory: no page {p}"),
                )
            })?;
        let page = Page { bytes, dir };
        let damaged = |reason: String| self.page_damaged(p, &page, reason);
        let tagged = self.tagging.is_some();
        // Bounds the work of this check before the CRC reads the page.
        let most = dir.blocks as usize
            * (TABLE_INDEX_ENTRY_FIXED_LEN + MAX_TABLE_KEY_LEN + if tagged { TAG_LEN } else { 0 });
        if bytes.len() > most {
            return Err(damaged(format!(
                "{} bytes cannot be {} index entries (at most {most} bytes)",
                bytes.len(),
                dir.blocks
            )));
        }
        if masked_crc(&[bytes]) != dir.crc {
            return Err(damaged("checksum mismatch".into()));
        }
        if let (Some((key, id)), Some(tag)) = (&self.tagging, dir.tag) {
            let want = page_tag(key, id, self.seq, p as u64, bytes);
            if !tags_equal(&want, tag.try_into().unwrap_or(&[0; TAG_LEN])) {
                let at = self.index_at as u64 + u64::from(dir.at);
                return Err(Error::Tampered {
                    path: self.path.clone(),
                    offset: Some(at),
                    seq: Some(self.seq),
                    what: format!(
                        "table index page {p} (offset {at}, {} bytes): page tag mismatch",
                        bytes.len()
                    ),
                });
            }
        }
        let first = dir.first_block;
        let (mut pos, mut n, mut entries) = (0usize, 0u32, 0u64);
        let mut next_block = dir.first_offset;
        let mut prev: Option<&[u8]> = None;
        let mut last_at = None;
        while pos < bytes.len() && n < dir.blocks {
            let i = first + u64::from(n);
            let e = decode_index_entry(&bytes[pos..], tagged).ok_or_else(|| {
                damaged(format!(
                    "entry of block {i} at page offset {pos} runs past the page end or its key is over {MAX_TABLE_KEY_LEN} bytes"
                ))
            })?;
            check_index_entry(&e, i, next_block, prev)
                .map_err(|r| damaged(format!("at page offset {pos}: {r}")))?;
            prev = Some(e.last_key);
            next_block += u64::from(e.len);
            entries += u64::from(e.entries);
            last_at = Some(pos);
            n += 1;
            pos += e.size;
        }
        if n != dir.blocks || pos != bytes.len() || last_at != Some(dir.last_at as usize) {
            return Err(damaged(format!(
                "{n} entries end at page offset {pos} of {}, the last at {last_at:?}; the directory says {} entries, the last at {}",
                bytes.len(),
                dir.blocks,
                dir.last_at
            )));
        }
        if next_block != blocks_end {
            return Err(damaged(format!(
                "its blocks end at offset {next_block}, the next ones start at {blocks_end}"
            )));
        }
        if entries != dir.entries {
            return Err(damaged(format!(
                "its blocks hold {entries} entries, the directory says {}",
                dir.entries
            )));
        }
        Ok(page)
    }

    /// The first block whose last key is `key` or after (`nblocks` if none).
    fn block_for(&self, key: &[u8]) -> Result<usize> {
        Ok(self.locate(key)?.map_or(self.nblocks, |(i, _)| i))
    }

    /// The first block whose last key is `key` or after, with its index
    /// entry (`None` if every key is before `key`): the entry the search
    /// ends on, so a lookup does not find it a second time.
    fn locate(&self, key: &[u8]) -> Result<Option<(usize, IndexEntry<'_>)>> {
        let pages = match &self.index {
            Index::Flat(blocks) => {
                // Every entry was checked at open: `index_entry` cannot fail here.
                let last_key = |i| self.index_entry(i).map(|e| e.last_key).unwrap_or_default();
                let i = partition(blocks.len(), |i| {
                    cmp_key(last_key(i), key) == Ordering::Less
                });
                if i == blocks.len() {
                    return Ok(None);
                }
                return Ok(Some((i, self.index_entry(i)?)));
            }
            Index::Paged { pages, .. } => *pages,
        };
        // A binary search over the pages' last keys, each read from a checked
        // page. When it ends at `p`, page `p - 1` was probed and its last key
        // is below `key`, and page `p` was probed and its last key is `key`
        // or after (when they exist): the answer is confirmed by checked
        // neighbours even though key order across pages is checked only by
        // `verify` (FORMAT.md §11.8).
        let (mut lo, mut hi) = (0, pages);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let page = self.page(mid)?;
            let last = page.last().map(|e| e.last_key).unwrap_or_default();
            if cmp_key(last, key) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == pages {
            return Ok(None);
        }
        let page = self.page(lo)?;
        let (j, e) = page
            .entries()
            .enumerate()
            .find(|(_, e)| cmp_key(e.last_key, key) != Ordering::Less)
            .ok_or_else(|| self.page_damaged(lo, &page, "no entry for its last key".into()))?;
        Ok(Some(((page.dir.first_block + j as u64) as usize, e)))
    }

    /// Block `i`, given its index entry `ix` and, when the caller has it (a
    /// scan), the previous block's last key: checked before its first use by
    /// this reader (its bit in `checked`), as [`Table::check_block`] does; a
    /// block already checked is sliced without checking again. The file never
    /// changes once renamed into place (FORMAT.md §11.6), so one check per
    /// open table holds for every later lookup, as a block cache's decoded
    /// blocks do.
    fn block_with<'t>(
        &'t self,
        i: usize,
        ix: IndexEntry<'t>,
        prev_last: Option<&'t [u8]>,
    ) -> Result<Block<'t>> {
        if self.checked.get(i) {
            let (at, len) = (ix.offset as usize, ix.len as usize);
            // Within the file: checked at open, and again by the first check.
            if let Some(bytes) = self.file().get(at..at + len - TABLE_CRC_LEN) {
                return Ok(Block { body: bytes });
            }
        }
        let b = self.check_block_with(i, ix, prev_last)?;
        self.checked.set(i);
        Ok(b)
    }

    /// Block `i`, checked whole: checksum, tag, every entry within the limits
    /// and the block, keys strictly increasing and after the previous block's
    /// last key, the entry count and last key as the index says.
    fn check_block(&self, i: usize) -> Result<Block<'_>> {
        self.check_block_with(i, self.index_entry(i)?, None)
    }

    /// [`Table::check_block`] given block `i`'s index entry and, when the
    /// caller has it (a scan), the previous block's last key; otherwise that
    /// key is read from the index (none for block 0).
    fn check_block_with<'t>(
        &'t self,
        i: usize,
        ix: IndexEntry<'t>,
        prev_last: Option<&'t [u8]>,
    ) -> Result<Block<'t>> {
        let mut prev = match (i, prev_last) {
            (0, _) => None,
            (_, Some(k)) => Some(k),
            (_, None) => Some(self.index_entry(i - 1)?.last_key),
        };
        let (at, len) = (ix.offset as usize, ix.len as usize);
        let damaged = |reason: String| {
            self.corrupt(
                ix.offset,
                format!("table block {i} (offset {at}, {len} bytes): {reason}"),
            )
        };
        // Offsets and lengths were checked against the file at open.
        let bytes = self
            .file()
            .get(at..at + len)
            .ok_or_else(|| damaged("outside the file".into()))?;
        let body_len = len - TABLE_CRC_LEN;
        let body = &bytes[..body_len];
        if le_u32(bytes, body_len) != masked_crc(&[body]) {
            return Err(damaged("checksum mismatch".into()));
        }
        if let (Some((key, id)), Some(tag)) = (&self.tagging, ix.tag) {
            let want = block_tag(key, id, self.seq, i as u64, body);
            if !tags_equal(&want, tag.try_into().unwrap_or(&[0; TAG_LEN])) {
                return Err(Error::Tampered {
                    path: self.path.clone(),
                    offset: Some(ix.offset),
                    seq: Some(self.seq),
                    what: format!("table block {i} (offset {at}, {len} bytes): block tag mismatch"),
                });
            }
        }
        let (mut pos, mut n) = (0usize, 0u32);
        while pos < body.len() {
            let e = decode_entry(&body[pos..])
                .map_err(|r| damaged(format!("entry {n} at block offset {pos}: {r}")))?;
            if let Some(p) = prev
                && cmp_key(e.key, p) != Ordering::Greater
            {
                return Err(damaged(format!(
                    "entry {n} at block offset {pos}: key out of order"
                )));
            }
            prev = Some(e.key);
            pos += e.size;
            n += 1;
        }
        if n != ix.entries {
            return Err(damaged(format!(
                "holds {n} entries, the index says {}",
                ix.entries
            )));
        }
        if prev != Some(ix.last_key) {
            return Err(damaged("last key differs from the index's last key".into()));
        }
        Ok(Block { body })
    }
}

/// The first `i` in `0..n` for which `before(i)` is false (`before` is true on a prefix).
fn partition(n: usize, before: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Walks the index body, checking every entry against the limits, the layout
/// (blocks back to back from the file header to the index) and the footer's
/// counts. Returns each entry's offset within the index, or the offset within
/// the index and what is wrong.
fn walk_index(
    index: &[u8],
    tagged: bool,
    index_at: usize,
    f: &Footer,
) -> std::result::Result<Vec<u32>, (usize, String)> {
    // Bounded by the index length, which is bounded by the file.
    let cap = (index.len() / TABLE_INDEX_ENTRY_FIXED_LEN).min(f.blocks as usize);
    let mut out = Vec::with_capacity(cap);
    let mut next_block = TABLE_HEADER_LEN as u64;
    let mut entries = 0u64;
    let mut prev: Option<&[u8]> = None;
    let mut pos = 0usize;
    while pos < index.len() {
        let i = out.len();
        let e = decode_index_entry(&index[pos..], tagged).ok_or_else(|| {
            (
                pos,
                format!("entry of block {i} runs past the index end or its key is over {MAX_TABLE_KEY_LEN} bytes"),
            )
        })?;
        check_index_entry(&e, i as u64, next_block, prev).map_err(|r| (pos, r))?;
        prev = Some(e.last_key);
        next_block += u64::from(e.len);
        entries += u64::from(e.entries);
        out.push(pos as u32);
        pos += e.size;
    }
    if next_block != index_at as u64 {
        return Err((
            0,
            format!("the blocks end at offset {next_block}, the index starts at {index_at}"),
        ));
    }
    if out.len() as u64 != f.blocks {
        return Err((
            0,
            format!("{} blocks, the footer says {}", out.len(), f.blocks),
        ));
    }
    if entries != f.entries {
        return Err((
            0,
            format!("{entries} entries, the footer says {}", f.entries),
        ));
    }
    Ok(out)
}

/// One index entry against the layout: block `i` starts at `next_block`, its
/// length within the limits, its entry count between 1 and what fits, its last
/// key after `prev` (the previous entry's).
fn check_index_entry(
    e: &IndexEntry<'_>,
    i: u64,
    next_block: u64,
    prev: Option<&[u8]>,
) -> std::result::Result<(), String> {
    let len = e.len as usize;
    if e.offset != next_block {
        return Err(format!(
            "block {i} at offset {}, expected {next_block} (blocks are back to back)",
            e.offset
        ));
    }
    if !(MIN_TABLE_BLOCK_LEN..=MAX_TABLE_BLOCK_LEN).contains(&len) {
        return Err(format!(
            "block {i} length {len} outside {MIN_TABLE_BLOCK_LEN}..={MAX_TABLE_BLOCK_LEN}"
        ));
    }
    let most = (len - TABLE_CRC_LEN) / TABLE_ENTRY_HEADER_LEN;
    if e.entries == 0 || e.entries as usize > most {
        return Err(format!(
            "block {i} of {len} bytes claims {} entries (1..={most} fit)",
            e.entries
        ));
    }
    if let Some(p) = prev
        && cmp_key(e.last_key, p) != Ordering::Greater
    {
        return Err(format!("block {i}: last key out of order"));
    }
    Ok(())
}

/// Walks a paged index's directory (FORMAT.md §11.8, open step 5): pages in
/// order within `0..pages_len`, their blocks numbered and placed in order
/// from the file header to the index, each page's counts within limits, the
/// sums equal to the footer's counts. Reads no page: what a page's bytes must
/// agree with (its length, its blocks' lengths and where they end) is checked
/// by the page check on first use. One pass over fixed-size entries, about a
/// dozen comparisons each; returns the offset within the directory and what
/// is wrong.
fn walk_directory(
    dir: &[u8],
    pages: usize,
    tagged: bool,
    pages_len: usize,
    index_at: usize,
    f: &Footer,
) -> std::result::Result<(), (usize, String)> {
    let dlen = dir_entry_len(tagged);
    let (mut blocks, mut entries) = (0u64, 0u64);
    // The previous page's position and first block offset: the next page's
    // are strictly greater (every page holds an entry, every block a byte).
    let mut prev: Option<(u32, u64)> = None;
    for (p, e) in dir.chunks_exact(dlen).take(pages).enumerate() {
        let at = p * dlen;
        let d = decode_dir_entry(e, tagged)
            .ok_or_else(|| (at, format!("entry of page {p} runs past the directory")))?;
        if !(1..=MAX_TABLE_PAGE_ENTRIES as u32).contains(&d.blocks) {
            return Err((
                at,
                format!(
                    "page {p} claims {} index entries (1..={MAX_TABLE_PAGE_ENTRIES})",
                    d.blocks
                ),
            ));
        }
        if d.first_block != blocks {
            return Err((
                at,
                format!("page {p} starts at block {}, expected {blocks}", d.first_block),
            ));
        }
        if d.entries < u64::from(d.blocks) {
            return Err((
                at,
                format!("page {p}: {} blocks cannot hold {} entries", d.blocks, d.entries),
            ));
        }
        let in_order = match prev {
            None => d.at == 0 && d.first_offset == TABLE_HEADER_LEN as u64,
            Some((pat, poff)) => d.at > pat && d.first_offset > poff,
        };
        if !in_order || d.at as usize >= pages_len || d.first_offset >= index_at as u64 {
            return Err((
                at,
                format!(
                    "page {p} at index position {} with its first block at offset {}: out of order (page 0 at 0 and {TABLE_HEADER_LEN}, then increasing, within {pages_len} bytes of pages and blocks before {index_at})",
                    d.at, d.first_offset
                ),
            ));
        }
        blocks += u64::from(d.blocks);
        entries = entries.saturating_add(d.entries);
        prev = Some((d.at, d.first_offset));
    }
    if prev.is_none() && (pages_len != 0 || index_at != TABLE_HEADER_LEN) {
        return Err((
            0,
            format!("no page, but {pages_len} bytes of pages and blocks up to offset {index_at}"),
        ));
    }
    if blocks != f.blocks {
        return Err((0, format!("{blocks} blocks, the footer says {}", f.blocks)));
    }
    if entries != f.entries {
        return Err((
            0,
            format!("{entries} entries, the footer says {}", f.entries),
        ));
    }
    Ok(())
}

/// Entries of a [`Table`] in key order (see [`Table::iter`]).
pub struct TableIter<'a> {
    table: &'a Table,
    /// Where the bytes not yet released start (see [`RELEASE_EVERY`]).
    released: usize,
    next_block: usize,
    block: Option<Block<'a>>,
    pos: usize,
    start: Option<Vec<u8>>,
    /// An error finding where `iter_from` starts, yielded first.
    failed: Option<Error>,
    /// Where the next block's index entry is, and the last key of the block
    /// the scan entered before it.
    cursor: Option<Cursor>,
    prev_last: Option<&'a [u8]>,
    done: bool,
}

impl fmt::Debug for TableIter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableIter")
            .field("path", &self.table.path)
            .field("next_block", &self.next_block)
            .field("pos", &self.pos)
            .field("done", &self.done)
            .finish()
    }
}

/// A scan lets go of the blocks behind it every this many bytes, so that a
/// mapped table read end to end (a streamed document, a resume set, a view's
/// lists) keeps about this much of it resident, not the whole file.
pub const RELEASE_EVERY: usize = 8 << 20;

impl TableIter<'_> {
    /// Releases the bytes from `released` to `at`, the start of the next
    /// block, once they reach [`RELEASE_EVERY`].
    fn release_behind(&mut self, at: usize) {
        if at >= self.released + RELEASE_EVERY {
            self.table.bytes.release(self.released..at);
            self.released = at;
        }
    }
}

impl<'a> Iterator for TableIter<'a> {
    type Item = Result<(&'a [u8], &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.failed.take() {
            self.done = true;
            return Some(Err(e));
        }
        loop {
            if self.done {
                return None;
            }
            if let Some(b) = self.block {
                if let Some(e) = b.entry(self.pos) {
                    self.pos += e.size;
                    if let Some(s) = &self.start {
                        if e.key < s.as_slice() {
                            continue;
                        }
                        self.start = None;
                    }
                    return Some(Ok((e.key, e.value)));
                }
                self.block = None;
            }
            if self.next_block >= self.table.nblocks {
                self.done = true;
                return None;
            }
            let i = self.next_block;
            let table = self.table;
            let found = table.index_entry_seq(i, &mut self.cursor).and_then(|ix| {
                self.release_behind(ix.offset as usize);
                let prev = self.prev_last.take();
                Ok((ix, table.block_with(i, ix, prev)?))
            });
            match found {
                Ok((ix, b)) => {
                    self.block = Some(b);
                    self.pos = 0;
                    self.next_block += 1;
                    self.prev_last = Some(ix.last_key);
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::cmp_key;

    /// Every pair of keys up to 19 bytes over a small alphabet (so that long
    /// shared prefixes, every chunk boundary and every length difference
    /// occur): the chunked compare orders as `<[u8]>::cmp`.
    #[test]
    fn the_chunked_key_compare_orders_as_the_byte_compare() {
        let mut keys: Vec<Vec<u8>> = vec![vec![]];
        for len in 1..=19usize {
            for diff_at in 0..len {
                for (x, y) in [(b'0', b'1'), (0u8, 255u8), (b'a', b'a')] {
                    let mut k = vec![b'u'; len];
                    k[diff_at] = x;
                    keys.push(k.clone());
                    k[diff_at] = y;
                    keys.push(k);
                }
            }
        }
        for a in &keys {
            for b in &keys {
                assert_eq!(cmp_key(a, b), a.as_slice().cmp(b.as_slice()), "{a:?} {b:?}");
            }
        }
    }
}
