//! Proves a run's health (`Runs::health`) as the run model decides it from a
//! real store: a live run quiet past `Health::IDLE_AFTER` is idle with no writer and
//! running while a writer holds its lock (the look at `LOCK` is real); blocked
//! units make it need attention; a blocked phase does at once; and the look
//! at the lock changes no byte of the run.
use crate::cli_support::tree_bytes_but_locks;
use runlog::run::{Health, InitSpec, ManualClock, PhaseStatus, Runs, UnitStatus};
use std::sync::Arc;

const T0: i64 = 1_800_000_000_000;

#[test]
fn run_health_follows_the_writer_lock_and_the_quiet_time() {
    let d = tempfile::tempdir().unwrap();
    let clock = ManualClock::at_millis(T0);
    let runs = Runs::new(d.path()).with_clock(Arc::new(clock.clone()));
    let run = runs
        .init(InitSpec {
            id: "r".into(),
            task: "t".into(),
            units: vec!["a".into(), "b".into()],
            ..Default::default()
        })
        .unwrap();
    run.set_unit("a", UnitStatus::Done, None, None).unwrap();
    let idle = Health::IDLE_AFTER.as_millis() as i64;

    // Changed just now: running, the lock not looked at.
    let h = runs.health(&runs.read_run("r").unwrap(), T0 + 1000);
    assert_eq!((h.health, h.writer), (Health::Running, None));

    // Quiet past the threshold while this writer holds the lock: running.
    assert!(runs.writer_active("r").unwrap());
    let h = runs.health(&runs.read_run("r").unwrap(), T0 + idle);
    assert_eq!((h.health, h.writer), (Health::Running, Some(true)), "{h:?}");

    // The writer gone: idle; the look wrote nothing.
    drop(run);
    assert!(!runs.writer_active("r").unwrap());
    let before = tree_bytes_but_locks(d.path());
    let h = runs.health(&runs.read_run("r").unwrap(), T0 + idle);
    assert_eq!((h.health, h.writer), (Health::Idle, Some(false)), "{h:?}");
    assert_eq!(tree_bytes_but_locks(d.path()), before);
    assert!(h.why.contains("no writer, no change for 5m"), "{}", h.why);

    // A unit blocked, then quiet with no writer: needs attention.
    runs.open("r")
        .unwrap()
        .set_unit("b", UnitStatus::Blocked, Some("disk full"), None)
        .unwrap();
    let h = runs.health(&runs.read_run("r").unwrap(), T0 + idle - 1);
    assert_eq!(h.health, Health::Running, "{h:?}");
    let h = runs.health(&runs.read_run("r").unwrap(), T0 + idle);
    assert_eq!(h.health, Health::NeedsAttention, "{h:?}");

    // A phase blocked: needs attention at once, even beside a writer.
    let run = runs.open("r").unwrap();
    run.set_phase("runlog.drive", PhaseStatus::Blocked).unwrap();
    let h = runs.health(&runs.read_run("r").unwrap(), T0);
    assert_eq!(h.health, Health::NeedsAttention, "{h:?}");
    assert_eq!(h.why, "phase runlog.drive blocked, 1 unit(s) blocked");
    run.set_phase("runlog.drive", PhaseStatus::Running).unwrap();
    let h = runs.health(&runs.read_run("r").unwrap(), T0);
    assert_eq!(h.health, Health::Running, "{h:?}");
}
