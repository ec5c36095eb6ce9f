//! Proves the async lag shows where users look: while a writer holds records
//! durable locally but not yet shipped, `runlog status RUN` (human and
//! `--json`) and the run handle's `Run::remote_status` report local durable seq,
//! shipped seq and the lag between them; once the writer closes (and ships),
//! the lag is 0. A run without a remote shows no remote part.
#![cfg(feature = "remote")]

use crate::remote_support::{ok, runlog};
use runlog::run::{Runs, UnitStatus};
use std::path::Path;

fn status_json(root: &Path) -> serde_json::Value {
    serde_json::from_str(&ok(&runlog(root, &["status", "r1", "--json"]))).unwrap()
}

#[test]
fn status_and_run_stats_report_the_async_lag() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("runs");
    let remote_dir = tmp.path().join("remote");
    std::fs::create_dir_all(&remote_dir).unwrap();
    let url = format!("file://{}", remote_dir.display());
    ok(&runlog(
        &root,
        &["init", "--id", "r1", "--task", "t", "--units", "a,b,c,d"],
    ));
    // No remote yet: status says nothing of one.
    assert!(status_json(&root).get("remote").is_none());
    assert!(!ok(&runlog(&root, &["status", "r1"])).contains("remote"));

    // Async, every hour: nothing ships while the writer below is open.
    ok(&runlog(
        &root,
        &[
            "remote",
            "attach",
            "r1",
            &url,
            "--policy",
            "async",
            "--interval-ms",
            "3600000",
        ],
    ));
    let attached = status_json(&root)["remote"].clone();
    assert_eq!(
        attached["lag"], 0,
        "attach ships what the run holds: {attached}"
    );
    let base = attached["shipped"].as_u64().unwrap();
    assert!(base >= 1);

    let runs = Runs::new(&root);
    let run = runs.open("r1").unwrap();
    assert_eq!(run.remote_status(), None, "nothing accepted yet");
    let mut last = 0;
    for u in ["a", "b", "c"] {
        last = run.set_unit(u, UnitStatus::Done, None, None).unwrap();
    }
    let stats = run.remote_status().expect("shipping started");
    assert_eq!(stats.policy, "async");
    assert_eq!(stats.epoch, 2, "attach claimed 1, this process 2");
    assert_eq!(stats.durable, last);
    assert_eq!(stats.shipped, base);
    assert_eq!(stats.lag, last - base);
    assert!(stats.lag >= 3, "{stats:?}");

    // status, from another process while the writer holds the lock.
    let v = status_json(&root);
    let r = &v["remote"];
    assert_eq!(r["url"], url.as_str(), "{v}");
    assert_eq!(r["policy"], "async");
    assert_eq!(r["durable"].as_u64(), Some(last), "{v}");
    assert_eq!(r["shipped"].as_u64(), Some(base), "{v}");
    assert_eq!(r["lag"].as_u64(), Some(last - base), "{v}");
    assert_eq!(r["fenced"], false);
    let human = ok(&runlog(&root, &["status", "r1"]));
    assert!(
        human.contains(&format!(
            "local seq {last}, shipped {base}, lag {}",
            last - base
        )),
        "{human}"
    );

    // `remote status` computes the same numbers.
    let rs: serde_json::Value =
        serde_json::from_str(&ok(&runlog(&root, &["remote", "status", "r1", "--json"]))).unwrap();
    assert_eq!(
        (rs["durable"].clone(), rs["lag"].clone()),
        (r["durable"].clone(), r["lag"].clone())
    );

    // Closing the writer ships the rest: no lag left.
    drop(run);
    let r = status_json(&root)["remote"].clone();
    assert_eq!(
        (r["shipped"].as_u64(), r["lag"].as_u64()),
        (Some(last), Some(0)),
        "{r}"
    );
}
