//! FORMAT.md §5.2: under `Always`, appenders stage their records and the fsync
//! leader writes them; "a rotation waits for that write and fsync to end, and
//! writes anything still staged before it closes a segment". This drives that
//! interleaving deterministically: the leader is held inside its fsync (a gate in
//! the filesystem), a second appender stages its record behind it, a compaction
//! rotates, and only then is the leader released. The staged record must end up
//! in the closed segment: acknowledged, in the snapshot, and there after reopening.
use crate::common;
use common::hooked::{HookedFs, Hooks};
use common::*;
use runlog::engine::Store;
use runlog::engine::VfsFile;
use std::io;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

#[derive(Debug, Default)]
struct GateState {
    armed: bool,
    held: bool,
}

/// Blocks the first `sync_data` after arming until released.
#[derive(Debug, Default)]
struct Gate {
    s: Mutex<GateState>,
    cv: Condvar,
}

impl Gate {
    fn pass(&self) {
        let mut s = self.s.lock().unwrap();
        if s.armed {
            s.armed = false;
            s.held = true;
            self.cv.notify_all();
            while s.held {
                s = self.cv.wait(s).unwrap();
            }
        }
    }
    fn wait_held(&self) {
        let mut s = self.s.lock().unwrap();
        while !s.held {
            s = self.cv.wait(s).unwrap();
        }
    }
    fn release(&self) {
        self.s.lock().unwrap().held = false;
        self.cv.notify_all();
    }
}

/// RealFs whose file fsyncs pass the gate first.
#[derive(Debug, Clone)]
struct GatedFs(Arc<Gate>);

impl Hooks for GatedFs {
    fn sync_data(&self, _: &Path, f: &dyn VfsFile) -> io::Result<()> {
        self.0.pass();
        f.sync_data()
    }
}

/// Waits until the thread `task` (`/proc/PID/task/TID`) sleeps in a futex wait:
/// blocked on a lock, as a compaction is while the leader's fsync holds the
/// segment. Polls the kernel's view of the thread, not a clock; fails after
/// 30 s rather than go on unobserved.
fn wait_blocked_on_a_lock(task: &Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let stat = std::fs::read_to_string(task.join("stat")).unwrap_or_default();
        // The state follows the command name in parentheses.
        let state = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .next();
        let wchan = std::fs::read_to_string(task.join("wchan")).unwrap_or_default();
        // A kernel that hides wchan shows "0": the sleeping state is then all there is.
        if state == Some("S") && (wchan.contains("futex") || wchan.trim() == "0") {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} never blocked on a lock (state {state:?}, wchan {wchan:?})",
            task.display()
        );
        std::thread::yield_now();
    }
}

#[test]
fn a_rotation_writes_records_staged_behind_an_fsync_in_flight() {
    for codec in codecs() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        let gate = Arc::new(Gate::default());
        let mut o = opts(codec);
        o.vfs = Arc::new(HookedFs(GatedFs(gate.clone())));
        let store = Arc::new(Store::<Ledger>::open(&dir, o.clone()).unwrap());

        // 1. The leader: its fsync is held at the gate, with its write done.
        gate.s.lock().unwrap().armed = true;
        let s = store.clone();
        let leader = std::thread::spawn(move || s.append(&entry(1, 10)));
        gate.wait_held();

        // 2. A second appender stages its record and waits behind the leader.
        let s = store.clone();
        let follower = std::thread::spawn(move || s.append(&entry(2, 20)));
        while store.last_seq() < 2 {
            std::thread::sleep(Duration::from_millis(1));
        }

        // 3. A compaction rotates: it must wait for the leader's fsync, then write
        //    the staged record into the segment it closes. The gate is released
        //    only once the compaction's thread is seen blocked on a lock.
        let s = store.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let compaction = std::thread::spawn(move || {
            tx.send(std::fs::read_link("/proc/thread-self").unwrap())
                .unwrap();
            s.compact()
        });
        let task = Path::new("/proc").join(rx.recv().unwrap());
        wait_blocked_on_a_lock(&task);
        assert!(
            !compaction.is_finished(),
            "{codec:?}: compaction ran past a held fsync"
        );
        gate.release();

        assert_eq!(leader.join().unwrap().unwrap(), 1, "{codec:?}");
        assert_eq!(follower.join().unwrap().unwrap(), 2, "{codec:?}");
        let report = compaction.join().unwrap().unwrap();
        assert_eq!(
            report.snapshot_seq, 2,
            "{codec:?}: the snapshot holds the staged record"
        );
        drop(Arc::try_unwrap(store).ok().unwrap());

        o.create = false;
        let again = Store::<Ledger>::open(&dir, o).unwrap();
        assert_eq!(again.read(|st| st.values.clone()), vec![1, 2], "{codec:?}");
    }
}
