//! Proves the CLI's remote verbs end to end with one-shot processes: `remote
//! attach` claims, every later `runlog unit` ships (sync before it exits 0,
//! async before the process ends), `restore` on a second "host" and its first
//! write fence the first host (exit 1, naming the newer epoch), and `verify
//! --remote`, `gc --remote` and `remote status --json` report the chain.
//! Runs against a file:// remote, and against the Ceph gateway when present.
#![cfg(feature = "remote")]

use crate::remote_support;

use remote_support::{ok, runlog};
use std::path::Path;
use std::process::Command;

fn status(root: &Path) -> serde_json::Value {
    serde_json::from_str(&ok(&runlog(root, &["remote", "status", "r1", "--json"]))).unwrap()
}

fn scenario(url: &str, policy: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let (h1, h2) = (tmp.path().join("h1"), tmp.path().join("h2"));
    ok(&runlog(
        &h1,
        &["init", "--id", "r1", "--task", "t", "--units", "a,b,c"],
    ));
    ok(&runlog(
        &h1,
        &["remote", "attach", "r1", url, "--policy", policy],
    ));
    ok(&runlog(&h1, &["unit", "r1", "a", "done"]));
    // Every process claims an epoch of its own: attach took 1, this write 2.
    let s = status(&h1);
    assert_eq!(
        (s["lag"].as_u64(), s["epoch"].as_u64()),
        (Some(0), Some(2)),
        "{policy}: {s}"
    );

    // A second host restores the run and writes: it takes epoch 3.
    ok(&runlog(&h2, &["restore", "r1", "--remote", url]));
    ok(&runlog(&h2, &["unit", "r1", "b", "done"]));
    // The first host is fenced: exit 1, the message names the newer epoch.
    let o = runlog(&h1, &["unit", "r1", "c", "done"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("fenced") && err.contains("epoch 3"), "{err}");

    ok(&runlog(&h2, &["verify", "r1", "--remote", url]));
    ok(&runlog(
        &h2,
        &["gc", "--remote", url, "--keep-manifests", "1"],
    ));
    let s = status(&h2);
    assert_eq!(
        (s["lag"].as_u64(), s["epoch"].as_u64()),
        (Some(0), Some(3)),
        "{s}"
    );
    // A third host sees a and b done, not the fenced host's c.
    let h3 = tmp.path().join("h3");
    ok(&runlog(&h3, &["restore", "r1", "--remote", url]));
    let doc: serde_json::Value =
        serde_json::from_str(&ok(&runlog(&h3, &["--json", "get", "r1"]))).unwrap();
    assert_eq!(doc["units"]["a"]["status"], "done");
    assert_eq!(doc["units"]["b"]["status"], "done");
    assert_eq!(doc["units"]["c"]["status"], "pending");
    // Restoring over an existing run is refused and writes nothing.
    let o = runlog(&h3, &["restore", "r1", "--remote", url]);
    assert_ne!(o.status.code(), Some(0));
}

#[test]
fn cli_file_remote_sync_and_async() {
    for policy in ["sync", "async"] {
        let remote = tempfile::tempdir().unwrap();
        scenario(&format!("file://{}", remote.path().display()), policy);
    }
}

#[test]
fn cli_ceph_remote_sync() {
    let Some((bucket, _gateway)) = remote_support::gateway("cli_ceph_remote") else {
        return;
    };
    scenario(&remote_support::s3_url(&bucket, "cli"), "sync");
}

#[test]
fn cli_tagged_run_ships_restores_and_verifies_with_its_key() {
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("key");
    std::fs::write(&key, [7u8; 32]).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let k = key.to_str().unwrap();
    let url = format!("file://{}", tmp.path().join("remote").display());
    let (h1, h2) = (tmp.path().join("h1"), tmp.path().join("h2"));
    let tagged = |root: &Path, args: &[&str]| {
        let mut a = vec!["--key-file", k];
        a.extend_from_slice(args);
        runlog(root, &a)
    };
    ok(&tagged(
        &h1,
        &[
            "init", "--id", "r1", "--task", "t", "--units", "a,b", "--codec", "binary",
        ],
    ));
    ok(&tagged(
        &h1,
        &["remote", "attach", "r1", &url, "--policy", "async"],
    ));
    ok(&tagged(&h1, &["unit", "r1", "a", "done"]));
    let s: serde_json::Value =
        serde_json::from_str(&ok(&tagged(&h1, &["remote", "status", "r1", "--json"]))).unwrap();
    assert_eq!(
        (s["durable"].as_u64(), s["lag"].as_u64()),
        (Some(2), Some(0)),
        "{s}"
    );
    ok(&tagged(&h2, &["restore", "r1", "--remote", &url]));
    ok(&tagged(&h2, &["verify", "r1", "--remote", &url]));
    // Without the key the tagged chain does not verify.
    assert_ne!(
        runlog(&h2, &["verify", "r1", "--remote", &url])
            .status
            .code(),
        Some(0)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&ok(&tagged(&h2, &["--json", "get", "r1"]))).unwrap();
    assert_eq!(doc["units"]["a"]["status"], "done");
}

#[test]
fn cli_remote_root_from_the_environment_restores_a_missing_run_on_a_new_host() {
    let tmp = tempfile::tempdir().unwrap();
    let root = format!("file://{}", tmp.path().join("remote").display());
    let (h1, h2) = (tmp.path().join("h1"), tmp.path().join("h2"));
    let with_root = |host: &Path, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_runlog"))
            .arg("--dir")
            .arg(host)
            .args(args)
            .env("RUNLOG_REMOTE_ROOT", &root)
            .output()
            .unwrap()
    };
    ok(&with_root(
        &h1,
        &["init", "--id", "r1", "--task", "t", "--units", "a,b"],
    ));
    ok(&with_root(&h1, &["unit", "r1", "a", "done"]));
    // h2 has no copy: opening the run restores it from $RUNLOG_REMOTE_ROOT/r1.
    ok(&with_root(&h2, &["unit", "r1", "b", "done"]));
    let doc: serde_json::Value =
        serde_json::from_str(&ok(&runlog(&h2, &["--json", "get", "r1"]))).unwrap();
    assert_eq!(doc["units"]["a"]["status"], "done");
    assert_eq!(doc["units"]["b"]["status"], "done");
    let o = with_root(&h1, &["unit", "r1", "b", "done"]);
    assert_eq!(o.status.code(), Some(1), "the first host is fenced");
}

