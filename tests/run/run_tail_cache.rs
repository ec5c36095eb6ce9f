//! Proves the tail cache (FORMAT.md §15): a one-shot writer that applied
//! enough of the log leaves `TAIL`, the next open checks every record as
//! before but decodes and applies only those after the cache, and a read
//! through the cache is the run a full replay reads, at every step; a cache
//! that is damaged at any byte, cut short, from another run or over another
//! snapshot is not used and changes nothing; a tagged run keeps none.
use crate::common::{run_spec, unit_done};
use runlog::engine::Key;
use runlog::engine::tailcache::{TAIL_CACHE_MIN_RECORDS, TAIL_FILE};
use runlog::run::{Change, Runs, UnitStatus};
use std::path::{Path, PathBuf};

fn setup(units: usize) -> (tempfile::TempDir, Runs, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let runs = Runs::new(tmp.path());
    runs.init(run_spec("r", units)).unwrap();
    let dir = tmp.path().join("runs").join("r");
    (tmp, runs, dir)
}

/// The run read through the cache (when there is one) and by a full replay
/// (the cache moved aside, then put back as it was).
fn both_ways(runs: &Runs, dir: &Path) -> (runlog::run::RunDoc, runlog::run::RunDoc) {
    let with = runs.read("r").unwrap();
    let tail = dir.join(TAIL_FILE);
    let aside = dir.join("TAIL-aside");
    let had = tail.exists();
    if had {
        std::fs::rename(&tail, &aside).unwrap();
    }
    let without = runs.read("r").unwrap();
    if had {
        std::fs::rename(&aside, &tail).unwrap();
    }
    (with, without)
}

fn change(i: usize) -> Change {
    // Units started, finished, blocked and given notes, in no order.
    let unit = format!("u{}", (i * 37) % 200);
    let status = match i % 4 {
        0 | 1 => UnitStatus::InProgress,
        2 => UnitStatus::Done,
        _ => UnitStatus::Blocked,
    };
    Change::Unit {
        unit,
        status,
        note: i.is_multiple_of(3).then(|| format!("note {i}")),
        deps: None,
    }
}

#[test]
fn a_one_shot_writer_leaves_a_cache_and_the_next_open_applies_only_what_follows_it() {
    let (_tmp, runs, dir) = setup(200);
    for i in 0..TAIL_CACHE_MIN_RECORDS as usize + 2 {
        runs.change("r", unit_done(&format!("u{i}"))).unwrap();
    }
    assert!(dir.join(TAIL_FILE).exists(), "a cache was left");
    let r = runs.read_run("r").unwrap();
    let rep = r.recovery();
    assert!(
        rep.records_from_tail_cache >= TAIL_CACHE_MIN_RECORDS,
        "{rep:?}"
    );
    assert!(rep.records_replayed < TAIL_CACHE_MIN_RECORDS, "{rep:?}");
    assert_eq!(rep.tail_cache_ignored, None);
    assert_eq!(
        rep.records_from_tail_cache + rep.records_replayed,
        rep.last_seq - rep.snapshot_seq.unwrap_or(0),
        "every record above the snapshot is either the cache's or applied: {rep:?}"
    );
}

#[test]
fn a_read_through_the_cache_is_the_run_a_full_replay_reads_at_every_step() {
    let (_tmp, runs, dir) = setup(200);
    let mut used = 0;
    for i in 0..400 {
        // Refused changes (a unit not in the run) write nothing, cache included.
        let _ = runs.change("r", change(i));
        if i % 50 == 49 {
            let _ = runs.change("r", unit_done("no-such-unit"));
        }
        let (with, without) = both_ways(&runs, &dir);
        assert_eq!(with, without, "after change {i}");
        used += u64::from(
            runs.read_run("r")
                .unwrap()
                .recovery()
                .records_from_tail_cache
                > 0,
        );
    }
    assert!(used > 200, "the cache was used by {used} of 400 reads");
}

