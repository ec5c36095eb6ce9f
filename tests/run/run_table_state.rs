//! Proves a run kept in a table snapshot (format v2) is the same run as the
//! whole-document reference model at every step (compacted, with a tail, after
//! a reopen, in a lock-free read, printed streamed), that a run written in
//! format v1 opens and its first compaction writes a table, that a long-lived
//! writer hands what it held to the table at each compaction, and that a
//! damaged table block is reported with file and offset — never a unit
//! silently missing.

use runlog::engine::{self, CompactionPolicy, ErrorChain, Machine, Options, Store};
use runlog::run::{
    Change, InitSpec, ManualClock, RunDoc, RunMachine, RunStatus, Runs, Transition, UnitStatus,
};
use std::sync::Arc;

const T0: i64 = 1_764_547_200_000; // 2025-12-01T00:00:00Z

fn runs(root: &std::path::Path, clock: &Arc<ManualClock>) -> Runs {
    Runs::new(root)
        .with_clock(clock.clone())
        .with_compaction(CompactionPolicy::Manual)
}

fn name(i: usize) -> String {
    format!("u{i:07}")
}

/// The changes of a workload over `n` units: init with deps, then starts,
/// finishes, notes and a budget.
fn workload(n: usize) -> Vec<Change> {
    let mut cs = vec![Change::Init(InitSpec {
        id: "big".into(),
        task: "table".into(),
        units: (0..n).map(name).collect(),
        deps: [(name(n - 1), vec![name(0)])].into(),
        ..InitSpec::default()
    })];
    for i in 0..n {
        let status = if i % 3 == 0 {
            UnitStatus::Done
        } else {
            UnitStatus::InProgress
        };
        if i == n - 1 {
            continue; // held back by u0000000's dependant rule only if not done
        }
        cs.push(Change::Unit {
            unit: name(i),
            status: UnitStatus::InProgress,
            note: None,
            deps: None,
        });
        cs.push(Change::Unit {
            unit: name(i),
            status,
            note: (i % 7 == 0).then(|| format!("note {i}")),
            deps: None,
        });
    }
    cs.push(Change::Phase {
        phase: "p".into(),
        status: runlog::run::PhaseStatus::Running,
    });
    cs
}

/// Applies `changes` to the reference model, each stamped as the run does.
fn reference(changes: &[Change], clock_start: i64) -> RunDoc {
    let mut doc = RunDoc::default();
    for (i, c) in changes.iter().enumerate() {
        let t = Transition {
            at: runlog::run::clock::format_rfc3339(clock_start + i as i64),
            change: c.clone(),
        };
        RunMachine::apply(&mut doc, &t).expect("the reference accepts the workload");
    }
    doc
}

