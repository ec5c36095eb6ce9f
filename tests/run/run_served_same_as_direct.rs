//! A change's outcome does not depend on whether a server applied it: every
//! kind of change, accepted or refused by each rule, is applied to two runs
//! made alike, once directly (`Runs::change_waiting` with no server) and
//! once through a server this process hosts (`Runs::serve`), and the two
//! give the same ack (seq, ids, budget, warnings) or the same typed error
//! (variant, rule, exit code, message), and leave the same document.

use runlog::engine::ErrorChain;
use runlog::run::{
    Acked, BudgetSpec, Change, InitSpec, Json, PhaseStatus, RunError, RunStatus, Runs, UnitStatus,
};
use std::collections::BTreeMap;
use std::time::Duration;

const RUN: &str = "r";

fn unit(name: &str, status: UnitStatus) -> Change {
    Change::Unit {
        unit: name.into(),
        status,
        note: None,
        deps: None,
    }
}

/// Every kind of change, in an order that meets every rule at least once.
fn script() -> Vec<Change> {
    vec![
        unit("b", UnitStatus::InProgress), // held back: a is not done
        unit("a", UnitStatus::Done),       // accepted
        unit("a", UnitStatus::InProgress), // a done unit is never demoted
        unit("", UnitStatus::Done),        // a name that is not one
        unit("b", UnitStatus::Done),       // accepted now
        Change::Phase {
            phase: "p".into(),
            status: PhaseStatus::Done,
        },
        Change::Items {
            items: vec![
                Json(serde_json::json!({"finding": 1})),
                Json(serde_json::json!({"finding": 2})),
            ],
        },
        Change::Resolve {
            id: "item-1".into(),
            note: Some("fixed".into()),
        },
        Change::Resolve {
            id: "item-1".into(),
            note: None,
        }, // already resolved
        Change::Resolve {
            id: "item-9".into(),
            note: None,
        }, // no such item
        Change::Spend {
            budget: "usd".into(),
            amount: 1.0,
        }, // no such budget
        Change::Budget {
            name: "usd".into(),
            spec: BudgetSpec {
                limit: Some(1.5),
                owner: "ops".into(),
            },
        },
        Change::Spend {
            budget: "usd".into(),
            amount: 1.0,
        },
        Change::Spend {
            budget: "usd".into(),
            amount: 1.0,
        }, // BUDGET_EXCEEDED
        Change::Checkpoint {
            state: Json(serde_json::json!({"cursor": 7})),
        },
        unit("c", UnitStatus::Pending),
        Change::Finalize {
            status: RunStatus::Done,
            result: None,
        }, // c is open
        Change::Finalize {
            status: RunStatus::NeedsAttention,
            result: Some("c left".into()),
        },
        unit("c", UnitStatus::Done), // the run is closed
    ]
}

/// What a caller sees of an outcome.
#[derive(Debug, PartialEq)]
enum Seen {
    Acked(Acked),
    Error {
        variant: String,
        rule: Option<String>,
        code: u8,
        message: String,
    },
}

fn seen(r: Result<Acked, RunError>) -> Seen {
    match r {
        Ok(a) => Seen::Acked(a),
        Err(e) => Seen::Error {
            // The variant's name and fields, without the causes' texts.
            variant: format!("{e:?}")
                .split([' ', '('])
                .next()
                .unwrap()
                .to_string(),
            rule: e.rule().map(|r| format!("{r:?}")),
            code: e.exit_code(),
            message: ErrorChain(&e).to_string(),
        },
    }
}

fn fresh() -> (tempfile::TempDir, Runs) {
    let d = tempfile::tempdir().unwrap();
    let runs = Runs::new(d.path())
        .with_clock(std::sync::Arc::new(
            runlog::run::ManualClock::at("2026-12-06T00:00:00Z").unwrap(),
        ))
        .with_lock_wait(Some(Duration::ZERO));
    runs.init(InitSpec {
        id: RUN.into(),
        task: "t".into(),
        units: vec!["a".into(), "b".into()],
        deps: BTreeMap::from([("b".to_string(), vec!["a".to_string()])]),
        ..Default::default()
    })
    .unwrap();
    (d, runs)
}