/// `RUNLOG_REMOTE_ROUNDS_IN_FLIGHT` reaches every run the environment's root
/// attaches: kept in the run's REMOTE file, reported by `remote status`, and
/// a value out of 1..=8 (or not a number) is refused (exit 2), naming the
/// variable, before anything is written.
#[test]
fn cli_remote_root_rounds_in_flight_from_the_environment_are_kept_by_each_run_it_attaches() {
    let tmp = tempfile::tempdir().unwrap();
    let root = format!("file://{}", tmp.path().join("remote").display());
    let h1 = tmp.path().join("h1");
    let with = |k: &str, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_runlog"))
            .arg("--dir")
            .arg(&h1)
            .args(args)
            .env("RUNLOG_REMOTE_ROOT", &root)
            .env("RUNLOG_REMOTE_ROUNDS_IN_FLIGHT", k)
            .output()
            .unwrap()
    };
    for bad in ["0", "9", "four"] {
        let o = with(bad, &["init", "--id", "r1", "--task", "t", "--units", "a"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad}: {err}");
        assert!(
            err.contains("RUNLOG_REMOTE_ROUNDS_IN_FLIGHT") && err.contains("expected 1 to 8"),
            "{err}"
        );
        assert!(!h1.join("runs/r1").exists(), "{bad}: nothing written");
    }
    ok(&with(
        "2",
        &["init", "--id", "r1", "--task", "t", "--units", "a,b"],
    ));
    ok(&with("2", &["unit", "r1", "a", "done"]));
    let file = std::fs::read_to_string(h1.join("runs/r1/REMOTE")).unwrap();
    assert!(file.contains("\"roundsInFlight\":2"), "{file}");
    let s: serde_json::Value =
        serde_json::from_str(&ok(&runlog(&h1, &["remote", "status", "r1", "--json"]))).unwrap();
    assert_eq!(
        (s["roundsInFlight"].as_u64(), s["lag"].as_u64()),
        (Some(2), Some(0)),
        "{s}"
    );
}

/// Issue 22: an `s3://` remote with no credentials in the environment failed
/// with the instance metadata service's refusal, naming nothing the user set.
/// It now says which `AWS_*` variables to set. Every address the client could
/// ask is pinned to a closed loopback port: no request leaves this machine.
#[test]
fn an_s3_remote_without_credentials_names_the_aws_variables() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("h");
    ok(&runlog(
        &root,
        &["init", "--id", "r1", "--task", "t", "--units", "a"],
    ));
    let mut c = Command::new(env!("CARGO_BIN_EXE_runlog"));
    c.arg("--dir").arg(&root);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("AWS_") {
            c.env_remove(k);
        }
    }
    let o = c
        .env_remove("RUNLOG_REMOTE_ROOT")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("AWS_METADATA_ENDPOINT", "http://127.0.0.1:9")
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_REGION", "us-east-1")
        .args(["remote", "attach", "r1", "s3://bucket/runs/r1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("AWS_ACCESS_KEY_ID") && err.contains("AWS_SECRET_ACCESS_KEY"),
        "names the variables: {err}"
    );
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert_eq!(
        err.matches("no AWS credentials").count(),
        1,
        "said once: {err}"
    );
}