#[test]
fn a_cache_damaged_at_any_byte_or_cut_short_is_not_used_and_changes_nothing() {
    let (_tmp, runs, dir) = setup(200);
    for i in 0..TAIL_CACHE_MIN_RECORDS as usize + 3 {
        runs.change("r", change(i)).unwrap();
    }
    let tail = dir.join(TAIL_FILE);
    let good = std::fs::read(&tail).unwrap();
    let (_, want) = both_ways(&runs, &dir);
    let mut tried = 0;
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 1 << (i % 8);
        std::fs::write(&tail, &bad).unwrap();
        let r = runs.read_run("r").unwrap();
        assert_eq!(r.recovery().records_from_tail_cache, 0, "byte {i}");
        assert!(r.recovery().tail_cache_ignored.is_some(), "byte {i}");
        assert_eq!(runs.read("r").unwrap(), want, "byte {i}");
        tried += 1;
    }
    for n in [0, 1, 39, 40, good.len() / 2, good.len() - 1] {
        std::fs::write(&tail, &good[..n]).unwrap();
        assert_eq!(runs.read("r").unwrap(), want, "{n} bytes");
        tried += 1;
    }
    assert!(tried > 100);
    // And a writer over the damaged cache appends to the right state.
    std::fs::write(&tail, &good[..good.len() - 1]).unwrap();
    runs.change("r", unit_done("u199")).unwrap();
    let (with, without) = both_ways(&runs, &dir);
    assert_eq!(with, without);
    assert_eq!(with.units["u199"].status, UnitStatus::Done);
}

#[test]
fn a_cache_from_another_run_with_the_same_seqs_is_not_used() {
    let (_a_tmp, a_runs, a_dir) = setup(200);
    let (_b_tmp, b_runs, b_dir) = setup(200);
    for i in 0..TAIL_CACHE_MIN_RECORDS as usize + 3 {
        a_runs.change("r", change(i)).unwrap();
        b_runs.change("r", change(i + 1)).unwrap();
    }
    let (_, want) = both_ways(&b_runs, &b_dir);
    std::fs::copy(a_dir.join(TAIL_FILE), b_dir.join(TAIL_FILE)).unwrap();
    let r = b_runs.read_run("r").unwrap();
    assert_eq!(r.recovery().records_from_tail_cache, 0);
    let why = r.recovery().tail_cache_ignored.clone().unwrap();
    assert!(why.contains("not the log's"), "{why}");
    assert_eq!(b_runs.read("r").unwrap(), want);
}

#[test]
fn a_cache_over_an_older_snapshot_is_not_used() {
    let (_tmp, runs, dir) = setup(200);
    for i in 0..TAIL_CACHE_MIN_RECORDS as usize + 3 {
        runs.change("r", change(i)).unwrap();
    }
    let old = std::fs::read(dir.join(TAIL_FILE)).unwrap();
    runs.open("r").unwrap().compact().unwrap();
    runs.change("r", change(100)).unwrap();
    std::fs::write(dir.join(TAIL_FILE), old).unwrap();
    let r = runs.read_run("r").unwrap();
    assert_eq!(r.recovery().records_from_tail_cache, 0);
    let why = r.recovery().tail_cache_ignored.clone().unwrap();
    assert!(why.contains("stands on the snapshot"), "{why}");
    let (with, without) = both_ways(&runs, &dir);
    assert_eq!(with, without);
}

#[test]
fn a_tagged_run_keeps_no_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = Runs::new(tmp.path()).with_key(Some(Key::from_bytes([7; 32])));
    runs.init(run_spec("r", 50)).unwrap();
    for i in 0..3 * TAIL_CACHE_MIN_RECORDS as usize {
        runs.change("r", change(i % 50)).unwrap();
    }
    assert!(!tmp.path().join("runs/r").join(TAIL_FILE).exists());
}
