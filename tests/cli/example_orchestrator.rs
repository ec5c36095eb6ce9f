//! Proves `examples/orchestrator.rs` resumes after a kill: aborted after 7 units,
//! run again on the same runs root, it finishes every unit, each done exactly
//! once, and finalizes the run `done`.
use crate::cli_support;
use cli_support::*;
use std::process::Command;

const UNITS: usize = 30;

#[test]
fn orchestrator_resumes_after_abort_and_never_redoes_a_done_unit() {
    let bin = example_binary("orchestrator");
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let orchestrate = |extra: &[&str]| {
        Command::new(&bin)
            .arg("--dir")
            .arg(root)
            .args(["--units", &UNITS.to_string(), "--workers", "4"])
            .args(extra)
            .output()
            .unwrap()
    };

    let crashed = orchestrate(&["--crash-after", "7"]);
    assert!(
        !crashed.status.success(),
        "--crash-after must end abnormally"
    );
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(crashed.status.signal(), Some(libc::SIGABRT));
    }
    let doc = ok_json(root, &["get", "orchestrator"]);
    assert_eq!(doc["status"], "running");
    let done_before = done_counts(root, "orchestrator");
    assert!((7..UNITS).contains(&done_before.len()), "{done_before:?}");

    let resumed = orchestrate(&[]);
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    assert!(
        resumed.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    assert!(stdout.contains("resumed"), "{stdout}");

    let counts = done_counts(root, "orchestrator");
    assert_eq!(counts.len(), UNITS, "{counts:?}");
    assert!(
        counts.values().all(|&n| n == 1),
        "a unit was done twice: {counts:?}"
    );
    let doc = ok_json(root, &["get", "orchestrator"]);
    assert_eq!(doc["status"], "done");
    for (name, u) in doc["units"].as_object().unwrap() {
        assert_eq!(u["status"], "done", "{name}");
        assert!(u["note"].as_str().unwrap().starts_with("result="), "{name}");
        // A unit is started at most twice: once before the abort, once after.
        assert!(u["attempts"].as_u64().unwrap() <= 2, "{name}: {u}");
    }
}