#[test]
fn a_table_backed_run_equals_the_reference_at_every_step() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::at_millis(T0));
    let runs = runs(dir.path(), &clock);
    let n = 3_000;
    let changes = workload(n);
    let (head, tail) = changes.split_at(changes.len() - 200);
    let run = {
        let c = &head[0];
        let Change::Init(spec) = c else {
            unreachable!()
        };
        runs.init(spec.clone()).unwrap()
    };
    for c in &head[1..] {
        clock.advance(1);
        run.apply(c.clone()).unwrap();
    }
    let compacted = run.compact().unwrap();
    assert!(compacted.snapshot_bytes > 0);
    let snap = std::fs::read(
        run.dir()
            .join(format!("snap-{:020}.snap", compacted.snapshot_seq)),
    )
    .unwrap();
    assert_eq!(&snap[..8], b"RUNLOGtb", "compaction writes a table");
    // Bytes per unit on disk: the target is 64 B for a 12-byte name.
    let per_unit = snap.len() as f64 / n as f64;
    assert!(per_unit <= 64.0, "{per_unit:.1} bytes per unit");
    for c in tail {
        clock.advance(1);
        run.apply(c.clone()).unwrap();
    }
    let want = reference(&changes, T0);
    assert_eq!(run.doc().unwrap(), want, "live");
    assert_eq!(run.counts().total(), n as u64);
    assert_eq!(
        run.counts().done,
        want.units
            .values()
            .filter(|u| u.status == UnitStatus::Done)
            .count() as u64
    );
    assert_eq!(
        run.resume_set().unwrap(),
        runlog::run::resume_set(&want.units)
    );
    drop(run);

    // Lock-free: the table mapped and the tail replayed.
    let read = runs.read_run("big").unwrap();
    let view = read.view();
    assert_eq!(view.to_doc().unwrap(), want, "lock-free");
    assert_eq!(
        view.unit(&name(7)).unwrap().as_ref(),
        want.units.get(&name(7))
    );
    assert_eq!(view.unit("absent").unwrap(), None);
    // Streamed printing is byte-for-byte the whole document's.
    assert_streamed_as_whole(&view, &want);
    let from: Vec<String> = view
        .units_from(Some(&name(n - 3)))
        .map(|u| u.unwrap().0)
        .collect();
    assert_eq!(from, [name(n - 3), name(n - 2), name(n - 1)]);

    // Reopened for writing: replays only the tail over the table.
    let run = runs.open("big").unwrap();
    assert_eq!(run.recovery().records_replayed, 200);
    assert_eq!(run.doc().unwrap(), want, "reopened");
    // Finalizing done is refused by the counts, listing the open units.
    let err = run.finalize(RunStatus::Done, None).unwrap_err();
    assert!(ErrorChain(&err).to_string().contains("not done"), "{err}");
}

/// Printed streamed, compact and pretty, the document and the resume set are
/// byte for byte serde_json's text of the whole ones.
fn assert_streamed_as_whole(view: &runlog::run::RunView<'_>, want: &RunDoc) {
    let set = runlog::run::resume_set(&want.units);
    for pretty in [false, true] {
        let mut doc = Vec::new();
        view.write_json(&mut doc, pretty).unwrap();
        assert_eq!(
            String::from_utf8(doc).unwrap(),
            whole(want, pretty),
            "the streamed document prints as the whole one (pretty: {pretty})"
        );
        let mut resume = Vec::new();
        view.write_resume_json(&mut resume, pretty).unwrap();
        assert_eq!(
            String::from_utf8(resume).unwrap(),
            whole(&set, pretty),
            "the streamed resume set prints as the whole one (pretty: {pretty})"
        );
        assert_eq!(view.resume_set().unwrap(), set);
        let mut eligible = Vec::new();
        let dep_blocked = view.resume_streamed(&mut |n| eligible.push(n)).unwrap();
        assert_eq!(
            (eligible, dep_blocked),
            (set.eligible.clone(), set.dep_blocked.clone())
        );
    }
}

/// serde_json's text of a value, compact or pretty.
fn whole(value: &impl serde::Serialize, pretty: bool) -> String {
    if pretty {
        serde_json::to_string_pretty(value).unwrap()
    } else {
        serde_json::to_string(value).unwrap()
    }
}

#[test]
fn every_field_prints_streamed_as_the_whole_document() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::at_millis(T0));
    let runs = runs(dir.path(), &clock);
    // No units yet: the streamed fields stay `{}` and `[]`.
    let run = runs
        .init(InitSpec {
            id: "fields".into(),
            task: "every field, \"quoted\"\nover two lines".into(),
            ..InitSpec::default()
        })
        .unwrap();
    let check = |run: &runlog::run::Run| {
        let want = run.doc().unwrap();
        run.read(|view| assert_streamed_as_whole(view, &want));
        let read = runs.read_run("fields").unwrap();
        assert_streamed_as_whole(&read.view(), &want);
    };
    check(&run);
    // Keys named as the streamed fields, nested, and strings that spell them.
    run.add_items(vec![
        serde_json::json!({"units": {}, "skip": [], "x": "\"units\":{}"}),
        serde_json::json!(["units", {"units": {"a": [1, {"skip": []}]}}]),
    ])
    .unwrap();
    run.set_phase("units", runlog::run::PhaseStatus::Running)
        .unwrap();
    run.declare_budget("skip", Some(2.5), "me").unwrap();
    run.spend("skip", 1.0).unwrap();
    check(&run);
    for (i, u) in ["b", "a", "units", "skip", "c\"d é"].iter().enumerate() {
        run.set_unit(u, UnitStatus::Pending, Some("a note\nwith a newline"), None)
            .unwrap();
        if i % 2 == 0 {
            run.set_unit(u, UnitStatus::InProgress, None, None).unwrap();
            run.set_unit(u, UnitStatus::Done, None, None).unwrap();
        }
    }
    check(&run);
    run.compact().unwrap();
    run.resolve_item("item-1", Some("done")).unwrap();
    check(&run);
    run.finalize(RunStatus::NeedsAttention, Some("left for a human"))
        .unwrap();
    check(&run);
}

