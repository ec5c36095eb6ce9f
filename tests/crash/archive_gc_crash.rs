//! Issue 21 item 5: a run's archive, `gc` and the restore of an archived run
//! go through the `Vfs`, so the simulated filesystem sees every step, and a
//! crash at every boundary of each (every outcome the model allows, up to
//! `RUNLOG_ARCHIVE_OUTCOMES` per boundary, default 8; all three persistence
//! models; both codecs) leaves:
//!
//! * every run whole in exactly one place: under `runs/` or under a name
//!   `archive` lists, reading as it did before (never in both, never lost);
//! * nothing half deleted where anything lists, reads or restores it: `gc`
//!   moves a run to a hidden name before it deletes a file of it;
//! * a state the next `gc` finishes, leaving no directory behind.
//!
//! A restore acknowledged is durable: a crash right after it that loses every
//! pending change still finds the run under `runs/`.

use crate::common::{env_u64, run_spec, unit_done};
use runlog::engine::sim::{Fate, Persistence, SimFs, SimState};
use runlog::engine::{Codec, Vfs};
use runlog::run::{ManualClock, RunDoc, RunStatus, Runs};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const ROOT: &str = "/data/root";
const DAY_MS: i64 = 86_400_000;
const MODELS: [Persistence; 3] = [
    Persistence::Ordered,
    Persistence::WeakDirs,
    Persistence::Weak,
];

fn runs_on(fs: &SimFs, clock: &ManualClock, codec: Codec) -> Runs {
    Runs::new(ROOT)
        .with_vfs(Arc::new(fs.clone()))
        .with_clock(Arc::new(clock.clone()))
        .with_codec(codec)
}

/// The same filesystem with everything pending made durable: a settled
/// starting point, so that a crash image differs only by the workload's steps.
fn settled(fs: &SimFs) -> SimFs {
    fs.with_state(|s| s.image(&vec![Fate::Whole; s.pending().len()]))
}

/// Records crash images before every mutating call on `fs` until dropped.
struct Images(SimFs, Arc<Mutex<Vec<SimFs>>>);

impl Images {
    fn record(fs: &SimFs, model: Persistence, seed: u64) -> Images {
        let images: Arc<Mutex<Vec<SimFs>>> = Arc::default();
        let sink = images.clone();
        let cap = env_u64("RUNLOG_ARCHIVE_OUTCOMES", 8) as usize;
        let mut seed = seed;
        fs.observe(Some(Box::new(move |s: &SimState, _n, _op| {
            seed += 1;
            for o in s.outcomes(model, cap, seed) {
                sink.lock().unwrap().push(s.image(&o));
            }
        })));
        Images(fs.clone(), images)
    }

    fn take(self) -> Vec<SimFs> {
        self.0.observe(None);
        std::mem::take(&mut *self.1.lock().unwrap())
    }
}

fn json(doc: &RunDoc) -> serde_json::Value {
    serde_json::to_value(doc).unwrap()
}

/// Every directory under `archive/`, hidden ones included.
fn archive_dirs(fs: &SimFs) -> Vec<String> {
    fs.list_dirs(&Path::new(ROOT).join("archive")).unwrap()
}

/// A new root whose run `a` did its one unit and finished.
fn finished_a(codec: Codec) -> (SimFs, ManualClock) {
    let fs = SimFs::new();
    let clock = ManualClock::at("2030-01-02T03:04:05.000Z").unwrap();
    let run = runs_on(&fs, &clock, codec)
        .start(run_spec("a", 1))
        .unwrap()
        .run;
    run.apply(unit_done("u0")).unwrap();
    run.finalize(RunStatus::Done, Some("ok")).unwrap();
    (fs, clock)
}