#[test]
fn every_change_and_refusal_is_the_same_served_as_applied_directly() {
    let (_d1, direct) = fresh();
    let (_d2, served) = fresh();
    let server = served.serve(RUN, Duration::ZERO).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let asked = || {
        stop.load(std::sync::atomic::Ordering::SeqCst)
            .then(|| "done".to_string())
    };
    let (mut refusals, mut ids, mut exceeded) = (0, false, false);
    let report = std::thread::scope(|s| {
        let serving = s.spawn(|| server.run(None, &asked, &|_| {}));
        for (i, c) in script().into_iter().enumerate() {
            let a = seen(direct.change_waiting(RUN, c.clone(), &mut |_| {}));
            let b = seen(served.change_waiting(RUN, c.clone(), &mut |_| {}));
            assert_eq!(b, a, "change {i}: {c:?}: served, then direct");
            match &a {
                Seen::Error { code, .. } => {
                    assert_eq!(*code, 2, "change {i}: {a:?}");
                    refusals += 1;
                }
                Seen::Acked(ack) => {
                    ids |= ack
                        .ids
                        .as_ref()
                        .is_some_and(|ids| ids == &["item-1", "item-2"]);
                    exceeded |= ack.warnings.iter().any(|w| w.code == "BUDGET_EXCEEDED");
                }
            }
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        serving.join().unwrap()
    });
    assert_eq!(refusals, 8, "every refusal of the script was met");
    assert!(
        ids && exceeded,
        "an item's ids and a spend's warning were acked"
    );
    assert!(!report.failed, "{report:?}");
    assert_eq!(report.connections as usize, script().len(), "{report:?}");
    // The same document: both runs' clocks say the same time.
    let doc = |runs: &Runs| runs.read_run(RUN).unwrap().view().to_doc().unwrap();
    assert_eq!(doc(&served), doc(&direct));
}

/// Runs on a simulated filesystem rooted at `root`, a real directory (the
/// server's socket is a real one, in `root/runs/r`), with run `r` made.
fn simulated(root: &std::path::Path) -> (runlog::engine::sim::SimFs, Runs) {
    let fs = runlog::engine::sim::SimFs::new();
    fs.mkdir(root, 0o700);
    let runs = Runs::new(root)
        .with_vfs(std::sync::Arc::new(fs.clone()))
        .with_lock_wait(Some(Duration::ZERO));
    runs.init(InitSpec {
        id: RUN.into(),
        task: "t".into(),
        units: vec!["a".into()],
        ..Default::default()
    })
    .unwrap();
    std::fs::create_dir_all(root.join("runs").join(RUN)).unwrap();
    (fs, runs)
}

#[test]
fn a_failed_fdatasync_on_the_server_reaches_the_client_as_the_engines_own_error() {
    use runlog::engine::sim::{FaultKind, Op};
    let d = tempfile::tempdir().unwrap();
    let done = || unit("a", UnitStatus::Done);
    // Directly: the writer's own fdatasync fails.
    let (fs, runs) = simulated(d.path());
    let run = runs.open(RUN).unwrap();
    fs.fail_next(Some((Op::Fsync, FaultKind::Eio)));
    let direct = run.apply(done()).unwrap_err();
    assert_eq!(fs.faults_fired(), 1);
    drop(run);
    // Served: the server's fdatasync fails, the same way, at the same path.
    let (fs, runs) = simulated(d.path());
    let server = runs.serve(RUN, Duration::ZERO).unwrap();
    let report = std::thread::scope(|s| {
        let serving = s.spawn(|| server.run(None, &|| None, &|_| {}));
        fs.fail_next(Some((Op::Fsync, FaultKind::Eio)));
        let served = runs.change_waiting(RUN, done(), &mut |_| {}).unwrap_err();
        assert_eq!(fs.faults_fired(), 1);
        assert_eq!(seen(Err(served)), seen(Err(direct)));
        // A failed change stops the server: the run accepts no more writes.
        serving.join().unwrap()
    });
    assert!(report.failed, "{report:?}");
    assert!(
        report.stopped.starts_with("a change failed (") && report.stopped.contains("os error 5"),
        "{}",
        report.stopped
    );
}
