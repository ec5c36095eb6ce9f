//! Proves every refusal exits 2, says why on stderr, prints nothing on stdout
//! and changes no byte under the runs root.
use crate::cli_support;
use cli_support::*;

fn assert_refused(root: &std::path::Path, args: &[&str], why: &str) {
    let before = tree_bytes_but_locks(root);
    let o = runlog(root, args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        stderr.to_lowercase().contains(&why.to_lowercase()),
        "{args:?}: stderr {stderr:?} does not say {why:?}"
    );
    assert!(o.stdout.is_empty(), "{args:?} printed on stdout");
    assert_eq!(
        tree_bytes_but_locks(root),
        before,
        "{args:?} changed bytes on disk"
    );
}

#[test]
fn refusals_exit_2_and_write_nothing() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(
        root,
        &["init", "--id", "r1", "--task", "t", "--units", "a,b"],
    );
    ok(root, &["unit", "r1", "a", "done"]);

    assert_refused(
        root,
        &["init", "--id", "r1", "--task", "again"],
        "already exists",
    );
    assert_refused(root, &["unit", "r1", "a", "pending"], "never demoted");
    assert_refused(root, &["unit", "r1", "a", "in_progress"], "never demoted");
    assert_refused(root, &["unit", "r1", "b", "finished"], "unknown status");
    assert_refused(root, &["phase", "r1", "p", "walking"], "unknown status");
    assert_refused(root, &["finalize", "r1", "done"], "not done: b (pending)");
    assert_refused(root, &["finalize", "r1", "running"], "finalize takes");
    assert_refused(root, &["item", "r1", "\"str\""], "object");
    assert_refused(root, &["item", "r1", "{bad json"], "invalid json");
    assert_refused(root, &["spend", "r1", "nobudget", "1"], "no budget");
    assert_refused(root, &["spend", "r1", "nobudget", "-1"], "finite number");
    assert_refused(root, &["resolve", "r1", "item-9"], "no open item");
    assert_refused(root, &["unit", "nosuchrun", "a", "done"], "no run");
    assert_refused(
        root,
        &["init", "--id", "r2", "--task", "t", "--launch", "[1]"],
        "launch must be",
    );
    assert_refused(
        root,
        &[
            "init",
            "--id",
            "r2",
            "--task",
            "t",
            "--launch",
            r#"{"scriptPath":""}"#,
        ],
        "scriptPath",
    );
    assert_refused(root, &["unit"], "usage"); // clap usage error

    let long = "x".repeat(300);
    for bad in ["..", ".", "a/b", "a\\b", "/x", "a\u{1}b", &long, "%2e%2e"] {
        assert_refused(root, &["unit", bad, "a", "done"], "run id");
        assert_refused(root, &["init", "--id", bad, "--task", "t"], "run id");
        assert_refused(root, &["get", bad], "run id");
    }

    // Close the run, then every change and a second closure are refused.
    ok(
        root,
        &["finalize", "r1", "needs_attention", "--result", "b left"],
    );
    assert_refused(root, &["unit", "r1", "b", "done"], "closed");
    assert_refused(root, &["unit", "r1", "c", "pending"], "closed");
    assert_refused(root, &["phase", "r1", "p", "running"], "closed");
    assert_refused(root, &["item", "r1", "{}"], "closed");
    assert_refused(root, &["finalize", "r1", "aborted"], "closed");
    assert_refused(root, &["finalize", "r1", "needs_attention"], "closed");
    let doc = ok_json(root, &["get", "r1"]);
    assert_eq!(doc["status"], "needs_attention");
    assert_eq!(doc["openAtFinish"]["units"]["b"], "pending");
}

#[test]
fn nul_in_a_run_id_is_refused_by_the_library() {
    assert!(runlog::run::Runs::check_id("a\0b").is_err());
}
