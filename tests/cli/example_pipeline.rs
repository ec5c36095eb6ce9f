//! Proves `examples/pipeline.sh` runs a DAG with parallel `runlog unit` calls,
//! stops when a unit fails, and run again resumes: every unit done exactly once,
//! the failed one retried (attempts 2), the run finalized `done`.
use crate::cli_support;
use cli_support::*;
use std::path::Path;
use std::process::{Command, Output};

fn pipeline(root: &Path, fail_unit: Option<&str>) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/pipeline.sh");
    let mut c = Command::new("sh");
    c.arg(script)
        .args(["nightly", "15", "4"])
        .env("RUNLOG", BIN)
        .env("RUNLOG_DIR", root)
        .env_remove("PIPELINE_FAIL_UNIT");
    if let Some(u) = fail_unit {
        c.env("PIPELINE_FAIL_UNIT", u);
    }
    c.output().expect("spawn sh")
}

#[test]
fn pipeline_resumes_after_a_failed_unit_and_finalizes() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();

    let failed = pipeline(root, Some("u005"));
    assert!(!failed.status.success());
    let doc = ok_json(root, &["get", "nightly"]);
    assert_eq!(doc["status"], "running");
    assert_eq!(doc["units"]["u005"]["status"], "in_progress");
    // u005's dependents never started; its ancestors are done.
    for u in ["u011", "u012"] {
        assert_eq!(doc["units"][u]["status"], "pending", "{u}");
    }
    for u in ["u000", "u002"] {
        assert_eq!(doc["units"][u]["status"], "done", "{u}");
    }

    let resumed = pipeline(root, None);
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    assert!(
        resumed.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    assert!(stdout.starts_with("resumed run nightly"), "{stdout}");

    let counts = done_counts(root, "nightly");
    assert_eq!(counts.len(), 15, "{counts:?}");
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
    let doc = ok_json(root, &["get", "nightly"]);
    assert_eq!(doc["status"], "done");
    assert_eq!(doc["units"]["u005"]["attempts"], 2);
    assert!(
        doc["units"]["u014"]["note"]
            .as_str()
            .unwrap()
            .starts_with("cksum=")
    );
}
