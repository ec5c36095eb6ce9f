//! Proves `examples/driver.py` (Python driving `runlog apply` with pipelined
//! writes) survives a kill -9 midway: run again, it skips the done units, finishes
//! the rest, matches a refused line's error ack to its request, and every unit is
//! done exactly once. Skipped, saying so, when python3 is absent (unless
//! `RUNLOG_REQUIRE_PYTHON=1`, which CI sets, makes that a failure).
use crate::cli_support;
use cli_support::*;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const UNITS: usize = 40;

fn python_present() -> bool {
    let found = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        crate::skip_support::skip(
            "driver_survives_kill9_and_finishes_every_unit_once",
            "RUNLOG_REQUIRE_PYTHON",
            "python3 not found on PATH",
        );
    }
    found
}

fn driver(root: &Path, extra: &[&str]) -> Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/driver.py");
    let mut c = Command::new("python3");
    c.arg(script)
        .args(["--runlog", BIN, "--dir"])
        .arg(root)
        .args(["--run", "py", "--units", &UNITS.to_string()])
        .args(["--workers", "4", "--work-ms", "30"])
        .args(extra)
        .env_remove("RUNLOG_DIR")
        .stdin(Stdio::null());
    c
}

#[test]
fn driver_survives_kill9_and_finishes_every_unit_once() {
    if !python_present() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let root = d.path();

    // First run: kill -9 the driver once 8 units are acked done.
    let mut child = driver(root, &[]).stdout(Stdio::piped()).spawn().unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut acked = 0;
    for line in out.lines() {
        if line.unwrap().starts_with("done ") {
            acked += 1;
            if acked == 8 {
                break;
            }
        }
    }
    assert_eq!(acked, 8, "the driver ended before 8 units were done");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // The orphaned `runlog apply` reads EOF, applies what the pipe still held,
    // and exits: wait for its writer lock to be free before looking.
    let lock = std::fs::File::open(root.join("runs/py/LOCK")).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while lock.try_lock().is_err() {
        assert!(std::time::Instant::now() < deadline, "apply kept its lock");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(lock);
    let doc = ok_json(root, &["get", "py"]);
    assert_eq!(doc["status"], "running");
    let before = done_counts(root, "py");
    assert!((8..UNITS).contains(&before.len()), "{before:?}");

    // Rerun (apply's lock from the killed run is waited for), with a refused line.
    let o = driver(root, &["--inject-error"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stdout}{stderr}");
    assert!(stdout.starts_with("resumed run py"), "{stdout}");
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.contains("no-such-budget"))
            .count(),
        1,
        "the refusal prints once (apply's line): {stderr}"
    );
    // Units acked done in the first run are skipped, not redone.
    let rerun: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("done "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(rerun.len() + before.len(), UNITS, "{stdout}");
    assert!(rerun.iter().all(|u| !before.contains_key(*u)), "{stdout}");

    let counts = done_counts(root, "py");
    assert_eq!(counts.len(), UNITS, "{counts:?}");
    assert!(counts.values().all(|&n| n == 1), "{counts:?}");
    let doc = ok_json(root, &["get", "py"]);
    assert_eq!(doc["status"], "done");
    assert!(
        doc["units"]["u039"]["note"]
            .as_str()
            .unwrap()
            .starts_with("sha256=")
    );
}
