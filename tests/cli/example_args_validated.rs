//! Proves the examples validate what they are given: `pipeline.sh` refuses a
//! UNITS or PARALLEL that is not a number in range (exit 2) before creating
//! anything, `pipeline.sh` and `driver.py` without a runlog binary say how to
//! install one (exit 127), and the orchestrator answers `--help` (exit 0, its
//! usage) and refuses an unknown flag with that usage.
use crate::cli_support;
use cli_support::*;
use std::path::Path;
use std::process::Command;

#[test]
fn pipeline_refuses_bad_numbers_and_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/pipeline.sh");
    for args in [
        ["x", "abc", "4"],
        ["x", "0", "4"],
        ["x", "5", "-1"],
        ["x", "5", "zz"],
        ["x", "", "4"],
        ["x", "2000", "4"],
    ] {
        let o = Command::new("sh")
            .arg(&script)
            .args(args)
            .env("RUNLOG", BIN)
            .env("RUNLOG_DIR", d.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("pipeline: "), "{args:?}: {stderr}");
        assert!(!stderr.contains("Illegal number"), "{args:?}: {stderr}");
        assert!(!d.path().join("runs").exists(), "{args:?} created a run");
    }
}

#[test]
fn orchestrator_answers_help() {
    let bin = example_binary("orchestrator");
    let o = Command::new(&bin).arg("--help").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with("usage: orchestrator") && out.contains("--crash-after"),
        "{out}"
    );
    let o = Command::new(&bin).arg("--bogus").output().unwrap();
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("usage: orchestrator"));
}

#[test]
fn examples_without_a_runlog_binary_say_how_to_get_one() {
    let d = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let missing = d.path().join("no-runlog-here");
    let mut cmds = vec![{
        let mut c = Command::new("sh");
        c.arg(repo.join("examples/pipeline.sh"))
            .args(["x", "3", "2"]);
        c
    }];
    if Command::new("python3").arg("--version").output().is_ok() {
        let mut c = Command::new("python3");
        c.arg(repo.join("examples/driver.py"));
        cmds.push(c);
    } else {
        crate::skip_support::skip(
            "examples_without_a_runlog_binary_say_how_to_get_one (driver.py)",
            "RUNLOG_REQUIRE_PYTHON",
            "python3 not found on PATH",
        );
    }
    for mut c in cmds {
        let o = c
            .env("RUNLOG", &missing)
            .env("RUNLOG_DIR", d.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(127), "{c:?}: {stderr}");
        assert!(
            stderr.contains("cargo install --path .")
                && stderr.contains("pip install ./python")
                && stderr.contains("no-runlog-here"),
            "{c:?}: {stderr}"
        );
        assert!(!stderr.contains("Traceback"), "{c:?}: {stderr}");
        assert!(!d.path().join("runs").exists(), "{c:?} created a run");
    }
}
