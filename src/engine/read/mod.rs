//! The lock-free reader of a store directory, [`Reader`]: its state, its
//! verification and its records, each read without the writer lock and
//! without changing a byte. Every method of `Reader` is in this folder: the
//! type and its state here, `verify` in `verify.rs`, the record walk in
//! `walk.rs`; `settle.rs` tells a torn tail from an append in progress, as
//! a reader that holds no lock must (FORMAT.md §5.6).

mod settle;
pub(crate) mod verify;
mod verify_report;
mod walk;

use self::settle::{Tail, settle};
use crate::engine::error::{Error, Result};
use crate::engine::io::vfs::Vfs;
use crate::engine::load;
use crate::engine::load::replay::replay_one;
use crate::engine::load::report::RecoveryReport;
use crate::engine::machine::Machine;
use crate::engine::tag::Key;
use std::path::Path;
use std::time::Duration;

/// Reads a store without taking the writer lock and without modifying any
/// file: its state ([`Reader::state`]), its integrity ([`Reader::verify`]) and
/// its records ([`Reader::records`], [`Reader::records_after`]).
///
/// A tagged store is read with its key ([`Reader::with_key`]): every record's
/// and the snapshot's tag is checked, a mismatch is [`Error::Tampered`]. An
/// untagged store is read without one; the wrong choice is [`Error::Key`].
///
/// ```
/// # use runlog::engine::Machine;
/// # use serde::{Deserialize, Serialize};
/// # struct Sum;
/// # #[derive(Debug)] struct Zero;
/// # impl std::fmt::Display for Zero { fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result { f.write_str("zero") } }
/// # impl std::error::Error for Zero {}
/// # impl Machine for Sum {
/// #     type State = u64; type Transition = u64; type Error = Zero;
/// #     fn apply(s: &mut u64, t: &u64) -> Result<(), Zero> { if *t == 0 { return Err(Zero) } *s += t; Ok(()) }
/// # }
/// use runlog::engine::{Options, RealFs, Reader, Store};
/// let dir = tempfile::tempdir()?;
/// let writer = Store::<Sum>::open(dir.path(), Options { create: true, ..Options::default() })?;
/// writer.append(&7)?;
/// // Beside the live writer: no lock taken, no byte changed.
/// let (state, report) = Reader::new(&RealFs, dir.path()).state::<Sum>()?;
/// assert_eq!((state, report.last_seq), (7, 1));
/// assert!(Reader::new(&RealFs, dir.path()).verify()?.integrity.is_clean());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy)]
pub struct Reader<'a> {
    pub(crate) vfs: &'a dyn Vfs,
    pub(crate) dir: &'a Path,
    pub(crate) key: Option<&'a Key>,
}

impl<'a> Reader<'a> {
    /// A reader of the untagged store in `dir`, through `vfs`.
    pub fn new(vfs: &'a dyn Vfs, dir: &'a Path) -> Reader<'a> {
        Reader {
            vfs,
            dir,
            key: None,
        }
    }

    /// The same reader for a tagged store (`Some(key)`) or an untagged one
    /// (`None`).
    pub fn with_key(self, key: Option<&'a Key>) -> Reader<'a> {
        Reader { key, ..self }
    }

    /// Whether a writer holds the store's lock (`LOCK`) right now: a look, as
    /// a reader takes at a bad frame at the end of the log (FORMAT.md §5.6,
    /// [`Vfs::lock_busy`]), which never waits and writes nothing. `false`
    /// when the filesystem cannot tell, or the store has no `LOCK` file.
    pub fn writer_active(&self) -> bool {
        self.vfs
            .lock_busy(&self.dir.join(crate::engine::format::LOCK_FILE))
    }

    /// The store's state, as a writer's open would recover it, and what
    /// recovery found.
    ///
    /// Sees every transition acknowledged before it started; a bad frame at
    /// the end of the log (possibly a record being written right now) is
    /// ignored, never truncated, and reported: as
    /// [`RecoveryReport::torn_tail`] when a read after the writer lock was
    /// seen free found it again, unchanged, else (a writer held the lock when
    /// this looked, once, without waiting) as
    /// [`RecoveryReport::append_in_progress`] (FORMAT.md §5.6).
    pub fn state<M: Machine>(&self) -> Result<(M::State, RecoveryReport)> {
        let first = self.state_once::<M>()?;
        let ((state, mut report), tail) = settle(
            self.vfs,
            self.dir,
            Duration::ZERO,
            first,
            |(_, r)| r.torn_tail.clone(),
            || self.state_once::<M>(),
        )?;
        if tail == Tail::InProgress {
            report.append_in_progress = report.torn_tail.take();
        }
        Ok((state, report))
    }

    /// One read of the state: [`Reader::state`] before its bad frame, if
    /// any, is settled.
    pub(crate) fn state_once<M: Machine>(&self) -> Result<(M::State, RecoveryReport)> {
        let (vfs, dir, key) = (self.vfs, self.dir, self.key);
        crate::engine::io::dir::check_dir(vfs, dir)?;
        load::with_retries(|| {
            let mut decode_state = M::decode_snapshot;
            let mut apply = replay_one::<M>;
            let l = load::load(
                vfs,
                dir,
                load::LoadSpec::unlocked(
                    &mut decode_state,
                    &mut apply,
                    key,
                    M::KEEPS_TAIL_CACHE.then_some(M::decode_tail as _),
                ),
            )?;
            M::check_state(&l.state).map_err(|reason| Error::Unsupported {
                path: dir.to_path_buf(),
                reason,
            })?;
            Ok((l.state, l.report))
        })
    }
}
