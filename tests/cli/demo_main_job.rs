//! Proves the main job works end to end: `runlog demo` kills its worker with
//! SIGKILL several times, and its independent check finds every unit done
//! exactly once and no acknowledged transition lost; `--json` ends stdout with
//! the summary object.
use std::process::Command;

#[test]
fn demo_survives_kills_with_nothing_lost_and_nothing_twice() {
    let root = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_runlog"))
        .args([
            "demo",
            "--json",
            "--units",
            "600",
            "--workers",
            "4",
            "--kills",
            "3",
            "--seed",
            "42",
            "--dir",
        ])
        .arg(root.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().expect("a summary line");
    let v: serde_json::Value = serde_json::from_str(last).unwrap();
    assert_eq!(v["units"], 600);
    assert_eq!(v["done"], 600);
    assert_eq!(v["lost"], 0);
    assert_eq!(v["duplicates"], 0);
    assert!(v["crashes"].as_u64().unwrap() >= 2, "{v}");
    assert!(v["acked"].as_u64().unwrap() >= 600, "{v}");
    assert_eq!(v["check"]["finalized"], true);

    // The run it left is readable by the ordinary tools: finalized, every unit done.
    let get = Command::new(env!("CARGO_BIN_EXE_runlog"))
        .args(["--json", "--dir"])
        .arg(root.path())
        .args(["get", "demo"])
        .output()
        .unwrap();
    assert!(get.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&get.stdout).unwrap();
    assert_eq!(doc["status"], "done");
    assert_eq!(doc["units"].as_object().unwrap().len(), 600);
}
