//! Proves nothing that discards or redoes work is silent: a `start` over a
//! finished run warns RUN_FINISHED_STARTED_FRESH with the archive path (and
//! `--keep-finished` leaves it alone), `init` leads to a resuming `start`,
//! a resumed `start` names what it ignored, archived runs can be listed and
//! restored, and `spend` past a limit warns on stderr and in `--json`.
use crate::cli_support;
use cli_support::*;

#[test]
fn start_over_a_finished_run_warns_with_the_archive_and_keep_finished_keeps_it() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(
        root,
        &[
            "start",
            "--id",
            "job",
            "--fingerprint",
            "v=1",
            "--units",
            "a",
        ],
    );
    ok(root, &["unit", "job", "a", "done"]);
    ok(root, &["finalize", "job", "done"]);

    // --keep-finished: nothing moves, exit 0, and it says so.
    let before = tree_bytes_but_locks(root);
    let out = ok(
        root,
        &[
            "start",
            "--id",
            "job",
            "--fingerprint",
            "v=1",
            "--keep-finished",
        ],
    );
    assert!(
        out.contains("has finished") && out.contains("left as it is"),
        "{out}"
    );
    assert_eq!(
        tree_bytes_but_locks(root),
        before,
        "--keep-finished changed the run"
    );
    assert_eq!(ok_json(root, &["get", "job"])["status"], "done");

    // Without it: archived and fresh, loudly, with where it went.
    let o = runlog(
        root,
        &["--json", "start", "--id", "job", "--fingerprint", "v=1"],
    );
    assert_eq!(o.status.code(), Some(0));
    let v = stdout_json(&o);
    let w = &v["warnings"][0];
    assert_eq!(w["code"], "RUN_FINISHED_STARTED_FRESH", "{v}");
    let archived = std::path::PathBuf::from(w["archivedTo"].as_str().unwrap());
    assert!(archived.is_dir(), "{} is not there", archived.display());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("RUN_FINISHED_STARTED_FRESH"), "{stderr}");
    assert!(stderr.contains(&archived.display().to_string()), "{stderr}");
    assert_eq!(ok_json(root, &["get", "job"])["status"], "running");

    // archive list shows it; restore is refused while `job` exists, then works.
    let name = archived.file_name().unwrap().to_str().unwrap().to_string();
    // The library's warning says what happened; the CLI adds the command.
    let restore = format!("`runlog archive restore {name}` brings it back");
    assert!(stderr.contains(&restore), "{stderr}");
    assert!(!w["message"].as_str().unwrap().contains("runlog "), "{v}");
    let list = ok_json(root, &["archive", "list"]);
    assert_eq!(list[0]["name"], name.as_str(), "{list}");
    assert_eq!(list[0]["status"], "done", "{list}");
    let text = ok(root, &["archive", "list"]);
    assert!(text.starts_with("NAME") && text.contains(&name), "{text}");
    let o = runlog(root, &["archive", "restore", &name]);
    assert_eq!(o.status.code(), Some(2), "restore over a live run");
    assert!(archived.is_dir());
    std::fs::remove_dir_all(root.join("runs/job")).unwrap();
    let out = ok(root, &["archive", "restore", &name]);
    assert!(out.contains("restored run job"), "{out}");
    assert!(!archived.exists());
    assert_eq!(ok_json(root, &["get", "job"])["status"], "done");
    assert_eq!(ok_json(root, &["archive", "list"]), serde_json::json!([]));
    for name in ["nope.1", ".."] {
        let o = runlog(root, &["archive", "restore", name]);
        assert_eq!(o.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains("(see `runlog archive list`)"),
            "{name}: {stderr}"
        );
    }
}

#[test]
fn init_then_start_resumes_and_a_refused_reinit_says_how() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(
        root,
        &["init", "--id", "r", "--task", "t", "--units", "a,b"],
    );
    ok(root, &["unit", "r", "a", "done"]);
    let o = runlog(root, &["init", "--id", "r", "--task", "t"]);
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("runlog start --id r"), "{stderr}");
    // `start` without --fingerprint resumes the run `init` made.
    let v = ok_json(root, &["start", "--id", "r"]);
    assert_eq!(v["resumed"], true, "{v}");
    assert_eq!(v["warnings"], serde_json::json!([]), "{v}");
    assert_eq!(ok_json(root, &["get", "r"])["units"]["a"]["status"], "done");
    let help = ok(root, &["start", "--help"]);
    assert!(help.contains("init"), "{help}");
}

#[test]
fn a_resumed_start_names_what_it_ignored() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(
        root,
        &[
            "start",
            "--id",
            "r",
            "--fingerprint",
            "v=1",
            "--units",
            "a",
            "--task",
            "t",
        ],
    );
    let o = runlog(
        root,
        &[
            "--json",
            "start",
            "--id",
            "r",
            "--fingerprint",
            "v=1",
            "--units",
            "a,new1,new2",
            "--task",
            "other",
            "--budget",
            "usd=5@ops",
        ],
    );
    assert_eq!(o.status.code(), Some(0));
    let v = stdout_json(&o);
    assert_eq!(v["resumed"], true);
    let w = &v["warnings"][0];
    assert_eq!(w["code"], "START_ARGS_IGNORED", "{v}");
    let msg = w["message"].as_str().unwrap();
    for says in ["task", "new1", "new2", "usd"] {
        assert!(msg.contains(says), "{msg} does not name {says}");
    }
    assert!(String::from_utf8_lossy(&o.stderr).contains("START_ARGS_IGNORED"));
    let doc = ok_json(root, &["get", "r"]);
    assert_eq!(doc["task"], "t");
    assert!(doc["units"].get("new1").is_none());
    // Same arguments again, and no --task: no warning (the task defaults to the run's).
    let v = ok_json(
        root,
        &["start", "--id", "r", "--fingerprint", "v=1", "--units", "a"],
    );
    assert_eq!(v["warnings"], serde_json::json!([]), "{v}");
}

#[test]
fn spend_past_the_limit_warns_on_stderr_and_in_json() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(
        root,
        &["init", "--id", "r", "--task", "t", "--budget", "usd=1@ops"],
    );
    let o = runlog(root, &["--json", "spend", "r", "usd", "0.5"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout_json(&o)["warnings"], serde_json::json!([]));
    assert!(o.stderr.is_empty());
    let o = runlog(root, &["--json", "spend", "r", "usd", "0.75"]);
    assert_eq!(o.status.code(), Some(0));
    let v = stdout_json(&o);
    assert_eq!(v["warnings"][0]["code"], "BUDGET_EXCEEDED", "{v}");
    assert!(v["seq"].is_u64());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("BUDGET_EXCEEDED") && stderr.contains("usd"),
        "{stderr}"
    );
    let o = runlog(root, &["spend", "r", "usd", "1"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("BUDGET_EXCEEDED"));
}