#[test]
fn a_long_lived_writer_hands_its_overlay_to_each_new_table() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::at_millis(T0));
    let runs = runs(dir.path(), &clock);
    let run = runs
        .init(InitSpec {
            id: "live".into(),
            task: "t".into(),
            units: (0..500).map(name).collect(),
            ..InitSpec::default()
        })
        .unwrap();
    let overlay = |run: &runlog::run::Run| run.store().read(|s| s.overlay_len());
    assert_eq!(
        overlay(&run),
        500,
        "before any table, the overlay holds all"
    );
    run.compact().unwrap();
    assert_eq!(overlay(&run), 0, "the table holds them now");
    run.set_unit(&name(3), UnitStatus::InProgress, None, None)
        .unwrap();
    assert_eq!(overlay(&run), 1);
    run.compact().unwrap();
    assert_eq!(overlay(&run), 0);
    assert_eq!(
        run.unit(&name(3)).unwrap().unwrap().status,
        UnitStatus::InProgress
    );
}

#[test]
fn a_v1_run_opens_and_its_first_compaction_writes_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::at_millis(T0));
    let runs = runs(dir.path(), &clock);
    // Written the way format v1 did: the whole document as the snapshot.
    std::fs::create_dir_all(dir.path().join("runs")).unwrap();
    let run_dir = runs.run_dir("old").unwrap();
    let changes = workload(50);
    let want = reference(&changes, T0);
    {
        let store = Store::<RunMachine>::open(
            &run_dir,
            Options {
                create: true,
                codec: engine::Codec::Jsonl,
                compaction: CompactionPolicy::Manual,
                ..Options::default()
            },
        )
        .unwrap();
        for (i, c) in changes.iter().enumerate() {
            let at = runlog::run::clock::format_rfc3339(T0 + i as i64);
            store
                .append(&Transition {
                    at,
                    change: c.clone(),
                })
                .unwrap();
        }
        store.compact().unwrap();
    }
    let snaps = |d: &std::path::Path| -> Vec<Vec<u8>> {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".snap"))
            .map(|e| e.path())
            .collect();
        v.sort();
        v.iter().map(|p| std::fs::read(p).unwrap()).collect()
    };
    assert!(
        !snaps(&run_dir)[0].starts_with(b"RUNLOGtb"),
        "a v1 snapshot"
    );
    assert_eq!(runs.read("old").unwrap(), want, "v1 read lock-free");
    // One-shot changes over a v1 snapshot leave no tail cache (FORMAT.md
    // §15.2): its state holds the snapshot's entries as well as the tail's.
    let mut want = want;
    for i in 0..12 {
        clock.set_millis(T0 + 1_000 + i);
        let unit = name(i as usize);
        runs.change(
            "old",
            Change::Unit {
                unit: unit.clone(),
                status: UnitStatus::Done,
                note: None,
                deps: None,
            },
        )
        .unwrap();
        want.units.get_mut(&unit).unwrap().status = UnitStatus::Done;
    }
    assert!(
        !run_dir.join("TAIL").exists(),
        "no cache over a v1 snapshot"
    );
    let statuses = |d: &RunDoc| -> Vec<(String, UnitStatus)> {
        d.units.iter().map(|(k, u)| (k.clone(), u.status)).collect()
    };
    assert_eq!(
        statuses(&runs.read("old").unwrap()),
        statuses(&want),
        "v1 with one-shot changes"
    );
    let want = runs.read("old").unwrap();
    let run = runs.open("old").unwrap();
    assert_eq!(run.doc().unwrap(), want, "v1 opened for writing");
    clock.set_millis(T0 + 10_000);
    run.set_unit("extra", UnitStatus::Pending, None, None)
        .unwrap();
    run.compact().unwrap();
    assert!(
        snaps(&run_dir).last().unwrap().starts_with(b"RUNLOGtb"),
        "the first compaction writes v2"
    );
    drop(run);
    let doc = runs.read("old").unwrap();
    assert_eq!(doc.units.len(), want.units.len() + 1);
    let integrity = engine::Reader::new(&engine::RealFs, &run_dir)
        .verify()
        .unwrap()
        .integrity;
    assert!(integrity.is_clean(), "{integrity:?}");
}

