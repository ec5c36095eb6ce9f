//! Proves the run model's rules through the library: refusals write nothing,
//! closure survives reopening, timestamps come from the injected clock, both
//! codecs round-trip every transition and the document, the checkpoint API
//! saves before it stops, and gc removes only old terminal runs.
use runlog::engine::{Codec, ErrorChain, Machine};
use runlog::run::*;
use serde_json::json;
use std::sync::Arc;

const T0: &str = "2030-01-02T03:04:05.000Z";

fn runs(dir: &std::path::Path, codec: Codec) -> (Runs, ManualClock) {
    let clock = ManualClock::at(T0).unwrap();
    let r = Runs::new(dir)
        .with_clock(Arc::new(clock.clone()))
        .with_codec(codec);
    (r, clock)
}

fn spec(id: &str) -> InitSpec {
    InitSpec {
        id: id.into(),
        task: "t".into(),
        units: vec!["a".into(), "b".into()],
        deps: [("c".to_string(), vec!["b".to_string()])].into(),
        launch: Some(Launch::from_json(&json!({"scriptPath": "go.sh", "args": {"n": 1}})).unwrap()),
        fingerprint: InitSpec::parse_fingerprint("size=1,mtime=2").unwrap(),
        budgets: [(
            "usd".to_string(),
            BudgetSpec {
                limit: Some(10.0),
                owner: "ops".into(),
            },
        )]
        .into(),
    }
}

/// Every kind of change, in an order the rules accept.
fn script() -> Vec<Change> {
    let unit = |u: &str, s| Change::Unit {
        unit: u.into(),
        status: s,
        note: Some(format!("{u} note")),
        deps: None,
    };
    vec![
        unit("a", UnitStatus::InProgress),
        unit("a", UnitStatus::InProgress),
        unit("a", UnitStatus::Done),
        Change::Phase {
            phase: "build".into(),
            status: PhaseStatus::Running,
        },
        Change::Items {
            items: vec![
                Json(json!({"deep": {"list": [1, 2.5, null, "s"]}})),
                Json(json!({})),
            ],
        },
        Change::Resolve {
            id: "item-2".into(),
            note: None,
        },
        Change::Spend {
            budget: "usd".into(),
            amount: 2.25,
        },
        Change::Checkpoint {
            state: Json(json!({"offset": 7})),
        },
        Change::Unit {
            unit: "d".into(),
            status: UnitStatus::Blocked,
            note: None,
            deps: Some(vec!["nowhere".into()]),
        },
        Change::Finalize {
            status: RunStatus::NeedsAttention,
            result: Some("d blocked".into()),
        },
    ]
}

#[test]
fn both_codecs_round_trip_transitions_and_document() {
    let mut docs = vec![];
    for codec in [Codec::Binary, Codec::Jsonl] {
        let d = tempfile::tempdir().unwrap();
        let (r, clock) = runs(d.path(), codec);
        let run = r.init(spec("rt")).unwrap();
        for c in script() {
            clock.advance(1000);
            run.apply(c.clone()).unwrap();
            let t = run.stamp(c);
            let mut buf = vec![];
            codec.encode(&t, &mut buf).unwrap();
            assert_eq!(codec.decode::<Transition>(&buf).unwrap(), t);
        }
        let live = run.doc().unwrap();
        drop(run);
        let read = r.read("rt").unwrap();
        assert_eq!(read, live, "{codec:?}: replay differs from the live state");
        let mut buf = vec![];
        codec.encode(&read, &mut buf).unwrap();
        assert_eq!(codec.decode::<RunDoc>(&buf).unwrap(), read);
        // A compacted (snapshotted) run reads back the same.
        let run = r.open("rt").unwrap();
        run.compact().unwrap();
        drop(run);
        assert_eq!(r.read("rt").unwrap(), read);
        docs.push(read);
    }
    assert_eq!(docs[0], docs[1], "both codecs build the same document");
    let doc = &docs[0];
    assert_eq!(doc.units["a"].attempts, 2);
    assert_eq!(
        doc.units["a"].finished_at.as_deref(),
        Some("2030-01-02T03:04:08.000Z")
    );
    assert_eq!(doc.created_at, T0);
    assert_eq!(doc.budgets["usd"].spent, 2.25);
    assert_eq!(doc.resolved_items[0].id, "item-2");
    assert_eq!(doc.open_at_finish.as_ref().unwrap().items, ["item-1"]);
    assert!(doc.open_at_finish.as_ref().unwrap().units.contains_key("d"));
}

