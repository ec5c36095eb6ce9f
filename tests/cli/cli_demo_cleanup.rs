//! Proves the demo cleans up and validates: Ctrl-C stops it (exit 130) with
//! its worker, and leaves no `runlog-demo-*` directory in the temporary
//! directory; `--kills` beyond what `--units` allows is refused (exit 2)
//! rather than silently doing fewer; and `--kills K` does exactly K kills.
use crate::cli_support;
use cli_support::*;
use std::process::{Command, Stdio};

fn demo_dirs(tmp: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("runlog-demo-")
        })
        .collect()
}

#[test]
fn ctrl_c_removes_the_temporary_root() {
    let tmp = tempfile::tempdir().unwrap();
    let child = Command::new(BIN)
        .args(["demo", "--units", "50000", "--work-us", "2000"])
        .env("TMPDIR", tmp.path())
        .env_remove("RUNLOG_DIR")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (counting polls) until the demo's run exists, so there is something to clean.
    let mut polls = 0;
    while !demo_dirs(tmp.path())
        .iter()
        .any(|d| d.join("runs/demo").is_dir())
    {
        polls += 1;
        assert!(polls < 1200, "the demo never created its run");
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert_eq!(
        demo_dirs(tmp.path()),
        Vec::<std::path::PathBuf>::new(),
        "left behind"
    );
}

#[test]
fn kills_are_validated_and_all_done() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .env("TMPDIR", tmp.path())
            .env_remove("RUNLOG_DIR")
            .output()
            .unwrap()
    };
    let o = run(&["demo", "--units", "5", "--kills", "10"]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("--kills 10") && e.contains("--units 5"), "{e}");
    assert!(demo_dirs(tmp.path()).is_empty());
    let o = run(&[
        "--json",
        "demo",
        "--units",
        "60",
        "--kills",
        "3",
        "--work-us",
        "3000",
        "--seed",
        "1",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = stdout_json(&o);
    assert_eq!(v["kills_asked"], 3, "{v}");
    assert_eq!(v["crashes"], 3, "{v}");
    assert!(
        demo_dirs(tmp.path()).is_empty(),
        "a finished demo removes its root"
    );
}
