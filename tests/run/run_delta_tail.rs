//! Proves a live run's tail stays small (FORMAT.md §14): one-shot changes and
//! a long-lived writer flush delta tables, and every open, writer or reader,
//! reads at most about `RUN_DELTA_BYTES` of log through the Vfs seam and
//! replays at most that many records, whatever the run's size or age; the
//! run read through its deltas is the run its changes made, unit by unit;
//! the long-lived writer merges the full table and a one-shot one never does.

use crate::common::hooked::{HookedFs, Hooks};
use crate::open_counting_vfs::CountingFs;
use runlog::engine::Codec;
use runlog::engine::vfs::VfsFile;
use runlog::engine::{RealFs, Vfs};
use runlog::run::{
    Change, InitSpec, ManualClock, RUN_DELTA_BYTES, RUN_PREALLOCATE, Runs, UnitStatus,
};
use std::collections::BTreeMap;
use std::sync::Arc;

const UNITS: usize = 2_000;

fn name(i: usize) -> String {
    format!("u{i:05}")
}

/// Bytes of `seg-*` files read through `fs` since its last reset.
fn seg_bytes_read(fs: &CountingFs) -> u64 {
    let c = fs.counts();
    // Whole-file reads, and a one-shot writer's catch-up under the lock.
    c.reads
        .iter()
        .chain(&c.tails)
        .chain(&c.tails_for_write)
        .filter(|(p, _)| p.file_name().unwrap().to_string_lossy().starts_with("seg-"))
        .map(|(_, n)| *n as u64)
        .sum()
}

/// Seg bytes read and records replayed by a lock-free read of the run, with
/// the run's done count.
fn read_cost(runs: &Runs, fs: &CountingFs) -> (u64, u64, u64) {
    fs.reset();
    let r = runs.read_run("live").unwrap();
    let seg = seg_bytes_read(fs);
    (seg, r.recovery().records_replayed, r.view().counts().done)
}

/// Snapshot files by kind: (full tables, delta tables).
fn snapshot_kinds(dir: &std::path::Path) -> (usize, usize) {
    let mut kinds = (0, 0);
    for e in std::fs::read_dir(dir).unwrap() {
        let n = e.unwrap().file_name().to_string_lossy().into_owned();
        if n.starts_with("snap-") && n.ends_with(".snap") {
            let b = std::fs::read(dir.join(&n)).unwrap();
            // Deltas are table versions 3 and 5 (the latter with a paged
            // index, FORMAT.md §11.8, §14).
            match u16::from_le_bytes([b[8], b[9]]) {
                3 | 5 => kinds.1 += 1,
                _ => kinds.0 += 1,
            }
        }
    }
    kinds
}

/// Runs under `root` whose reads `fs` counts, on a fixed clock.
fn counted_runs(root: &std::path::Path, fs: &CountingFs) -> Runs {
    let clock = Arc::new(ManualClock::at("2030-01-02T03:04:05.000Z").unwrap());
    Runs::new(root)
        .with_clock(clock)
        .with_lock_wait(Some(std::time::Duration::from_secs(2)))
        .with_vfs(Arc::new(fs.clone()) as Arc<dyn Vfs>)
}

/// A segment read at open is bounded by the deltas: the flush bound, plus
/// one segment header and the record that crossed it.
const READ_BOUND: u64 = RUN_DELTA_BYTES + 4096;

