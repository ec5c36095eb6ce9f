//! An explicit compaction of a shipped run ships its snapshot (FORMAT.md
//! §13.4), under either policy: a round that carries no new record, only the
//! table. A new host then restores that table and no log chunk, so its open
//! replays nothing the first host had folded. Before, the head kept the
//! older snapshot and every chunk after it until the next record came.
#![cfg(feature = "remote")]

use crate::remote_support::{ok, runlog};
use runlog::engine::RealFs;
use runlog::remote::{Remote, restore};
use runlog::run::{Runs, UnitStatus};

fn compact_then_restore(policy: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let remote = tmp.path().join("remote");
    std::fs::create_dir_all(&remote).unwrap();
    let url = format!("file://{}", remote.display());
    let h1 = tmp.path().join("h1");
    let units: Vec<String> = (0..500).map(|i| format!("u{i:04}")).collect();
    ok(&runlog(
        &h1,
        &[
            "init",
            "--id",
            "r1",
            "--task",
            "t",
            "--units",
            &units.join(","),
        ],
    ));
    ok(&runlog(
        &h1,
        &[
            "remote",
            "attach",
            "r1",
            &url,
            "--policy",
            policy,
            "--interval-ms",
            "3600000",
        ],
    ));
    let runs = Runs::new(&h1);
    let run = runs.open("r1").unwrap();
    let mut last = 0;
    for u in &units[..300] {
        last = run.set_unit(u, UnitStatus::Done, None, None).unwrap();
    }
    let report = run.compact().unwrap();
    assert_eq!(report.snapshot_seq, last, "{policy}");
    let status = run.remote_status().expect("shipping");
    assert_eq!(
        (status.shipped, status.lag),
        (last, 0),
        "{policy}: {status:?}"
    );
    // Again: the remote's table covers it, so no round is made.
    let rounds = status.rounds;
    run.compact().unwrap();
    assert_eq!(run.remote_status().unwrap().rounds, rounds, "{policy}");

    let into = tmp.path().join("h2/runs/r1");
    let got = restore(&RealFs, &Remote::open(&url).unwrap(), &into, None).unwrap();
    assert_eq!(
        (got.snapshot, got.chunks, got.inline, got.last_seq),
        (Some(last), 0, 0, last),
        "{policy}: the head holds the compaction's table and no log after it"
    );
    drop(run);
    let doc = Runs::new(tmp.path().join("h2")).read("r1").unwrap();
    let done = doc
        .units
        .values()
        .filter(|u| u.status == UnitStatus::Done)
        .count();
    assert_eq!((doc.units.len(), done), (500, 300), "{policy}");
}

#[test]
fn a_compaction_under_sync_ships_its_snapshot_and_a_restore_fetches_no_log() {
    compact_then_restore("sync");
}

#[test]
fn a_compaction_under_async_ships_its_snapshot_and_a_restore_fetches_no_log() {
    compact_then_restore("async");
}
