//! Many one-shot writer processes (FORMAT.md §5.8) under thousands of random
//! and PCT thread schedules (shuttle): the real store, on the simulated
//! filesystem, with a schedule point before every filesystem call, so the
//! writers' lock-free replays, catch-ups, appends, `SHARED` reads and writes,
//! sync-lock handoffs and fsyncs interleave at every call boundary rather than
//! in the handful of orders `many_writers_crash` enumerates. Each thread is one
//! writer process: its own `Store`, the writer lock `LOCK` and the sync lock
//! `SYNC` taken through the filesystem, which here blocks on shuttle's
//! primitives (a thread waiting for a lock yields to the others, and a
//! schedule in which every thread waits fails as a deadlock).
//!
//! What every schedule must keep:
//! - an acknowledged batch is durable *at the moment of its acknowledgement*:
//!   the crash image taken right then (only fsynced bytes) recovers holding it,
//!   whether the writer ran its own fdatasync or found another's covering it;
//! - recovery of the final durable image is clean and holds every
//!   acknowledged value once, and no value that was never written;
//! - a writer killed after its write (the lock gone, no fsync) costs nothing
//!   acknowledged, and the next opener goes on;
//! - a failed fdatasync (the simulated fs drops what it covered, as Linux may:
//!   fsyncgate) acknowledges nothing it covered, in any process.
//!
//! Not modelled here: threads of one process sharing a store (its group
//! commit has its own schedules, `group_commit_schedules`), and a writer killed
//! while it holds the sync lock (`many_writers::a_syncer_killed_during_its_fsync_*`
//! and the crash enumeration). Scale with `RUNLOG_SCHEDULES` (1500 at the full depth, 750 at the quick one).
use crate::common;
use common::crash::*;
use common::*;
use runlog::engine::sim::{Fault, FaultKind, SimFs};
use runlog::engine::vfs::{FileBytes, LockAttempt, Vfs, VfsFile};
use runlog::engine::{Codec, Options, Store, SyncPolicy};
use shuttle::sync::{Condvar, Mutex};
use shuttle::thread;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Locks held by path, with the thread (the simulated process) holding
/// each, blocking on shuttle's primitives.
#[derive(Default)]
struct Locks {
    held: Mutex<HashMap<PathBuf, thread::ThreadId>>,
    freed: Condvar,
}

impl Locks {
    /// What a process's death does to its locks: whatever its guards'
    /// destructors would have done, the kernel drops its `flock`s.
    fn release_all_of_this_process(&self) {
        let me = thread::current().id();
        self.held.lock().unwrap().retain(|_, owner| *owner != me);
        self.freed.notify_all();
    }
}

struct Held {
    locks: Arc<Locks>,
    path: PathBuf,
}

impl Drop for Held {
    fn drop(&mut self) {
        // Released as a dead process's flock is: whenever its guard goes.
        self.locks.held.lock().unwrap().remove(&self.path);
        self.locks.freed.notify_all();
    }
}

/// [`SimFs`] with a schedule point before every call, shuttle-blocking locks,
/// and the `fail_fsync`-th fdatasync of a log segment failing with `EIO`
/// (the simulated fs then drops the pending writes it covered).
#[derive(Clone)]
struct ScheduledFs {
    sim: SimFs,
    locks: Arc<Locks>,
    log_fsyncs: Arc<AtomicUsize>,
    fail_fsync: Option<usize>,
}

impl fmt::Debug for ScheduledFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ScheduledFs")
    }
}

impl ScheduledFs {
    fn take(&self, path: &Path, wait: bool) -> LockAttempt {
        let mut held = self.locks.held.lock().unwrap();
        while held.contains_key(path) {
            if !wait {
                return LockAttempt::Busy(Some("another simulated process".into()));
            }
            held = self.locks.freed.wait(held).unwrap();
        }
        held.insert(path.to_path_buf(), thread::current().id());
        LockAttempt::Acquired(Box::new(Held {
            locks: self.locks.clone(),
            path: path.to_path_buf(),
        }))
    }
}

#[derive(Debug)]
struct ScheduledFile {
    fs: ScheduledFs,
    path: PathBuf,
    inner: Box<dyn VfsFile>,
}

impl VfsFile for ScheduledFile {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        thread::yield_now();
        self.inner.write_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        thread::yield_now();
        let is_log = self.path.extension().is_some_and(|e| e == "log");
        if is_log {
            let n = self.fs.log_fsyncs.fetch_add(1, Ordering::SeqCst) + 1;
            if self.fs.fail_fsync == Some(n) {
                self.fs.sim.inject(Some(Fault {
                    at: self.fs.sim.ops(),
                    kind: FaultKind::Eio,
                    persistent: false,
                }));
            }
        }
        self.inner.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        thread::yield_now();
        self.inner.sync_all()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        thread::yield_now();
        self.inner.set_len(len)
    }
}