#[test]
fn a_binary_runs_one_shot_change_reads_its_preallocated_zeros_only_to_the_run_step() {
    // A binary run's active segment ends in zeros filled ahead (FORMAT.md
    // §3.2), and a one-shot change reads them to the end of the file twice:
    // its lock-free replay, then its catch-up under the lock. A run fills
    // RUN_PREALLOCATE ahead, not the engine's 1 MiB, so that stays small.
    let dir = tempfile::tempdir().unwrap();
    let fs = CountingFs::new();
    let runs = counted_runs(dir.path(), &fs).with_codec(Codec::Binary);
    drop(
        runs.init(InitSpec {
            id: "live".into(),
            task: "binary".into(),
            units: (0..200).map(name).collect(),
            ..InitSpec::default()
        })
        .unwrap(),
    );
    let bound = RUN_DELTA_BYTES + 4096 + 2 * RUN_PREALLOCATE;
    let mut worst = 0u64;
    for i in 0..300usize {
        fs.reset();
        runs.change(
            "live",
            Change::Unit {
                unit: name(i % 200),
                status: match i < 200 {
                    true => UnitStatus::InProgress,
                    false => UnitStatus::Done,
                },
                note: Some(format!("binary one-shot {i}")),
                deps: None,
            },
        )
        .unwrap();
        worst = worst.max(seg_bytes_read(&fs));
    }
    // The zeros are there to be read: the segment was filled ahead.
    assert!(worst > RUN_PREALLOCATE / 2, "read only {worst} bytes");
    assert!(
        worst <= bound,
        "a one-shot change of a binary run read {worst} log bytes, more than {bound}"
    );
    let r = runs.read_run("live").unwrap();
    let c = r.view().counts();
    assert_eq!((c.in_progress, c.done), (100, 100));
}

#[test]
fn one_shot_changes_and_a_long_lived_writer_keep_every_open_to_the_delta_bound() {
    let dir = tempfile::tempdir().unwrap();
    let fs = CountingFs::new();
    let runs = counted_runs(dir.path(), &fs);
    let run_dir = runs.run_dir("live").unwrap();
    drop(
        runs.init(InitSpec {
            id: "live".into(),
            task: "delta".into(),
            units: (0..UNITS).map(name).collect(),
            ..InitSpec::default()
        })
        .unwrap(),
    );
    let mut model: BTreeMap<String, UnitStatus> = BTreeMap::new();
    let mut worst = (0u64, 0u64);
    let mut worst_call = 0u64;

    // One-shot changes, each its own open, append and drop.
    let one_shots = std::env::var("RUNLOG_DELTA_ONE_SHOTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(900usize);
    for i in 0..one_shots {
        let unit = name((i * 7919) % UNITS);
        let status = if i % 2 == 0 {
            UnitStatus::InProgress
        } else {
            UnitStatus::Done
        };
        let over_a_table = snapshot_kinds(&run_dir).0 > 0;
        fs.reset();
        runs.change(
            "live",
            Change::Unit {
                unit: unit.clone(),
                status,
                note: Some(format!("one-shot {i}")),
                deps: None,
            },
        )
        .unwrap();
        // The call's own reads, once a table exists: its open, and its flush
        // when one was due, which copies the tail it holds and reads no log
        // (FORMAT.md §14.4); the first flush (a full table) rebuilds.
        if over_a_table {
            worst_call = worst_call.max(seg_bytes_read(&fs));
        }
        model.insert(unit, status);
        if i % 25 == 0 {
            let (seg, replayed, _) = read_cost(&runs, &fs);
            worst = (worst.0.max(seg), worst.1.max(replayed));
        }
    }
    let (full, deltas) = snapshot_kinds(&run_dir);
    assert!(
        deltas >= 1,
        "no delta table after {one_shots} one-shot changes"
    );
    assert!(full >= 1, "no full table under the deltas");
    assert!(
        worst.0 <= READ_BOUND,
        "an open read {} log bytes, more than {READ_BOUND}",
        worst.0
    );
    assert!(
        worst_call <= READ_BOUND,
        "a one-shot change (open, append, flush) read {worst_call} log bytes, more than {READ_BOUND}"
    );

    // A long-lived writer: many changes through one open.
    let run = runs.open("live").unwrap();
    for i in 0..3_000usize {
        let unit = name((i * 104_729) % UNITS);
        run.apply(Change::Unit {
            unit: unit.clone(),
            status: UnitStatus::Done,
            note: Some(format!("long-lived {i}")),
            deps: None,
        })
        .unwrap();
        model.insert(unit, UnitStatus::Done);
    }
    let stats = run.stats();
    let written = stats.snapshots.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        written >= 2,
        "the long-lived writer flushed {written} snapshots"
    );
    drop(run);

    let (seg, replayed, done) = read_cost(&runs, &fs);
    worst = (worst.0.max(seg), worst.1.max(replayed));
    assert!(worst.0 <= READ_BOUND, "{worst:?}");
    // A record is at least ~100 bytes of JSONL: the bound in records follows.
    assert!(worst.1 <= READ_BOUND / 100, "{worst:?}");
    let want_done = model.values().filter(|s| **s == UnitStatus::Done).count() as u64;
    assert_eq!(done, want_done);

    // Every unit is what its last change made it, read through the chain.
    let r = runs.read_run("live").unwrap();
    let view = r.view();
    for i in 0..UNITS {
        let u = view.unit(&name(i)).unwrap().unwrap();
        let want = model.get(&name(i)).copied().unwrap_or(UnitStatus::Pending);
        assert_eq!(u.status, want, "unit {}", name(i));
    }
    let iterated = view.units().filter(|u| u.is_ok()).count();
    assert_eq!(iterated, UNITS, "iteration through the deltas");
}

