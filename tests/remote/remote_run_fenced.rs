//! Proves a fenced writer's error stays typed through the run layer: after a
//! second host restores the run and writes (taking epoch 2), the first host's
//! open handle gets `RunError::Remote` whose remote error is `Fenced` (epoch
//! 1, newer 2), for a single change and for every accepted change of a batch,
//! exit 1, naming the remote's URL, not the local directory. Before the
//! `Remote` variant, the run layer flattened it into an `io::Error`, and
//! Python found `Fenced` by downcasting that.
#![cfg(feature = "remote")]

use crate::remote_support::{ok, runlog};
use runlog::remote::RemoteError;
use runlog::run::{Change, RunError, Runs, UnitStatus};

fn fenced(e: &RunError) -> Option<(u64, u64)> {
    match e.remote_error()? {
        RemoteError::Fenced { epoch, newer, .. } => Some((*epoch, *newer)),
        _ => None,
    }
}

#[test]
fn a_fenced_writer_gets_a_typed_fenced_error_for_each_change() {
    let tmp = tempfile::tempdir().unwrap();
    let (h1, h2) = (tmp.path().join("h1"), tmp.path().join("h2"));
    let remote_dir = tmp.path().join("remote");
    std::fs::create_dir_all(&remote_dir).unwrap();
    let url = format!("file://{}", remote_dir.display());
    ok(&runlog(
        &h1,
        &["init", "--id", "r1", "--task", "t", "--units", "a,b,c,d"],
    ));
    ok(&runlog(&h1, &["remote", "attach", "r1", &url]));

    let runs = Runs::new(&h1);
    let run = runs.open("r1").unwrap();
    run.set_unit("a", UnitStatus::Done, None, None).unwrap();

    // Every process claims an epoch of its own: attach took 1, this one 2.
    // Another host takes the run over: restore, then a write claims epoch 3.
    ok(&runlog(&h2, &["restore", "r1", "--remote", &url]));
    ok(&runlog(&h2, &["unit", "r1", "b", "done"]));

    let e = run
        .set_unit("c", UnitStatus::Done, None, None)
        .expect_err("the first host is fenced");
    assert_eq!(fenced(&e), Some((2, 3)), "{e:?}");
    assert_eq!(e.exit_code(), 1, "{e}");
    assert!(!e.is_refused());
    let shown = runlog::engine::ErrorChain(&e).to_string();
    assert!(
        shown.starts_with(&format!("ship to remote {url}")) && shown.contains("epoch 3"),
        "{shown}"
    );

    // A batch: every change the local log accepted carries the same Fenced.
    let change = |u: &str| Change::Unit {
        unit: u.into(),
        status: UnitStatus::Done,
        note: None,
        deps: None,
    };
    let results = run.apply_batch(vec![change("c"), change("d")]);
    assert_eq!(results.len(), 2);
    for r in &results {
        let e = r.as_ref().expect_err("fenced");
        assert_eq!(fenced(e), Some((2, 3)), "{e:?}");
    }
    drop(run);

    // The second host's run never saw the fenced host's changes.
    let doc: serde_json::Value =
        serde_json::from_str(&ok(&runlog(&h2, &["--json", "get", "r1"]))).unwrap();
    assert_eq!(doc["units"]["b"]["status"], "done");
    for u in ["c", "d"] {
        assert_eq!(doc["units"][u]["status"], "pending", "{doc}");
    }
}
