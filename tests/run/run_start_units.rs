//! Proves `Run::start_units`, the resumable "mark these in progress": units
//! not done become `in_progress` under one write, done ones are left alone
//! (nothing written for them, no refusal), a refusal of one unit (a dependency
//! not done) leaves the others written, and repeating the same call after every
//! unit is done writes nothing and refuses nothing.
use runlog::run::*;

fn spec() -> InitSpec {
    InitSpec {
        id: "r".into(),
        task: "t".into(),
        units: vec!["a".into(), "b".into()],
        deps: [("c".to_string(), vec!["a".to_string(), "b".to_string()])].into(),
        ..InitSpec::default()
    }
}

#[test]
fn start_units_starts_the_units_not_done_and_leaves_done_ones_alone() {
    let d = tempfile::tempdir().unwrap();
    let runs = Runs::new(d.path());
    let run = runs.init(spec()).unwrap();
    run.set_unit("a", UnitStatus::Done, Some("A"), None)
        .unwrap();
    let last = run.last_seq();

    let r = run.start_units(&["a", "b", "c"]);
    assert_eq!(r.len(), 3);
    assert!(matches!(r[0], Ok(Claim::AlreadyDone)), "{r:?}");
    let Ok(Claim::Started(seq_b)) = r[1] else {
        panic!("b starts: {r:?}")
    };
    assert_eq!(seq_b, last + 1, "one record, for b alone");
    // c depends on b, which is not done: refused, on its own.
    match &r[2] {
        Err(e @ RunError::Refused { .. }) => {
            assert!(e.to_string().contains("refused"), "{e}");
        }
        other => panic!("c is held back by b: {other:?}"),
    }
    assert_eq!(run.last_seq(), seq_b, "nothing written for a or c");
    let a = run.unit("a").unwrap().unwrap();
    assert_eq!(
        (a.status, a.note.as_str(), a.attempts),
        (UnitStatus::Done, "A", 0)
    );
    let b = run.unit("b").unwrap().unwrap();
    assert_eq!((b.status, b.attempts), (UnitStatus::InProgress, 1));

    run.set_unit("b", UnitStatus::Done, None, None).unwrap();
    assert!(matches!(
        run.start_units(&["c"])[..],
        [Ok(Claim::Started(_))]
    ));
    run.set_unit("c", UnitStatus::Done, None, None).unwrap();

    // The same call again, as a resumed program makes it: nothing refused,
    // nothing written.
    let last = run.last_seq();
    let again = run.start_units(&["a", "b", "c"]);
    assert!(
        again.iter().all(|r| matches!(r, Ok(Claim::AlreadyDone))),
        "{again:?}"
    );
    assert_eq!(run.last_seq(), last);
    assert!(run.start_units::<&str>(&[]).is_empty());
}