/// Issue 21: the remote root is the library's builder option; the library
/// reads no environment. The env test above proves the CLI reads it; this one
/// proves the library: a `Runs` given a root attaches the run it opens there
/// and restores a missing run on a "new host"; one given none knows no remote.
#[test]
fn a_remote_root_given_to_runs_attaches_and_restores_without_the_environment() {
    use runlog::remote::{Policy, RemoteRoot};
    use runlog::run::{Runs, UnitStatus};
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("file://{}/", tmp.path().join("remote").display());
    std::fs::create_dir_all(tmp.path().join("remote")).unwrap();
    let (h1, h2, h3) = (
        tmp.path().join("h1"),
        tmp.path().join("h2"),
        tmp.path().join("h3"),
    );
    let root = RemoteRoot::new(&url, Policy::Sync);
    assert_eq!(root.url(), url.trim_end_matches('/'));
    ok(&runlog(
        &h1,
        &["init", "--id", "r1", "--task", "t", "--units", "a,b"],
    ));
    let runs = Runs::new(&h1).with_remote_root(Some(root.clone()));
    runs.open("r1")
        .unwrap()
        .set_unit("a", UnitStatus::Done, None, None)
        .unwrap();
    let remote_file = std::fs::read_to_string(runs.run_dir("r1").unwrap().join("REMOTE"))
        .expect("the run was attached under the root");
    assert!(
        remote_file.contains(&format!("{}/r1", root.url())),
        "{remote_file}"
    );

    // A new host with the root: the run is restored, then written.
    let runs2 = Runs::new(&h2).with_remote_root(Some(root));
    runs2
        .open("r1")
        .unwrap()
        .set_unit("b", UnitStatus::Done, None, None)
        .unwrap();
    let doc: serde_json::Value =
        serde_json::from_str(&ok(&runlog(&h2, &["--json", "get", "r1"]))).unwrap();
    assert_eq!(doc["units"]["a"]["status"], "done", "{doc}");
    assert_eq!(doc["units"]["b"]["status"], "done", "{doc}");

    // A host without a root knows no remote: nothing to open.
    let e = Runs::new(&h3).open("r1").expect_err("no such run here");
    assert!(e.is_refused(), "{e}");
}

/// `remote attach --rounds-in-flight K` keeps K in the run's REMOTE file;
/// every later writer of the run (here a library handle) ships with it, and
/// `remote status` reports it. Out of 1..=8 it is refused (exit 2) and
/// nothing is written.
#[test]
fn cli_attach_sets_the_rounds_in_flight_every_later_writer_keeps() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("h1");
    let remote = tmp.path().join("remote");
    std::fs::create_dir_all(&remote).unwrap();
    let url = format!("file://{}", remote.display());
    ok(&runlog(
        &root,
        &["init", "--id", "r1", "--task", "t", "--units", "a,b"],
    ));
    for bad in ["0", "9"] {
        let o = runlog(
            &root,
            &["remote", "attach", "r1", &url, "--rounds-in-flight", bad],
        );
        assert_eq!(o.status.code(), Some(2), "{o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("expected 1 to 8"), "{err}");
        assert!(!root.join("runs/r1/REMOTE").exists(), "nothing written");
    }
    ok(&runlog(
        &root,
        &["remote", "attach", "r1", &url, "--rounds-in-flight", "2"],
    ));
    let file = std::fs::read_to_string(root.join("runs/r1/REMOTE")).unwrap();
    assert!(file.contains("\"roundsInFlight\":2"), "{file}");
    let s: serde_json::Value =
        serde_json::from_str(&ok(&runlog(&root, &["remote", "status", "r1", "--json"]))).unwrap();
    assert_eq!(s["roundsInFlight"], 2, "{s}");

    let runs = runlog::run::Runs::new(&root);
    let run = runs.open("r1").unwrap();
    run.set_unit("a", runlog::run::UnitStatus::Done, None, None)
        .unwrap();
    let live = run.remote_status().expect("shipping started");
    assert_eq!((live.rounds_in_flight, live.lag), (2, 0), "{live:?}");
}
