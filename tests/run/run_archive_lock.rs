//! Proves that an archived run is moved or deleted only under its writer lock:
//! `restore_archived` refuses an archived run another holder has (and moves
//! nothing), `gc` skips it (and deletes nothing), and once the lock is free each
//! does its work. gc deletes through a hidden name, so a removal a crash cut
//! short is never listed or restored, and the next gc finishes it.
use crate::common::{run_spec, unit_done};
use runlog::engine::{self, Keyed, Options, Store};
use runlog::run::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DAY_MS: i64 = 86_400_000;

/// A runs root whose run `job` finished and was archived by a fresh `start`;
/// the fresh run is removed again so that the archived one may come back.
fn archived_job(root: &Path) -> (Runs, ManualClock, PathBuf) {
    let clock = ManualClock::at("2030-01-02T03:04:05.000Z").unwrap();
    // A short wait, not none: a child another test forks shares a dropped
    // store's LOCK descriptor until its exec (tests/common `opts` says more).
    let runs = Runs::new(root)
        .with_clock(Arc::new(clock.clone()))
        .with_lock_wait(Some(std::time::Duration::from_secs(2)));
    let run = runs.start(run_spec("job", 1)).unwrap().run;
    run.apply(unit_done("u0")).unwrap();
    run.finalize(RunStatus::Done, Some("ok")).unwrap();
    drop(run);
    let started = runs.start(run_spec("job", 1)).unwrap();
    let archived = PathBuf::from(&started.warnings[0].archived_to);
    drop(started);
    std::fs::remove_dir_all(runs.run_dir("job").unwrap()).unwrap();
    (runs, clock, archived)
}

/// Holds the archived run's writer lock, as another process's writer would.
fn hold(dir: &Path) -> Store<Keyed<RunKeyed>> {
    Store::<Keyed<RunKeyed>>::open(dir, Options::default()).unwrap()
}

fn is_locked(e: &RunError) -> bool {
    matches!(
        e,
        RunError::Engine {
            source: engine::Error::Locked { .. },
            ..
        }
    )
}

#[test]
fn a_restore_moves_nothing_while_the_archived_run_is_held() {
    let tmp = tempfile::tempdir().unwrap();
    let (runs, _clock, archived) = archived_job(tmp.path());
    let name = archived.file_name().unwrap().to_str().unwrap().to_string();
    let holder = hold(&archived);
    let e = runs.restore_archived(&name).unwrap_err();
    assert!(is_locked(&e), "{e}");
    assert!(archived.is_dir(), "the archived run stays where it was");
    assert!(!runs.run_dir("job").unwrap().exists(), "nothing was moved");
    drop(holder);
    assert_eq!(runs.restore_archived(&name).unwrap(), "job");
    assert!(!archived.exists());
    let doc = runs.read("job").unwrap();
    assert_eq!(doc.status, RunStatus::Done);
    assert_eq!(doc.units["u0"].status, UnitStatus::Done);
}

#[test]
fn gc_skips_an_archived_run_in_use_and_removes_it_once_free() {
    let tmp = tempfile::tempdir().unwrap();
    let (runs, clock, archived) = archived_job(tmp.path());
    let name = archived.file_name().unwrap().to_str().unwrap().to_string();
    clock.advance(8 * DAY_MS);
    let holder = hold(&archived);
    let report = runs.gc(7).unwrap();
    assert_eq!(
        report.skipped_locked,
        vec![format!("{ARCHIVE_SUBDIR}/{name}")]
    );
    assert!(report.removed_archived.is_empty());
    assert!(archived.is_dir(), "a held archived run is not deleted");
    drop(holder);
    let report = runs.gc(7).unwrap();
    assert_eq!(report.removed_archived, vec![name]);
    assert!(!archived.exists());
    let left: Vec<_> = std::fs::read_dir(tmp.path().join(ARCHIVE_SUBDIR))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_removal_cut_short_is_never_listed_or_restored_and_the_next_gc_finishes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (runs, _clock, archived) = archived_job(tmp.path());
    let name = archived.file_name().unwrap().to_str().unwrap().to_string();
    // What a crash between gc's rename and its delete leaves.
    let doomed = archived.with_file_name(format!(".removing.{name}"));
    std::fs::rename(&archived, &doomed).unwrap();
    assert!(runs.list_archived().unwrap().is_empty());
    let hidden = doomed.file_name().unwrap().to_str().unwrap().to_string();
    assert!(runs.restore_archived(&hidden).is_err());
    assert!(doomed.is_dir() && !runs.run_dir("job").unwrap().exists());
    runs.gc(7).unwrap();
    assert!(!doomed.exists(), "gc finishes the removal");
}

#[test]
fn a_name_no_archived_run_has_is_refused_typed() {
    let tmp = tempfile::tempdir().unwrap();
    let (runs, _clock, archived) = archived_job(tmp.path());
    let archive = archived.parent().unwrap();
    for (name, says) in [
        ("nope.1", "no archived run \"nope.1\" under"),
        ("..", "\"..\" is not the name of an archived run"),
        ("a/b", "\"a/b\" is not the name of an archived run"),
    ] {
        let e = runs.restore_archived(name).unwrap_err();
        assert!(
            matches!(&e, RunError::NotArchived { name: n, archive: a } if n == name && a == archive),
            "{e:?}"
        );
        assert!(e.is_refused(), "{e}");
        assert!(
            e.to_string().starts_with(&format!("refused: {says}")),
            "{e}"
        );
    }
    assert!(archived.is_dir(), "nothing was moved");
}
