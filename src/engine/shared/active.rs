//! The active segment: the file appends go to, where its records end, how
//! far it is preallocated, and the records staged for the next fsync leader.

use crate::engine::io::vfs::{VfsFile, is_out_of_space, retry_interrupted, write_all_at};
use std::path::PathBuf;
use std::sync::Arc;

/// Writes records at `at`, the end of the segment's records. A write that
/// fails for want of space (ENOSPC, EDQUOT) first cuts the file back to
/// `at`: what it wrote of them (a prefix, never acknowledged, never fsynced)
/// would be a torn tail that the next open must quarantine into a
/// `.broken-…` file, one per failure on a disk that fills again and again
/// (FORMAT.md §5.2 step 3). The writer is poisoned all the same; a failed cut
/// leaves the torn tail to that open.
pub(crate) fn write_records(file: &dyn VfsFile, frames: &[u8], at: u64) -> std::io::Result<()> {
    write_all_at(file, frames, at).inspect_err(|e| {
        if is_out_of_space(e) {
            let _ = retry_interrupted(|| file.set_len(at));
        }
    })
}

/// The active segment's file, shared with an fsync leader that writes and
/// fsyncs it outside `inner`.
#[derive(Debug)]
pub(crate) struct Active {
    pub(crate) file: Box<dyn VfsFile>,
    pub(crate) path: PathBuf,
    pub(crate) first_seq: u64,
}

/// The active segment as its writer holds it. Its fields are its own, and its
/// methods keep what the rest of the writer relies on: the records end at
/// [`end`](Self::end); the file is [`alloc`](Self::alloc) ≥ `end` bytes long
/// (preallocated zeros after the records); the staged bytes, accepted under
/// `Always`/`Grouped` but not yet written, are the last ones before `end`,
/// and the next fsync leader (or a rotation) writes them all with one `pwrite`.
pub(crate) struct ActiveSegment {
    file: Arc<Active>,
    end: u64,
    alloc: u64,
    staged: Vec<u8>,
}

impl ActiveSegment {
    /// A segment whose records (and file) end at `len`, nothing staged.
    pub(crate) fn new(file: Active, len: u64) -> Self {
        Self::at(file, len, len)
    }

    /// A segment whose records end at `end` in a file `alloc` bytes long.
    pub(crate) fn at(file: Active, end: u64, alloc: u64) -> Self {
        debug_assert!(alloc >= end);
        ActiveSegment {
            file: Arc::new(file),
            end,
            alloc: alloc.max(end),
            staged: Vec::new(),
        }
    }

    /// The open file, its path and first seq (shared with an fsync leader).
    pub(crate) fn file(&self) -> &Arc<Active> {
        &self.file
    }

    /// The seq of the segment's first record.
    pub(crate) fn first_seq(&self) -> u64 {
        self.file.first_seq
    }

    /// Where the records end, staged ones included.
    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// The file's length: `end` plus any preallocated zeros.
    pub(crate) fn alloc(&self) -> u64 {
        self.alloc
    }

    /// Records that the file is now `len` bytes long (zeros written ahead, or
    /// cut back to the records); never shorter than the records.
    pub(crate) fn set_alloc(&mut self, len: u64) {
        debug_assert!(len >= self.end);
        self.alloc = len.max(self.end);
    }

    /// Puts `frames` at the end: staged for the next fsync leader when
    /// `stage`, else written now.
    pub(crate) fn push(&mut self, frames: &[u8], stage: bool) -> std::io::Result<()> {
        if stage {
            self.staged.extend_from_slice(frames);
        } else {
            write_records(self.file.file.as_ref(), frames, self.end)?;
        }
        self.end += frames.len() as u64;
        self.alloc = self.alloc.max(self.end);
        Ok(())
    }

    /// Takes the staged bytes, with the offset they are to be written at.
    pub(crate) fn take_staged(&mut self) -> (Vec<u8>, u64) {
        let staged = std::mem::take(&mut self.staged);
        let at = self.end - staged.len() as u64;
        (staged, at)
    }

    /// Hands back a written (emptied) staged buffer, to be reused when larger.
    pub(crate) fn give_back(&mut self, mut buf: Vec<u8>) {
        buf.clear();
        if self.staged.is_empty() && self.staged.capacity() < buf.capacity() {
            self.staged = buf;
        }
    }

    /// Writes what is staged now (a rotation, before it closes the segment).
    pub(crate) fn write_staged(&mut self) -> std::io::Result<()> {
        if !self.staged.is_empty() {
            let at = self.end - self.staged.len() as u64;
            write_records(self.file.file.as_ref(), &self.staged, at)?;
            self.staged.clear();
        }
        Ok(())
    }
}