#[test]
fn rules_refuse_without_touching_state_and_closure_survives_reopen() {
    let d = tempfile::tempdir().unwrap();
    let (r, _) = runs(d.path(), Codec::Jsonl);
    let run = r.init(spec("rules")).unwrap();
    run.set_unit("a", UnitStatus::Done, None, None).unwrap();
    let before = run.doc().unwrap();
    let refusals: Vec<Change> = vec![
        Change::Unit {
            unit: "a".into(),
            status: UnitStatus::Pending,
            note: None,
            deps: None,
        },
        Change::Unit {
            unit: "c".into(),
            status: UnitStatus::InProgress,
            note: None,
            deps: None,
        },
        Change::Unit {
            unit: "x".into(),
            status: UnitStatus::Pending,
            note: None,
            deps: Some(vec!["x".into()]),
        },
        Change::Unit {
            unit: "bad,name".into(),
            status: UnitStatus::Pending,
            note: None,
            deps: None,
        },
        Change::Finalize {
            status: RunStatus::Done,
            result: None,
        },
        Change::Finalize {
            status: RunStatus::Running,
            result: None,
        },
        Change::Spend {
            budget: "usd".into(),
            amount: f64::NAN,
        },
        Change::Spend {
            budget: "eur".into(),
            amount: 1.0,
        },
        Change::Init(spec("rules")),
    ];
    for c in refusals {
        let e = run.apply(c.clone()).unwrap_err();
        assert!(e.is_refused() && e.exit_code() == 2, "{c:?}: {e}");
        assert_eq!(run.doc().unwrap(), before, "{c:?} changed the state");
    }
    run.finalize(RunStatus::Aborted, Some("stop")).unwrap();
    drop(run);
    let run = r.open("rules").unwrap();
    for c in [
        Change::Phase {
            phase: "p".into(),
            status: PhaseStatus::Done,
        },
        Change::Finalize {
            status: RunStatus::Aborted,
            result: None,
        },
        Change::Finalize {
            status: RunStatus::Done,
            result: None,
        },
    ] {
        let e = run.apply(c).unwrap_err();
        assert!(ErrorChain(&e).to_string().contains("closed"), "{e}");
    }
    // The machine itself refuses without mutation too.
    let mut doc = run.doc().unwrap();
    let snapshot = doc.clone();
    let t = run.stamp(Change::Items {
        items: vec![Json(json!({}))],
    });
    assert!(RunMachine::apply(&mut doc, &t).is_err());
    assert_eq!(doc, snapshot);
}

#[test]
fn checkpoints_restore_and_stop_only_after_saving() {
    let d = tempfile::tempdir().unwrap();
    let (r, _) = runs(d.path(), Codec::Binary);
    let fp = InitSpec::parse_fingerprint("size=5").unwrap();
    let got = r
        .restore::<serde_json::Value>("job", "t", fp.clone(), StopFlag::new())
        .unwrap();
    assert!(got.state.is_none());
    let cp = got.checkpoints;
    cp.run()
        .declare_budget("calls", Some(3.0), "operator")
        .unwrap();
    assert_eq!(cp.checkpoint(&json!({"offset": 1})).unwrap(), None);
    cp.stop_flag().signal();
    assert_eq!(
        cp.checkpoint(&json!({"offset": 2})).unwrap(),
        Some(StopReason::Signal)
    );
    drop(cp);

    let got = r
        .restore::<serde_json::Value>("job", "t", fp.clone(), StopFlag::new())
        .unwrap();
    assert_eq!(
        got.state,
        Some(json!({"offset": 2})),
        "the stop came after the save"
    );
    let cp = got.checkpoints;
    cp.run().spend("calls", 3.0).unwrap();
    assert_eq!(
        cp.checkpoint(&json!({"offset": 3})).unwrap(),
        Some(StopReason::BudgetExhausted {
            budget: "calls".into(),
            owner: "operator".into()
        })
    );
    drop(cp);

    // A resumed run keeps its spending.
    let got = r
        .restore::<serde_json::Value>("job", "t", fp.clone(), StopFlag::new())
        .unwrap();
    assert_eq!(
        got.checkpoints.run().doc().unwrap().budgets["calls"].spent,
        3.0
    );
    drop(got);

    let changed = InitSpec::parse_fingerprint("size=6").unwrap();
    let got = r
        .restore::<serde_json::Value>("job", "t", changed.clone(), StopFlag::new())
        .unwrap();
    assert!(got.state.is_none());
    assert_eq!(got.warnings[0].code, Warning::CHECKPOINT_DISCARDED);
    assert_eq!(got.warnings[0].changed, ["size"]);
    got.checkpoints.checkpoint(&json!({"offset": 9})).unwrap();
    got.checkpoints.complete(Some("all done")).unwrap();
    let got = r
        .restore::<serde_json::Value>("job", "t", changed, StopFlag::new())
        .unwrap();
    assert!(got.state.is_none(), "after completion: fresh");
    let codes: Vec<&str> = got.warnings.iter().map(|w| w.code.as_str()).collect();
    assert_eq!(
        codes,
        [runlog::run::Warning::RUN_FINISHED_STARTED_FRESH],
        "and says so"
    );
}

#[test]
fn gc_removes_only_old_terminal_runs() {
    let d = tempfile::tempdir().unwrap();
    let (r, clock) = runs(d.path(), Codec::Jsonl);
    r.init(spec("old-done"))
        .unwrap()
        .finalize(RunStatus::Aborted, None)
        .unwrap();
    r.init(spec("live")).unwrap();
    clock.advance(5 * 86_400_000);
    r.init(spec("new-done"))
        .unwrap()
        .finalize(RunStatus::Aborted, None)
        .unwrap();
    clock.advance(3 * 86_400_000);
    let report = r.gc(7).unwrap();
    assert_eq!(report.removed, ["old-done"]);
    assert_eq!(r.ids().unwrap(), ["live", "new-done"]);
    assert!(r.gc(0).unwrap().removed == ["new-done"]);
    assert_eq!(r.ids().unwrap(), ["live"]);
}
