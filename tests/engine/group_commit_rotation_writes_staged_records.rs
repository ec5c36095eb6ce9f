//! FORMAT.md §5.2: under `Always`, appenders stage their records and the fsync
//! leader writes them; "a rotation waits for that write and fsync to end, and
//! writes anything still staged before it closes a segment". This drives that
//! interleaving deterministically: the leader is held inside its fsync (a gate in
//! the filesystem), a second appender stages its record behind it, a compaction
//! rotates, and only then is the leader released. The staged record must end up
//! in the closed segment: acknowledged, in the snapshot, and there after reopening.
use crate::common;
use common::*;
use runlog::engine::Store;
use runlog::engine::{FileBytes, LockAttempt, RealFs, Vfs, VfsFile};
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

#[derive(Debug)]
struct GatedFs {
    real: RealFs,
    gate: Arc<Gate>,
}

#[derive(Debug)]
struct GatedFile {
    f: Box<dyn VfsFile>,
    gate: Arc<Gate>,
}

impl VfsFile for GatedFile {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.f.write_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.gate.pass();
        self.f.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.f.sync_all()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.f.set_len(len)
    }
}

impl GatedFs {
    fn wrap(&self, f: Box<dyn VfsFile>) -> Box<dyn VfsFile> {
        Box::new(GatedFile {
            f,
            gate: self.gate.clone(),
        })
    }
}

impl Vfs for GatedFs {
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        self.real.create_dir(path)
    }
    fn dir_mode(&self, path: &Path) -> io::Result<u32> {
        self.real.dir_mode(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.real.list(dir)
    }
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        self.real.create_new(path).map(|f| self.wrap(f))
    }
    fn open_write(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        self.real.open_write(path).map(|f| self.wrap(f))
    }
    fn read(&self, path: &Path) -> io::Result<FileBytes> {
        self.real.read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.real.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.real.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.real.sync_dir(dir)
    }
    fn try_lock(&self, path: &Path, holder: &str) -> io::Result<LockAttempt> {
        self.real.try_lock(path, holder)
    }
}

#[test]
fn a_rotation_writes_records_staged_behind_an_fsync_in_flight() {
    for codec in codecs() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        let gate = Arc::new(Gate::default());
        let mut o = opts(codec);
        o.vfs = Arc::new(GatedFs {
            real: RealFs,
            gate: gate.clone(),
        });
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
        //    the staged record into the segment it closes.
        let s = store.clone();
        let compaction = std::thread::spawn(move || s.compact());
        std::thread::sleep(Duration::from_millis(50));
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
