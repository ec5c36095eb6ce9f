//! FORMAT.md §14.6: past `Options::max_backlog` entries outside its tables, an
//! append returns only once the running compaction has ended, so a keyed
//! state's overlay stays bounded when appends outpace compaction. Driven
//! deterministically: every snapshot temp file's fsync is held at a gate (a
//! compaction that never ends on its own), one thread appends a new key at a
//! time, and the test watches where it stops. Without the bound it appends
//! everything while the compaction is held, and the overlay holds it all.
use crate::common;
use common::Rejected;
use common::hooked::{HookedFs, Hooks};
use runlog::engine::{
    ApplyError, Codec, CompactionPolicy, Keyed, KeyedMachine, KeyedState, Options, Store,
    SyncPolicy, VfsFile,
};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// One key per transition: `k<v>` set to `v`.
struct Many;

impl KeyedMachine for Many {
    type Header = ();
    type Value = u64;
    type Transition = u64;
    type Error = Rejected;

    fn apply(state: &mut KeyedState<Self>, t: &u64) -> Result<(), ApplyError<Rejected>> {
        state
            .put(&format!("k{t:06}"), *t)
            .map_err(ApplyError::Damaged)
    }
}

/// Holds every fsync of a snapshot temp file while closed.
#[derive(Debug, Default)]
struct Gate {
    closed: Mutex<bool>,
    cv: Condvar,
    held: AtomicU64,
}

#[derive(Debug, Clone)]
struct GatedTemps(Arc<Gate>);

impl GatedTemps {
    fn pass(&self, path: &Path) {
        let temp = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains(TEMP_MARKER));
        if temp {
            self.0.held.fetch_add(1, Ordering::SeqCst);
            let mut c = self.0.closed.lock().unwrap();
            while *c {
                c = self.0.cv.wait(c).unwrap();
            }
        }
    }
}

/// Opens the gate when dropped: a failing assertion must not leave the
/// compaction held, or dropping the store (which waits for it) would hang.
struct OpenOnDrop(Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        *self.0.closed.lock().unwrap_or_else(|p| p.into_inner()) = false;
        self.0.cv.notify_all();
    }
}

impl Hooks for GatedTemps {
    fn sync_data(&self, path: &Path, f: &dyn VfsFile) -> io::Result<()> {
        self.pass(path);
        f.sync_data()
    }
    fn sync_all(&self, path: &Path, f: &dyn VfsFile) -> io::Result<()> {
        self.pass(path);
        f.sync_all()
    }
}

/// A temp file's name holds this (FORMAT.md §5.4: `<final>.tmp-<random>`).
const TEMP_MARKER: &str = ".tmp-";
const BOUND: u64 = 100;
const APPENDS: u64 = 2_000;

#[test]
fn appends_past_the_backlog_wait_for_a_held_compaction_and_the_overlay_stays_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let gate = Arc::new(Gate {
        closed: Mutex::new(true),
        ..Gate::default()
    });
    let o = Options {
        create: true,
        codec: Codec::Binary,
        sync: SyncPolicy::Never,
        compaction: CompactionPolicy::Auto {
            min_log_bytes: 256,
            ratio: 1.0,
        },
        delta_bytes: 256,
        max_backlog: BOUND,
        vfs: Arc::new(HookedFs(GatedTemps(gate.clone()))),
        ..Options::default()
    };
    let dir = tmp.path().join("s");
    let store = Arc::new(Store::<Keyed<Many>>::open(&dir, o.clone()).unwrap());
    // After the store: dropped (on a failure too) before it.
    let open_on_drop = OpenOnDrop(gate.clone());
    let (done, most) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let appender = {
        let (store, done, most) = (store.clone(), done.clone(), most.clone());
        std::thread::spawn(move || {
            for v in 1..=APPENDS {
                store.append(&v).unwrap();
                done.store(v, Ordering::SeqCst);
                let overlay = store.read(|s| s.overlay_len()) as u64;
                most.fetch_max(overlay, Ordering::SeqCst);
            }
        })
    };

    // Wait until the appender has finished, or has stood still for 300 ms
    // with a compaction held at the gate (a liveness check, not a speed one).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = (u64::MAX, Instant::now());
    while !appender.is_finished() {
        let now = done.load(Ordering::SeqCst);
        if now != last.0 {
            last = (now, Instant::now());
        } else if gate.held.load(Ordering::SeqCst) > 0
            && last.1.elapsed() > Duration::from_millis(300)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the appender neither ended nor stopped"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let stopped_at = done.load(Ordering::SeqCst);
    let overlay = store.read(|s| s.overlay_len()) as u64;
    assert!(
        !appender.is_finished() && stopped_at < APPENDS,
        "all {APPENDS} appends returned while the compaction was held (overlay {overlay})"
    );
    assert!(
        overlay <= BOUND + 1,
        "overlay {overlay} past the bound {BOUND} + one append (stopped at {stopped_at})"
    );

    // Released, the appender goes on, one compaction at a time when it must.
    drop(open_on_drop);
    appender.join().unwrap();
    let most = most.load(Ordering::SeqCst);
    assert!(most <= BOUND + 1, "overlay reached {most}");
    let waits = store.stats().backlog_waits.load(Ordering::SeqCst);
    assert!(waits >= 1, "no append waited");
    drop(Arc::try_unwrap(store).ok().expect("the only handle"));

    // Nothing the waits delayed was lost: every key, after a reopen.
    let o = Options { create: false, ..o };
    let store = Store::<Keyed<Many>>::open(&dir, o).unwrap();
    store.read(|s| {
        assert_eq!(s.len(), APPENDS);
        for v in [1, BOUND, BOUND + 2, APPENDS] {
            assert_eq!(s.get(&format!("k{v:06}")).unwrap(), Some(v), "k{v}");
        }
    });
}