impl ScheduledFs {
    fn wrap(&self, path: &Path, f: io::Result<Box<dyn VfsFile>>) -> io::Result<Box<dyn VfsFile>> {
        Ok(Box::new(ScheduledFile {
            fs: self.clone(),
            path: path.to_path_buf(),
            inner: f?,
        }))
    }
}

impl Vfs for ScheduledFs {
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        thread::yield_now();
        self.sim.create_dir(path)
    }
    fn dir_mode(&self, path: &Path) -> io::Result<u32> {
        thread::yield_now();
        self.sim.dir_mode(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        thread::yield_now();
        self.sim.list(dir)
    }
    fn list_dirs(&self, dir: &Path) -> io::Result<Vec<String>> {
        thread::yield_now();
        self.sim.list_dirs(dir)
    }
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        thread::yield_now();
        self.wrap(path, self.sim.create_new(path))
    }
    fn open_write(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        thread::yield_now();
        self.wrap(path, self.sim.open_write(path))
    }
    fn read(&self, path: &Path) -> io::Result<FileBytes> {
        thread::yield_now();
        self.sim.read(path)
    }
    fn read_mapped(&self, path: &Path) -> io::Result<FileBytes> {
        thread::yield_now();
        self.sim.read_mapped(path)
    }
    fn read_head(&self, path: &Path, len: usize) -> io::Result<Vec<u8>> {
        thread::yield_now();
        self.sim.read_head(path, len)
    }
    fn read_from(&self, path: &Path, offset: u64, max: usize) -> io::Result<Vec<u8>> {
        thread::yield_now();
        self.sim.read_from(path, offset, max)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        thread::yield_now();
        self.sim.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        thread::yield_now();
        self.sim.remove(path)
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        thread::yield_now();
        self.sim.remove_dir(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        thread::yield_now();
        self.sim.sync_dir(dir)
    }
    fn boot_id(&self) -> [u8; 16] {
        self.sim.boot_id()
    }
    fn lock_busy(&self, path: &Path) -> bool {
        thread::yield_now();
        let me = thread::current().id();
        let held = self.locks.held.lock().unwrap();
        held.get(path).is_some_and(|owner| *owner != me)
    }
    fn try_lock(&self, path: &Path, _holder: &str) -> io::Result<LockAttempt> {
        thread::yield_now();
        Ok(self.take(path, false))
    }
    fn lock_wait(&self, path: &Path, _holder: &str, _timeout: Duration) -> io::Result<LockAttempt> {
        thread::yield_now();
        Ok(self.take(path, true))
    }
}

/// What one writer process does.
#[derive(Debug, Clone, Copy)]
enum Role {
    /// Writes its value and waits for it to be durable.
    Acknowledged,
    /// Writes its value and dies before its fsync (the writer lock already
    /// released, as a one-shot writer releases it before syncing).
    Killed,
}

fn one_shot(fs: &ScheduledFs, codec: Codec, sync: SyncPolicy) -> Options {
    let mut o = sim_opts(&fs.sim, codec);
    o.vfs = Arc::new(fs.clone());
    o.one_shot = true;
    o.sync = sync;
    o
}

/// The values the durable bytes of `sim` recover to, right now.
fn durable_now(sim: &SimFs, codec: Codec) -> Vec<u64> {
    recover(&sim.crash(&[]), codec, None)
        .unwrap_or_else(|e| panic!("{codec:?}: the durable image does not recover: {e}"))
        .0
        .values
}

/// Schedules whose writers shared an fsync, counted across a test's runs, so
/// a test can say the sharing path was exercised and not only the solo one.
static SHARED_ACKS: AtomicUsize = AtomicUsize::new(0);
/// Schedules that ended with more than one log segment (a rotation ran).
static ROTATED: AtomicUsize = AtomicUsize::new(0);

