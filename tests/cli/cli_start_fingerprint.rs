//! Proves restore-or-create: the identical fingerprint resumes, a changed one
//! archives the old run and starts fresh with a CHECKPOINT_DISCARDED warning
//! naming the changed part, and a finished run is started fresh.
use crate::cli_support;
use cli_support::*;

#[test]
fn start_resumes_discards_and_restarts_after_finish() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let fp = "size=10,mtime=100,params=x";
    let s = ok_json(
        root,
        &[
            "start",
            "--id",
            "job",
            "--fingerprint",
            fp,
            "--units",
            "a,b",
        ],
    );
    assert_eq!(s["resumed"], false);
    assert_eq!(s["warnings"].as_array().unwrap().len(), 0);
    ok(root, &["unit", "job", "a", "done"]);

    // Identical: the live run comes back with its progress.
    let s = ok_json(root, &["start", "--id", "job", "--fingerprint", fp]);
    assert_eq!(s["resumed"], true);
    assert_eq!(
        ok_json(root, &["get", "job"])["units"]["a"]["status"],
        "done"
    );

    // Changed mtime: discarded, with the warning on stdout (JSON) and stderr.
    let o = runlog(
        root,
        &[
            "--json",
            "start",
            "--id",
            "job",
            "--fingerprint",
            "size=10,mtime=101,params=x",
        ],
    );
    assert_eq!(o.status.code(), Some(0));
    let s = stdout_json(&o);
    assert_eq!(s["resumed"], false);
    let w = &s["warnings"][0];
    assert_eq!(w["code"], "CHECKPOINT_DISCARDED");
    assert_eq!(w["changed"], serde_json::json!(["mtime"]));
    assert!(w["message"].as_str().unwrap().contains("mtime"));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("CHECKPOINT_DISCARDED") && stderr.contains("mtime"),
        "{stderr}"
    );
    let doc = ok_json(root, &["get", "job"]);
    assert!(doc["units"].as_object().unwrap().is_empty(), "fresh run");
    assert!(std::path::Path::new(w["archivedTo"].as_str().unwrap()).is_dir());

    // Finished: the identical start begins fresh, without a discard warning.
    ok(root, &["finalize", "job", "aborted"]);
    let s = ok_json(
        root,
        &[
            "start",
            "--id",
            "job",
            "--fingerprint",
            "size=10,mtime=101,params=x",
        ],
    );
    assert_eq!(s["resumed"], false);
    assert_eq!(
        s["warnings"][0]["code"], "RUN_FINISHED_STARTED_FRESH",
        "{s}"
    );
    assert_eq!(ok_json(root, &["get", "job"])["status"], "running");

    // Old terminal runs go with gc; a live one stays.
    let list = ok_json(root, &["status", "--list"]);
    assert_eq!(list.as_array().unwrap().len(), 1);
}
