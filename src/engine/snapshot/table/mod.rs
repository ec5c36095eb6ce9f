//! Table snapshots (format v2, FORMAT.md §11): an immutable sorted map
//! key → value in one file, written by streaming and read by lookup through a
//! memory map, never decoded whole. A keyed state's snapshot is a small header
//! (opaque to this module) plus such a table.
//!
//! Layout, LevelDB-like: data blocks of entries in strictly increasing key
//! order, each with its own masked CRC (and, in a tagged store, a tag held
//! in the index); an index with each block's offset, length, entry count and
//! last key; the caller's header block; a fixed footer at the end. Opening reads
//! the footer, index and header only (a paged index, FORMAT.md §11.8: its
//! page directory, not its pages); a lookup binary-searches the index and
//! checks one block (and the index pages it reads) before trusting a byte of it.
//!
//! Why hand-written rather than the `fst` crate: an fst maps keys to `u64`
//! only (values would need a second file or an offset scheme of our own), and
//! it has no per-block checksums — its optional whole-file checksum costs an
//! O(N) read, which is exactly what opening by lookup avoids. Here a damaged
//! block is reported with the file, its offset and its block number
//! (`Error::Corrupt`), and a changed one in a tagged store as `Error::Tampered`;
//! a key never goes silently missing.

mod blocks;
pub mod format;
mod iter;
mod read;
mod validate;
mod write;

#[cfg(any(test, feature = "sim"))]
pub use format::{
    MAX_TABLE_BLOCK_BYTES, MAX_TABLE_BLOCK_LEN, MAX_TABLE_HEADER_LEN, MAX_TABLE_INDEX_LEN,
    MAX_TABLE_KEY_LEN, MAX_TABLE_VALUE_LEN, MIN_TABLE_BLOCK_LEN, TABLE_BLOCK_BYTES, TABLE_CRC_LEN,
    TABLE_DELTA_VERSION, TABLE_ENTRY_HEADER_LEN, TABLE_FLAG_DELTA, TABLE_FLAG_TAGGED, TABLE_FOOTER_LEN, TABLE_FOOTER_MAGIC,
    TABLE_FORMAT_VERSION, TABLE_HEADER_LEN, TABLE_INDEX_ENTRY_FIXED_LEN, TABLE_MAGIC,
    MAX_TABLE_PAGE_ENTRIES, TABLE_DIR_ENTRY_LEN, TABLE_DIR_TRAILER_LEN, TABLE_PAGE_ENTRIES,
    TABLE_PAGED_DELTA_VERSION, TABLE_PAGED_VERSION,
};
#[cfg(any(test, feature = "sim"))]
pub use iter::RELEASE_EVERY;
pub(crate) use iter::TableIter;
pub use read::Table;
pub use write::{TableSpec, TableWriter};