/// A root with run `a` finished and archived by a fresh start of `a` (which
/// stays live), and run `f` finished: the archived `a` and `f` are what a
/// `gc` ten days later removes. Returns the archived name and the docs.
fn gc_setup(codec: Codec) -> (SimFs, ManualClock, String, RunDoc, RunDoc) {
    let (fs, clock) = finished_a(codec);
    let runs = runs_on(&fs, &clock, codec);
    clock.advance(1_000);
    let started = runs.start(run_spec("a", 1)).unwrap();
    let archived = PathBuf::from(&started.warnings[0].archived_to);
    drop(started);
    let run = runs.start(run_spec("f", 2)).unwrap().run;
    run.apply(unit_done("u0")).unwrap();
    run.apply(unit_done("u1")).unwrap();
    run.finalize(RunStatus::Done, Some("ok")).unwrap();
    drop(run);
    let (a, f) = (runs.read("a").unwrap(), runs.read("f").unwrap());
    clock.advance(10 * DAY_MS);
    let name = archived.file_name().unwrap().to_str().unwrap().to_string();
    (settled(&fs), clock, name, a, f)
}

/// What a `gc` of [`gc_setup`]'s root may leave, whatever befell it (a crash,
/// a fault): `a` whole, `f` whole or gone, only the archived `a` listed and
/// whole, and a next `gc` that finishes the work, leaving no directory in
/// `archive/`.
fn check_after_gc(
    fs: &SimFs,
    clock: &ManualClock,
    codec: Codec,
    archived: &str,
    doc_a: &RunDoc,
    doc_f: &RunDoc,
    ctx: &dyn std::fmt::Debug,
) {
    let r = runs_on(fs, clock, codec);
    let ids = r.ids().unwrap();
    assert!(
        ids == ["a"] || ids == ["a", "f"],
        "{ctx:?}: runs after gc: {ids:?}"
    );
    assert_eq!(json(&r.read("a").unwrap()), json(doc_a), "{ctx:?}");
    if ids.len() == 2 {
        assert_eq!(json(&r.read("f").unwrap()), json(doc_f), "{ctx:?}");
    }
    for e in r.list_archived().unwrap() {
        assert_eq!(e.name, archived, "{ctx:?}: only the archived run lists");
        assert!(
            e.summary.error.is_none(),
            "{ctx:?}: an archived run listed half deleted: {:?}",
            e.summary.error
        );
    }
    let again = r.gc(1).unwrap();
    assert!(again.skipped_unreadable.is_empty(), "{ctx:?}: {again:?}");
    assert_eq!(r.ids().unwrap(), ["a"], "{ctx:?}");
    assert!(r.list_archived().unwrap().is_empty(), "{ctx:?}");
    assert!(
        archive_dirs(fs).is_empty(),
        "{ctx:?}: gc left {:?}",
        archive_dirs(fs)
    );
}

#[test]
fn gc_crashed_at_every_boundary_leaves_whole_runs_and_finishes_next_time() {
    let mut images_checked = 0u64;
    for codec in [Codec::Jsonl, Codec::Binary] {
        for (m, model) in MODELS.into_iter().enumerate() {
            let (fs, clock, archived, doc_a, doc_f) = gc_setup(codec);
            let images = Images::record(&fs, model, 100 * m as u64);
            let report = runs_on(&fs, &clock, codec).gc(1).unwrap();
            let images = images.take();
            assert_eq!(report.removed, vec!["f".to_string()]);
            assert_eq!(report.removed_archived, vec![archived.clone()]);
            assert!(archive_dirs(&fs).is_empty(), "{:?}", archive_dirs(&fs));
            for img in images {
                check_after_gc(&img, &clock, codec, &archived, &doc_a, &doc_f, &model);
                images_checked += 1;
            }
        }
    }
    // Every boundary of two deletions (a run's files, the archive's) and
    // their renames, under three models and two codecs.
    eprintln!("archive_gc_crash: gc, {images_checked} crash images");
    assert!(images_checked >= 300, "{images_checked} crash images");
}

