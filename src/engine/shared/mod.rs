//! The writer's state that its parts share: [`Shared`] (the store's directory,
//! options, the live state in [`Inner`] behind its mutex, the group commit, the
//! durability mark, the compaction slot). Open, append, rotation, compaction
//! and the flusher all work on it; it knows none of them.
//!
//! Every method of `Shared` is in this folder: the small ones here, the
//! group commit's side in `commit.rs`, segment creation, preallocation and
//! rotation in `segment.rs`, the open's deferred repair in `repair.rs`.
//!
//! Both are made of parts whose fields are private, each keeping the invariant
//! its own file states. Under `inner`: [`Live`] (the state and the seqs it
//! took), [`ActiveSegment`], [`Book`] (the live segments and snapshots and the
//! compaction accounting), [`Scratch`] and [`Poison`], with the open's
//! [`Pending`] rest (private here, taken once). In `Shared`: [`GroupCommit`]
//! (the durable watermark), [`Gather`] (when a leader takes a round),
//! [`IoLock`], [`Writers`] (the sync lock, and the only writer of `mark`),
//! the compaction [`Slot`], [`Stop`] and the
//! [`WriterLock`]. The rest of `Shared` (`dir`, `vfs`, `codec`, `tagging`,
//! `opts`) is set by the open and only read; `stats` holds counters. What ties
//! two parts together is kept by the methods here: the active segment is the
//! book's newest ([`Inner::start_segment`], [`Inner::continue_segment`]), and a
//! poisoned writer's group commit fails its waiters too ([`Shared::poison`]).
//!
//! Lock order: `inner`, then `io`, then the group commit's fsync gate, then the
//! sync lock (FORMAT.md §5.8), then `mark`; the group commit's monitor, the
//! gather's, the writer lock's, the slot's and the stop's mutexes are leaves.
//! What enforces it:
//! - `inner` before `io`: the types. [`IoLock::lock`] asks for the held `inner`
//!   (a `&mut Inner`, which only its guard, or the open before anyone shares
//!   it, can lend).
//! - The leaves: each is private to its part and held only inside the part's
//!   own methods, which take no other lock under it and never call out with it
//!   held (a group commit leader's `flush` runs with the monitor released).
//! - The gate, then the sync lock, then `mark`: the gate is private to
//!   [`GroupCommit::fsync`], and its two callers (an fsync leader, holding
//!   `io`; a rotation, holding `inner` and `io`) take only the sync lock
//!   under it, through [`Writers::fsync`]; `mark` is locked only inside
//!   `Writers`, under the sync lock. This step is kept by those few callers,
//!   not by the types: nothing takes `inner` or `io` under the gate.

pub(crate) mod active;
pub(crate) mod book;
mod commit;
pub(crate) mod live;
pub(crate) mod pending;
pub(crate) mod poison;
mod repair;
pub(crate) mod scratch;
pub(crate) mod segment;
pub(crate) mod slot;

use self::active::ActiveSegment;
use self::book::Book;
use self::live::Live;
use self::pending::Pending;
use self::poison::Poison;
use self::scratch::Scratch;
use self::slot::{Slot, Stop};
use crate::engine::format::Codec;
use crate::engine::io::vfs::Vfs;
use crate::engine::log::gather::Gather;
use crate::engine::log::group::GroupCommit;
use crate::engine::log::lock::WriterLock;
use crate::engine::log::mark::{Mark, MarkWriter};
use crate::engine::log::writers::Writers;
use crate::engine::machine::Machine;
use crate::engine::mutex::lock;
use crate::engine::options::{Options, Stats, SyncPolicy};
use crate::engine::tag::{Key, StoreId};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

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
    /// A tagged store's key and id.
    pub(crate) tagging: Option<(Key, StoreId)>,
    pub(crate) opts: Options,
    pub(crate) inner: Mutex<Inner<M>>,
    pub(crate) group: GroupCommit,
    /// How long an fsync leader waits for the appenders it expects.
    pub(crate) gather: Gather,
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
    /// or, for a one-shot writer, until its batch is written.
    pub(crate) writer_lock: WriterLock,
    /// `SHARED` and the sync lock, through which every fsync of the log runs
    /// (FORMAT.md §5.8).
    pub(crate) writers: Writers,
    /// The tail cache (FORMAT.md §15) a one-shot writer's open built, written
    /// with its batch under the writer lock, once the batch is accepted.
    pub(crate) tail_cache: Mutex<Option<Vec<u8>>>,
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

    /// What an automatic compaction at `k` writes now: `Some(None)` a full
    /// snapshot, `Some(Some(p))` a delta over `p`, `None` nothing yet.
    pub(crate) fn next_compaction(&self, g: &Inner<M>, k: u64) -> Option<Option<u64>> {
        g.book.next_compaction(&self.opts, k)
    }
}