/// Holds the first table a compaction creates until the test opens the gate.
#[derive(Debug, Clone, Default)]
struct HeldFlush(Arc<(std::sync::Mutex<(bool, bool)>, std::sync::Condvar)>);

impl HeldFlush {
    /// Waits until a flush is held at its table (true) or `secs` passed (false).
    fn wait_held(&self, secs: u64) -> bool {
        let (m, cv) = &*self.0;
        let g = m.lock().unwrap();
        let (g, _) = cv
            .wait_timeout_while(g, std::time::Duration::from_secs(secs), |s| !s.0)
            .unwrap();
        g.0
    }

    fn release(&self) {
        let (m, cv) = &*self.0;
        m.lock().unwrap().1 = true;
        cv.notify_all();
    }
}

impl Hooks for HeldFlush {
    fn create_new(&self, path: &std::path::Path) -> std::io::Result<Box<dyn VfsFile>> {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("snap-") && name.contains(".tmp") {
            let (m, cv) = &*self.0;
            let mut g = m.lock().unwrap();
            g.0 = true;
            cv.notify_all();
            while !g.1 {
                g = cv.wait(g).unwrap();
            }
        }
        RealFs.create_new(path)
    }
}

#[test]
fn a_writer_closing_while_its_flush_ran_flushes_the_tail_it_left() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::at("2030-01-02T03:04:05.000Z").unwrap());
    drop(
        Runs::new(dir.path())
            .with_clock(clock)
            .init(InitSpec {
                id: "live".into(),
                task: "delta".into(),
                units: (0..UNITS).map(name).collect(),
                ..InitSpec::default()
            })
            .unwrap(),
    );
    let held = HeldFlush::default();
    let runs = Runs::new(dir.path()).with_vfs(Arc::new(HookedFs(held.clone())) as Arc<dyn Vfs>);
    let run = runs.open("live").unwrap();
    let change = |i: usize| Change::Unit {
        unit: name(i % UNITS),
        status: UnitStatus::Done,
        note: Some(format!(
            "long-lived change {i} with a note long enough to count"
        )),
        deps: None,
    };
    // Appends until a background flush is due and held at its table.
    let mut i = 0;
    while !held.wait_held(0) {
        run.apply(change(i)).unwrap();
        i += 1;
        assert!(i < 20_000, "no flush was started after {i} changes");
    }
    // Twice as much again while it is held: the tail passes the bound a
    // second time, and no second flush can start beside the held one.
    let more = 2 * i;
    for _ in 0..more {
        run.apply(change(i)).unwrap();
        i += 1;
    }
    held.release();
    drop(run);

    let fs = CountingFs::new();
    let counted = Runs::new(dir.path()).with_vfs(Arc::new(fs.clone()) as Arc<dyn Vfs>);
    let (seg, replayed, done) = read_cost(&counted, &fs);
    assert!(
        seg <= READ_BOUND,
        "the closed writer left {seg} bytes of log ({replayed} records) after the newest snapshot"
    );
    assert_eq!(done as usize, i.min(UNITS), "every unit changed is done");
}