/// A root whose run `a` finished and was archived, with no live `a`: what
/// `restore_archived` brings back.
fn restore_setup(codec: Codec) -> (SimFs, ManualClock, String, RunDoc) {
    let (fs, clock, archived, _, _) = gc_setup(codec);
    let runs = runs_on(&fs, &clock, codec);
    let live_a = runs.run_dir("a").unwrap();
    runlog::engine::remove_dir_all(&fs, &live_a, "test: remove the live run").unwrap();
    fs.sync_dir(live_a.parent().unwrap()).unwrap();
    let name = runs.restore_archived(&archived).unwrap();
    assert_eq!(name, "a");
    let doc = runs.read("a").unwrap();
    // Archive it again (as a start over the finished run would), then settle.
    let started = runs.start(run_spec("a", 1)).unwrap();
    let archived = PathBuf::from(&started.warnings[0].archived_to);
    drop(started);
    runlog::engine::remove_dir_all(&fs, &live_a, "test: remove the live run").unwrap();
    fs.sync_dir(live_a.parent().unwrap()).unwrap();
    let name = archived.file_name().unwrap().to_str().unwrap().to_string();
    (settled(&fs), clock, name, doc)
}

/// What a restore of [`restore_setup`]'s archived run may leave, whatever
/// befell it: the run in exactly one place, live or listed in the archive, and
/// as it was (a restore then brings an archived one back whole). Returns
/// whether it was live.
fn check_restored(
    fs: &SimFs,
    clock: &ManualClock,
    codec: Codec,
    archived: &str,
    doc: &RunDoc,
    ctx: &dyn std::fmt::Debug,
) -> bool {
    let r = runs_on(fs, clock, codec);
    let live = r.ids().unwrap().contains(&"a".to_string());
    let listed: Vec<String> = r
        .list_archived()
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert!(
        live != (listed == [archived]),
        "{ctx:?}: the run must be in exactly one place: live {live}, archived {listed:?}; files {:?}",
        fs.with_state(|s| s.live_files().into_keys().collect::<Vec<_>>())
    );
    if !live {
        assert_eq!(r.restore_archived(archived).unwrap(), "a", "{ctx:?}");
    }
    assert_eq!(json(&r.read("a").unwrap()), json(doc), "{ctx:?}");
    live
}

#[test]
fn restore_of_an_archived_run_crashed_at_every_boundary_leaves_it_in_one_place() {
    let mut images_checked = 0u64;
    for codec in [Codec::Jsonl, Codec::Binary] {
        for (m, model) in MODELS.into_iter().enumerate() {
            let (fs, clock, archived, doc) = restore_setup(codec);
            let images = Images::record(&fs, model, 7 + 100 * m as u64);
            let id = runs_on(&fs, &clock, codec)
                .restore_archived(&archived)
                .unwrap();
            let mut images = images.take();
            assert_eq!(id, "a");
            // Acknowledged: a crash now that loses everything pending.
            images.push(fs.with_state(|s| s.image(&vec![Fate::Absent; s.pending().len()])));
            let acked = images.len() - 1;
            for (i, img) in images.into_iter().enumerate() {
                let live = check_restored(&img, &clock, codec, &archived, &doc, &model);
                if i == acked {
                    assert!(live, "{model:?}: an acknowledged restore was lost");
                }
                images_checked += 1;
            }
        }
    }
    eprintln!("archive_gc_crash: restore, {images_checked} crash images");
    assert!(images_checked >= 30, "{images_checked} crash images");
}