/// A store holding value 1, then one writer per role, all at once, then a
/// last writer after them.
fn scenario(codec: Codec, roles: &[Role], fail_fsync: Option<usize>, pad: usize) {
    let sim = SimFs::new();
    {
        let s = Store::<Ledger>::open(dir(), sim_opts(&sim, codec)).unwrap();
        s.append(&entry(1, 10)).unwrap();
    }
    let fs = ScheduledFs {
        sim: sim.clone(),
        locks: Arc::default(),
        log_fsyncs: Arc::default(),
        fail_fsync,
    };
    let acked = Arc::new(std::sync::Mutex::new(vec![1u64]));
    let hs: Vec<_> = roles
        .iter()
        .enumerate()
        .map(|(i, role)| {
            let (fs, acked, role) = (fs.clone(), acked.clone(), *role);
            let value = 2 + i as u64;
            thread::spawn(move || match role {
                Role::Acknowledged => {
                    let w = match Store::<Ledger>::open(
                        dir(),
                        one_shot(&fs, codec, SyncPolicy::Always),
                    ) {
                        Ok(w) => w,
                        // An open after a failed fsync may refuse or fail; it
                        // acknowledged nothing.
                        Err(_) => return,
                    };
                    if w.append(&entry(value, pad)).is_ok() {
                        // No schedule point between the acknowledgement and
                        // this look at the durable bytes.
                        let durable = durable_now(&fs.sim, codec);
                        assert!(
                            durable.contains(&value),
                            "{codec:?}: value {value} acknowledged, durable only {durable:?}"
                        );
                        acked.lock().unwrap().push(value);
                        let s = w.stats();
                        if s.fsyncs_covered.load(Ordering::Relaxed) > 0 {
                            SHARED_ACKS.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                Role::Killed => {
                    if let Ok(w) =
                        Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Never))
                    {
                        let _ = w.append(&entry(value, pad));
                        // Killed: no destructor runs, and its locks go with
                        // the process (a one-shot writer still holds the
                        // writer lock when its append failed).
                        fs.locks.release_all_of_this_process();
                        std::mem::forget(w);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    // The next writer opens after them all and is acknowledged: when an
    // fsync failed before it opens, its open copies the segment and goes on;
    // only a failure of its own fsync may refuse it.
    let last = 2 + roles.len() as u64;
    let mut all = acked.clone();
    let fsyncs_before = fs.log_fsyncs.load(Ordering::SeqCst);
    match Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Always))
        .and_then(|w| w.append(&entry(last, pad)))
    {
        Ok(_) => all.push(last),
        Err(e) => assert!(
            fail_fsync.is_some_and(|n| n > fsyncs_before),
            "{codec:?}: the writer after them failed, though no fsync of its own failed: {e}"
        ),
    }
    let segments = sim
        .list(&dir())
        .unwrap()
        .iter()
        .filter(|n| n.ends_with(".log"))
        .count();
    if segments > 1 {
        ROTATED.fetch_add(1, Ordering::Relaxed);
    }
    let durable = durable_now(&sim, codec);
    for v in &all {
        assert!(
            durable.contains(v),
            "{codec:?}: acknowledged {v} lost; durable {durable:?}"
        );
    }
    let mut seen = HashSet::new();
    for v in &durable {
        assert!(seen.insert(*v), "{codec:?}: value {v} twice in {durable:?}");
        assert!(
            (1..=last).contains(v),
            "{codec:?}: value {v} was never written"
        );
    }
}

use Role::{Acknowledged as Ack, Killed};

#[test]
fn three_writers_any_interleaving_acknowledge_only_durable_records() {
    SHARED_ACKS.store(0, Ordering::Relaxed);
    for codec in codecs() {
        shuttle::check_random(
            move || scenario(codec, &[Ack, Ack, Ack], None, 10),
            common::schedules(),
        );
        shuttle::check_pct(
            move || scenario(codec, &[Ack, Ack, Ack], None, 10),
            common::schedules(),
            3,
        );
    }
    assert!(
        SHARED_ACKS.load(Ordering::Relaxed) > 0,
        "no schedule acknowledged a writer through another's fsync: the model missed the sharing path"
    );
}

#[test]
fn a_writer_killed_before_its_fsync_among_others_loses_nothing_acknowledged() {
    for codec in codecs() {
        for roles in [[Killed, Ack, Ack], [Ack, Killed, Ack]] {
            shuttle::check_random(
                move || scenario(codec, &roles, None, 10),
                common::schedules() / 2,
            );
            shuttle::check_pct(
                move || scenario(codec, &roles, None, 10),
                common::schedules() / 2,
                3,
            );
        }
    }
}

#[test]
fn a_failed_fdatasync_in_any_schedule_acknowledges_nothing_it_covered() {
    for codec in codecs() {
        for fail in 1..=3 {
            shuttle::check_random(
                move || scenario(codec, &[Ack, Ack, Ack], Some(fail), 10),
                common::schedules() / 3,
            );
            shuttle::check_pct(
                move || scenario(codec, &[Ack, Ack, Ack], Some(fail), 10),
                common::schedules() / 3,
                3,
            );
        }
    }
}

/// Records big enough that the 4 KiB segments roll over while the writers
/// interleave: a rotation's fsync and the new segment's first append race the
/// others' appends and shared fsyncs.
#[test]
fn writers_whose_records_roll_the_segment_over_acknowledge_only_durable_records() {
    ROTATED.store(0, Ordering::Relaxed);
    for codec in codecs() {
        shuttle::check_random(
            move || scenario(codec, &[Ack, Ack, Ack], None, 1500),
            common::schedules() / 2,
        );
        shuttle::check_random(
            move || scenario(codec, &[Ack, Killed, Ack], Some(2), 1500),
            common::schedules() / 2,
        );
    }
    assert!(
        ROTATED.load(Ordering::Relaxed) > 0,
        "no schedule rotated the segment: the records are too small for this test"
    );
}
