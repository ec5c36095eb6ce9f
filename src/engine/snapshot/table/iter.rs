//! A table's scan: [`Table::iter`] and [`Table::iter_from`] start a
//! [`TableIter`], whose entries come in key order, each block checked when
//! first entered, and which lets go of the bytes behind it every
//! [`RELEASE_EVERY`] bytes so that a table read end to end does not stay
//! resident whole.

use super::blocks::{Block, Cursor};
use super::read::Table;
use crate::engine::error::{Error, Result};
use std::fmt;

/// Entries of a [`Table`] in key order (see [`Table::iter`]).
pub(crate) struct TableIter<'a> {
    pub(super) table: &'a Table,
    /// Where the bytes not yet released start (see [`RELEASE_EVERY`]).
    pub(super) released: usize,
    pub(super) next_block: usize,
    pub(super) block: Option<Block<'a>>,
    pub(super) pos: usize,
    pub(super) start: Option<Vec<u8>>,
    /// An error finding where `iter_from` starts, yielded first.
    pub(super) failed: Option<Error>,
    /// Where the next block's index entry is, and the last key of the block
    /// the scan entered before it.
    pub(super) cursor: Option<Cursor>,
    pub(super) prev_last: Option<&'a [u8]>,
    pub(super) done: bool,
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

impl Table {
    /// All entries in key order, as (key, value) bytes; each block is
    /// checked when first entered. An error is yielded once, then the
    /// iterator ends.
    pub fn iter(&self) -> impl Iterator<Item = Result<(&[u8], &[u8])>> + '_ {
        self.scan()
    }

    /// The entries whose key is `start` or after, in key order (as [`Table::iter`]).
    pub fn iter_from(&self, start: &[u8]) -> impl Iterator<Item = Result<(&[u8], &[u8])>> + '_ {
        self.scan_from(start)
    }

    /// [`Table::iter`], as its own type (the engine keeps it in a merge).
    pub(crate) fn scan(&self) -> TableIter<'_> {
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

    /// [`Table::iter_from`], as its own type.
    pub(crate) fn scan_from(&self, start: &[u8]) -> TableIter<'_> {
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