/// A start over a finished run archives it first: a crash at every boundary
/// of that start leaves the finished run readable, under `runs/` or listed in
/// `archive/`, and never both.
#[test]
fn archive_by_a_start_crashed_at_every_boundary_keeps_the_finished_run() {
    let mut images_checked = 0u64;
    for codec in [Codec::Jsonl, Codec::Binary] {
        for (m, model) in MODELS.into_iter().enumerate() {
            let (fs, clock) = finished_a(codec);
            let finished = json(&runs_on(&fs, &clock, codec).read("a").unwrap());
            let fs = settled(&fs);
            clock.advance(1_000);
            let images = Images::record(&fs, model, 13 + 100 * m as u64);
            drop(runs_on(&fs, &clock, codec).start(run_spec("a", 1)).unwrap());
            for img in images.take() {
                let r = runs_on(&img, &clock, codec);
                let archived = r.list_archived().unwrap();
                // A fresh `a` may be there half made (a crash during its
                // init): only the finished one counts.
                let live_finished = r.read("a").is_ok_and(|d| json(&d) == finished);
                match archived.as_slice() {
                    [] => assert!(live_finished, "{model:?}: the finished run is gone"),
                    [e] => {
                        assert!(
                            !live_finished,
                            "{model:?}: the finished run is in two places"
                        );
                        assert!(
                            e.summary.error.is_none(),
                            "{model:?}: {:?}",
                            e.summary.error
                        );
                        assert_eq!(e.summary.status, Some(RunStatus::Done));
                    }
                    more => panic!("{model:?}: archived twice: {more:?}"),
                }
                images_checked += 1;
            }
        }
    }
    eprintln!("archive_gc_crash: archive by a start, {images_checked} crash images");
    assert!(images_checked >= 100, "{images_checked} crash images");
}

/// Every fault (EIO and ENOSPC, once and from then on) at every operation of
/// a `gc` and of a restore of an archived run: the call fails or succeeds,
/// and either way (and on the disk a crash right after leaves) every run is
/// whole in one place, nothing half deleted lists, and the same call once the
/// fault is gone finishes the work.
#[test]
fn gc_and_restore_under_a_fault_at_every_operation_leave_whole_runs() {
    use runlog::engine::sim::{Fault, FaultKind};
    let codec = Codec::Jsonl;
    let faults = |n: u64| {
        (0..n).flat_map(|at| {
            [FaultKind::Eio, FaultKind::Enospc]
                .into_iter()
                .flat_map(move |kind| {
                    [false, true].map(|persistent| Fault {
                        at,
                        kind,
                        persistent,
                    })
                })
        })
    };
    let (base, clock, archived, doc_a, doc_f) = gc_setup(codec);
    let ops = {
        let fs = base.crash(&[]);
        runs_on(&fs, &clock, codec).gc(1).unwrap();
        fs.ops()
    };
    let (mut failed, mut tried) = (0u64, 0u64);
    for fault in faults(ops) {
        let fs = base.crash(&[]);
        fs.inject(Some(fault));
        let r = runs_on(&fs, &clock, codec).gc(1);
        fs.inject(None);
        failed += u64::from(r.is_err());
        tried += 1;
        let image = fs.crash(&[]);
        check_after_gc(&fs, &clock, codec, &archived, &doc_a, &doc_f, &fault);
        check_after_gc(&image, &clock, codec, &archived, &doc_a, &doc_f, &fault);
    }
    eprintln!("archive_gc_crash: gc, {ops} operations, {tried} faults, {failed} calls failed");
    assert!(
        ops >= 50 && failed * 4 >= tried,
        "{ops} ops, {failed} of {tried} failed"
    );

    let (base, clock, archived, doc) = restore_setup(codec);
    let ops = {
        let fs = base.crash(&[]);
        runs_on(&fs, &clock, codec)
            .restore_archived(&archived)
            .unwrap();
        fs.ops()
    };
    let (mut failed, mut tried) = (0u64, 0u64);
    for fault in faults(ops) {
        let fs = base.crash(&[]);
        fs.inject(Some(fault));
        let r = runs_on(&fs, &clock, codec).restore_archived(&archived);
        fs.inject(None);
        failed += u64::from(r.is_err());
        tried += 1;
        for img in [fs.crash(&[]), fs] {
            check_restored(&img, &clock, codec, &archived, &doc, &fault);
        }
    }
    eprintln!("archive_gc_crash: restore, {ops} operations, {tried} faults, {failed} calls failed");
    assert!(
        ops >= 20 && failed * 4 >= tried,
        "{ops} ops, {failed} of {tried} failed"
    );
}
