//! The table reader, [`Table`]: an open table snapshot, what it says of
//! itself, and a lookup ([`Table::get`]). Every method of `Table` is in this
//! folder: opening, which validates the file header, footer and index (a
//! paged table's page directory only, FORMAT.md §11.8) and the header block
//! but never a data block, in `validate.rs`; the index entries, pages and
//! blocks, each checked before its first use, and the whole check
//! ([`Table::verify`]) in `blocks.rs`; the scan ([`Table::iter`]) in
//! `iter.rs`. Everything is pure over the file's bytes except
//! [`Table::open`].

use crate::engine::error::{Error, Result};
use crate::engine::format::Codec;
use crate::engine::io::vfs::{FileBytes, Vfs};
use crate::engine::tag::{Key, StoreId};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

/// An open table snapshot. Holds the file's bytes (a memory map on `RealFs`)
/// and what locates an index entry: per data block, its position (versions
/// 2 and 3), or the page directory's place (paged, versions 4 and 5).
pub struct Table {
    pub(super) path: PathBuf,
    pub(super) bytes: FileBytes,
    pub(super) seq: u64,
    /// A delta's parent seq.
    pub(super) parent: Option<u64>,
    pub(super) codec: Codec,
    /// A tagged table's key and store id.
    pub(super) tagging: Option<(Key, StoreId)>,
    pub(super) entries: u64,
    /// The index body's byte range in the file (a paged index: its pages).
    pub(super) index_at: usize,
    pub(super) index_end: usize,
    pub(super) index: Index,
    /// The number of data blocks.
    pub(super) nblocks: usize,
    /// One bit per block: set once the block passed its check (see
    /// [`Table::block`]), so later lookups into it skip the CRC and the walk.
    pub(super) checked: Bits,
    /// The header body's byte range in the file.
    pub(super) header_at: usize,
    pub(super) header_end: usize,
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
pub(super) enum Index {
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
pub(super) struct Bits(Box<[AtomicU64]>);

impl Bits {
    pub(super) fn new(n: usize) -> Bits {
        Bits((0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect())
    }

    pub(super) fn get(&self, i: usize) -> bool {
        self.0
            .get(i / 64)
            .is_some_and(|w| w.load(AtomicOrdering::Relaxed) & (1 << (i % 64)) != 0)
    }

    pub(super) fn set(&self, i: usize) {
        if let Some(w) = self.0.get(i / 64) {
            w.fetch_or(1 << (i % 64), AtomicOrdering::Relaxed);
        }
    }
}

impl Table {
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

    pub(super) fn file(&self) -> &[u8] {
        (*self.bytes).as_ref()
    }

    pub(super) fn corrupt(&self, offset: u64, reason: String) -> Error {
        Error::Corrupt {
            path: self.path.clone(),
            offset: Some(offset),
            seq: Some(self.seq),
            reason,
        }
    }
}
