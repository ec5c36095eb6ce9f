//! Proves the main job survives losing its host: `runlog demo --remote URL
//! --lose-host` ships every transition under `sync`, deletes the worker's run
//! directory after a kill, restores the run from the remote into a new runs
//! root and finishes there; its independent check finds every unit done exactly
//! once and no acknowledged transition lost. Against a `file:///` remote always,
//! and against the Ceph gateway when its env is set (RUNLOG_REQUIRE_S3=1 makes
//! a missing gateway a failure).
#![cfg(feature = "remote")]

use crate::remote_support;
use std::path::Path;
use std::process::Command;

fn runlog() -> Command {
    Command::new(env!("CARGO_BIN_EXE_runlog"))
}

/// Runs the demo against `url` with the host lost, and checks what it reports
/// and what it leaves behind.
fn demo_loses_its_host_and_finishes(root: &Path, url: &str) {
    let out = runlog()
        .args([
            "demo",
            "--json",
            "--units",
            "200",
            "--workers",
            "4",
            "--kills",
            "3",
            "--work-us",
            "200",
            "--seed",
            "7",
            "--remote",
            url,
            "--lose-host",
            "--dir",
        ])
        .arg(root)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(stdout.lines().last().expect("a summary line")).unwrap();
    assert_eq!(v["done"], 200, "{v}");
    assert_eq!(v["lost"], 0, "{v}");
    assert_eq!(v["duplicates"], 0, "{v}");
    assert_eq!(v["check"]["finalized"], true, "{v}");
    assert_eq!(v["remote"], url);
    let loss = &v["host_loss"];
    assert_eq!(loss["after_kill"], 2, "the middle of 3 kills: {v}");
    let acked_seq = loss["acked_seq"].as_u64().unwrap();
    let restored = loss["restored_seq"].as_u64().unwrap();
    assert!(acked_seq > 0, "{v}");
    // Under sync every acknowledged seq was on the remote before its ack.
    assert!(
        restored >= acked_seq,
        "restored {restored} < acked {acked_seq}"
    );
    assert!(v["crashes"].as_u64().unwrap() >= 2, "{v}");

    // The lost host's copy is gone; the new host holds the finished run.
    let new_root = root.join("new-host");
    assert_eq!(loss["new_root"], new_root.display().to_string());
    let lost = Path::new(loss["lost_dir"].as_str().unwrap());
    assert!(
        lost.starts_with(root) && !lost.starts_with(&new_root),
        "{v}"
    );
    assert!(!lost.exists(), "the lost host's run directory is gone");
    let get = runlog()
        .args(["--json", "--dir"])
        .arg(&new_root)
        .args(["get", "demo"])
        .output()
        .unwrap();
    assert!(
        get.status.success(),
        "{}",
        String::from_utf8_lossy(&get.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&get.stdout).unwrap();
    assert_eq!(doc["status"], "done");
    assert_eq!(doc["units"].as_object().unwrap().len(), 200);

    // The remote holds the whole run, written by the new host's epoch.
    let verify = runlog()
        .args(["--json", "--dir"])
        .arg(&new_root)
        .args(["verify", "demo", "--remote", url])
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&verify.stdout).unwrap();
    assert_eq!(r["integrity"], "clean");
    assert!(
        r["epoch"].as_u64().unwrap() >= 2,
        "the new host claimed: {r}"
    );
    assert!(r["lastSeq"].as_u64().unwrap() > restored, "{r}");
}

#[test]
fn demo_loses_its_host_and_finishes_from_a_file_remote() {
    let root = tempfile::tempdir().unwrap();
    let remote = tempfile::tempdir().unwrap();
    let url = format!("file://{}", remote.path().display());
    demo_loses_its_host_and_finishes(root.path(), &url);
}

#[test]
fn demo_loses_its_host_and_finishes_from_ceph() {
    let Some((bucket, _gateway)) =
        remote_support::gateway("demo_loses_its_host_and_finishes_from_ceph")
    else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    demo_loses_its_host_and_finishes(
        root.path(),
        &remote_support::s3_url(&bucket, "demo-lose-host"),
    );
}