#[test]
fn a_damaged_table_block_is_reported_never_a_unit_missing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::at_millis(T0));
    let runs = runs(dir.path(), &clock);
    let n = 2_000;
    let run = runs
        .init(InitSpec {
            id: "dmg".into(),
            task: "t".into(),
            units: (0..n).map(name).collect(),
            ..InitSpec::default()
        })
        .unwrap();
    let c = run.compact().unwrap();
    let path = run.dir().join(format!("snap-{:020}.snap", c.snapshot_seq));
    drop(run);
    // One byte in the middle of the data blocks.
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 3;
    bytes[at] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();

    let read = runs.read_run("dmg").unwrap(); // opening reads no block
    let view = read.view();
    let (mut found, mut damaged) = (0, 0);
    for i in 0..n {
        match view.unit(&name(i)) {
            Ok(Some(_)) => found += 1,
            Ok(None) => panic!("unit {} silently missing", name(i)),
            Err(e) => {
                let text = ErrorChain(&e).to_string();
                assert!(text.contains(&path.display().to_string()), "{text}");
                assert!(text.contains("block"), "{text}");
                damaged += 1;
            }
        }
    }
    assert!(damaged > 0 && found > 0, "{found} found, {damaged} damaged");
    assert!(view.to_doc().is_err(), "a whole read meets the damage");
    // Printed streamed, the damage is the write's error, typed as the read's
    // (not serde's text), and what came before it is written.
    let mut out = Vec::new();
    let err = view.write_json(&mut out, false).unwrap_err();
    assert!(
        matches!(&err, runlog::run::RunError::Engine { source, .. } if source.is_corrupt()),
        "{err:?}"
    );
    assert!(
        out.starts_with(b"{\"schemaVersion\""),
        "{}",
        String::from_utf8_lossy(&out)
    );
    assert!(
        view.write_resume_json(&mut Vec::new(), false).is_err(),
        "the resume set meets the damage"
    );
    match engine::Reader::new(&engine::RealFs, &runs.run_dir("dmg").unwrap())
        .verify()
        .unwrap()
        .integrity
    {
        engine::Integrity::Damaged(engine::Error::Corrupt {
            path: p, reason, ..
        }) => {
            assert_eq!(p, path);
            assert!(reason.contains("block"), "{reason}");
        }
        other => panic!("verify said {other:?}"),
    }
    // A writer that looks a damaged unit up reports the damage, not a refusal,
    // and writes nothing.
    let run = runs.open("dmg").unwrap();
    let before = std::fs::read_dir(run.dir()).unwrap().count();
    let victim = (0..n).map(name).find(|u| view.unit(u).is_err()).unwrap();
    let err = run
        .set_unit(&victim, UnitStatus::Done, None, None)
        .unwrap_err();
    assert!(!err.is_refused(), "damage is not a refusal: {err}");
    assert!(ErrorChain(&err).to_string().contains("block"), "{err}");
    assert_eq!(run.last_seq(), 1);
    assert_eq!(std::fs::read_dir(run.dir()).unwrap().count(), before);
}
