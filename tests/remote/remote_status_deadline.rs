//! Proves `runlog status` never stalls on an unreachable remote and that
//! `status --watch` shows the remote line (issue 15's gaps): against an S3
//! endpoint that accepts connections and never answers, `status RUN` (human
//! and `--json`) shows the local state, says the remote was not reached within
//! the status deadline, and exits 0; a run with a `file://` remote gets the
//! same remote line in its `--watch` frame (and `remote` in `--watch --json`),
//! a run without one gets none.
#![cfg(feature = "remote")]

use crate::remote_support::{ok, runlog};
use runlog::engine::RealFs;
use runlog::remote::{Policy, RemoteConfig};
use runlog::run::Runs;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

/// A local endpoint that accepts every connection and never answers (the
/// connections are held open for the rest of the test process).
fn blackhole() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = vec![];
        for c in l.incoming().flatten() {
            held.push(c);
        }
    });
    format!("http://{addr}")
}

/// `runlog --dir root args`, with the S3 environment pointing at `endpoint`
/// (for the child only).
fn runlog_s3(root: &Path, endpoint: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runlog"))
        .arg("--dir")
        .arg(root)
        .args(args)
        .env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "blackhole")
        .env("AWS_SECRET_ACCESS_KEY", "blackhole")
        .env("AWS_REGION", "us-east-1")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_PROFILE")
        .output()
        .unwrap()
}

#[test]
fn status_says_an_unanswering_remote_was_not_reached_and_keeps_exit_0() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("runs");
    ok(&runlog(
        &root,
        &[
            "init",
            "--id",
            "r1",
            "--task",
            "deadline-task",
            "--units",
            "a,b",
        ],
    ));
    // Attach by writing the REMOTE file: `remote attach` would itself wait
    // on the endpoint (its claim is a write).
    let dir = Runs::new(&root).run_dir("r1").unwrap();
    RemoteConfig::new("s3://bucket/prefix", Policy::Sync)
        .write(&RealFs, &dir)
        .unwrap();
    let endpoint = blackhole();

    let human = ok(&runlog_s3(&root, &endpoint, &["status", "r1"]));
    assert!(
        human.contains("deadline-task"),
        "local state shown: {human}"
    );
    assert!(
        human.contains("remote: not reached within 2s"),
        "says the remote was not reached within the deadline: {human}"
    );

    let out = ok(&runlog_s3(&root, &endpoint, &["status", "r1", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["task"], "deadline-task", "local state shown: {v}");
    let r = &v["remote"];
    assert_eq!(r["notReachedWithin"], "2s", "{v}");
    let err = r["error"].as_str().expect("an error string");
    assert!(err.contains("no answer within 2s"), "{err}");
    assert!(
        err.contains("s3://bucket/prefix"),
        "names the remote: {err}"
    );
}

#[test]
fn watch_shows_the_remote_line_status_shows() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("runs");
    let remote_dir = tmp.path().join("remote");
    let url = format!("file://{}", remote_dir.display());
    for id in ["r1", "r2"] {
        ok(&runlog(
            &root,
            &["init", "--id", id, "--task", "t", "--units", "a,b"],
        ));
    }
    ok(&runlog(&root, &["remote", "attach", "r1", &url]));
    ok(&runlog(&root, &["unit", "r1", "a", "done"]));
    for id in ["r1", "r2"] {
        ok(&runlog(&root, &["finalize", id, "aborted"]));
    }
    // A finalized run: the watch prints one frame and exits 0.
    let status = ok(&runlog(&root, &["status", "r1"]));
    let line = status
        .lines()
        .find(|l| l.starts_with("remote "))
        .expect("status shows a remote line")
        .to_string();
    assert!(line.contains("lag 0"), "{line}");
    let frame = ok(&runlog(
        &root,
        &["status", "r1", "--watch", "--interval", "0.1"],
    ));
    assert!(
        frame.lines().any(|l| l == line),
        "the watch frame has status's remote line {line:?}:\n{frame}"
    );
    let json = ok(&runlog(
        &root,
        &["--json", "status", "r1", "--watch", "--interval", "0.1"],
    ));
    let last: serde_json::Value =
        serde_json::from_str(json.lines().last().expect("a JSON line")).unwrap();
    assert_eq!(last["remote"]["url"], url.as_str(), "{last}");
    assert_eq!(last["remote"]["lag"], 0, "{last}");
    assert_eq!(
        last["remote"]["shipped"], last["remote"]["durable"],
        "{last}"
    );

    let plain = ok(&runlog(
        &root,
        &["status", "r2", "--watch", "--interval", "0.1"],
    ));
    assert!(!plain.contains("remote"), "no remote, no line:\n{plain}");
}
