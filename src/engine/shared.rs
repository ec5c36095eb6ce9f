//! The writer's state that its parts share: [`Shared`] (the store's directory,
//! options, the live state in [`Inner`], the group commit, the compaction slot)
//! and the active segment. Open, append, rotation, compaction and the flusher
//! all work on it; it knows none of them.
//!
//! Lock order: `inner` before `io` before `group`, the first step enforced by
//! [`IoLock`]. Nothing holds `group` while taking `inner`.

use super::Machine;
use super::book::Book;
use super::format::Codec;
use super::group::GroupCommit;
use super::live::Live;
use super::lock::WriterLock;
use super::mark::{Mark, MarkWriter};
use super::mutex::lock;
use super::options::{Options, Stats, SyncPolicy};
use super::pending::Pending;
use super::poison::Poison;
use super::scratch::Scratch;
use super::slot::{Slot, Stop};
use super::tag::{Key, StoreId};
use super::vfs::{Vfs, VfsFile, write_all_at};
use super::writers::Writers;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

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
            write_all_at(self.file.file.as_ref(), frames, self.end)?;
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
            write_all_at(self.file.file.as_ref(), &self.staged, at)?;
            self.staged.clear();
        }
        Ok(())
    }
}

/// The writer's state under `inner`: its parts, each keeping its own
/// invariant, and the rest of the open. What ties the parts together is kept
/// here: the active segment is the book's newest.
pub(crate) struct Inner<M: Machine> {
    /// The machine's state and the seq it has reached.
    pub(crate) live: Live<M>,
    /// The active segment (the last of the book's segments).
    pub(crate) active: ActiveSegment,
    /// The buffers an append batch encodes into.
    pub(crate) scratch: Scratch,
    /// Set once a write or fsync of the log failed.
    pub(crate) poison: Poison,
    /// The live segments and snapshots, and what decides the next compaction.
    pub(crate) book: Book,
    /// The rest of the open, until the first write (`None` once done).
    pending: Option<Box<Pending>>,
}

impl<M: Machine> Inner<M> {
    /// The state of a writer whose active segment is `active`, with the rest
    /// of its open, if any, still to do before its first write.
    pub(crate) fn new(
        live: Live<M>,
        active: ActiveSegment,
        book: Book,
        pending: Option<Box<Pending>>,
    ) -> Self {
        Inner {
            live,
            active,
            scratch: Scratch::default(),
            poison: Poison::default(),
            book,
            pending,
        }
    }

    /// Whether the open is finished: nothing deferred is left to do.
    pub(crate) fn prepared(&self) -> bool {
        self.pending.is_none()
    }

    /// What the open left for the first write, until it is done.
    pub(crate) fn pending(&self) -> Option<&Pending> {
        self.pending.as_deref()
    }

    /// Takes what the open left, to do it now (once).
    pub(crate) fn take_pending(&mut self) -> Option<Box<Pending>> {
        self.pending.take()
    }

    /// Makes `seg`, a new segment after the last one (a rotation's, or the
    /// open's first write's), the active one: the book's newest.
    pub(crate) fn start_segment(&mut self, seg: ActiveSegment) {
        self.book.rotated(seg.first_seq());
        self.active = seg;
    }

    /// Makes `seg`, the book's newest segment reopened, the active one.
    pub(crate) fn continue_segment(&mut self, seg: ActiveSegment) {
        debug_assert_eq!(self.book.last_segment(), Some(seg.first_seq()));
        self.active = seg;
    }
}

pub(crate) struct Shared<M: Machine> {
    pub(crate) dir: PathBuf,
    pub(crate) vfs: Arc<dyn Vfs>,
    pub(crate) codec: Codec,
    /// A keyed store's key and id.
    pub(crate) keying: Option<(Key, StoreId)>,
    pub(crate) opts: Options,
    pub(crate) inner: Mutex<Inner<M>>,
    pub(crate) group: GroupCommit,
    /// Held while staged records are written and fsynced outside `inner`, and by a
    /// rotation, so that a segment is never closed under a write still in flight.
    /// Taken after `inner` (never the other way round): [`IoLock::lock`] takes
    /// the held `inner` as its proof.
    pub(crate) io: IoLock,
    /// The durability mark's writer (FORMAT.md §5.7), written after each fsync
    /// that raised the watermark, before any waiter it covers is woken.
    pub(crate) mark: Mutex<MarkWriter>,
    pub(crate) compaction: Slot,
    pub(crate) stats: Stats,
    /// Stops the flusher thread.
    pub(crate) stop: Stop,
    /// The writer lock (`LOCK`): held from the open until the store is dropped,
    /// or, for a one-shot writer, until its batch is written (then `None`).
    pub(crate) writer_lock: WriterLock,
    /// `SHARED` and the sync lock, through which every fsync of the log runs
    /// (FORMAT.md §5.8).
    pub(crate) writers: Writers,
}

/// The `io` lock of [`Shared`]. Its one way in asks for the `inner` state,
/// which only `inner`'s guard (or the open, before anyone shares it) can lend,
/// so the lock order `inner` before `io` is kept by the types, not a comment.
#[derive(Debug, Default)]
pub(crate) struct IoLock(Mutex<()>);

impl IoLock {
    /// Takes the lock; `_inner_held` is the proof that `inner` is held.
    pub(crate) fn lock<M: Machine>(&self, _inner_held: &mut Inner<M>) -> MutexGuard<'_, ()> {
        lock(&self.0)
    }
}

impl<M: Machine> Shared<M> {
    /// Whether appends are staged for the fsync leader to write.
    pub(crate) fn stages(&self) -> bool {
        !self.opts.one_shot
            && matches!(
                self.opts.sync,
                SyncPolicy::Always | SyncPolicy::Grouped { .. }
            )
    }

    /// Whether this one-shot writer has written its batch and let the writer
    /// lock go: it may append no more, nor compact (FORMAT.md §5.8).
    pub(crate) fn released(&self) -> bool {
        self.opts.one_shot && !self.writer_lock.held()
    }

    /// The durable watermark: every record up to it has been fsynced.
    pub(crate) fn durable(&self) -> u64 {
        self.group.durable()
    }

    /// Records that every record up to `seq`, which ends at `end` of the segment
    /// whose first seq is `segment`, is durable (or, with `segment` = `seq + 1`,
    /// that segment's header and name are): called after the fsync that made it
    /// so returned, before the records are acknowledged.
    pub(crate) fn mark_durable(&self, seq: u64, segment: u64, end: u64) {
        if seq + 1 >= segment {
            let m = Mark { seq, segment, end };
            self.writers.mark(self.vfs.as_ref(), &self.mark, m);
        }
    }

    pub(crate) fn poison(&self, g: &mut Inner<M>, cause: String) {
        g.poison.set(cause.clone());
        self.group.fail(cause);
    }

    pub(crate) fn wants_compaction(&self, g: &Inner<M>) -> bool {
        self.next_compaction(g, g.live.last_seq()).is_some()
    }

    /// What an automatic compaction at `k` writes now: `Some(None)` a full
    /// snapshot, `Some(Some(p))` a delta over `p`, `None` nothing yet.
    pub(crate) fn next_compaction(&self, g: &Inner<M>, k: u64) -> Option<Option<u64>> {
        g.book.next_compaction(&self.opts, k)
    }
}
