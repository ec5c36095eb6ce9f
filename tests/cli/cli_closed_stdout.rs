//! Proves `runlog get|dump|resume|status … | head` is safe: a reader that has
//! gone away ends the command by SIGPIPE, with nothing on stderr (no panic,
//! no backtrace), as `cat` or `ls` would end; and the run is left as it was.
use crate::cli_support;
use cli_support::*;
use std::os::unix::process::ExitStatusExt;

/// Runs `args` with stdout a pipe whose read end is already closed, so the
/// first write meets EPIPE, whatever the timing.
fn run_into_closed_pipe(root: &std::path::Path, args: &[&str]) -> std::process::Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut c = cmd(root);
    c.args(args)
        .stdout(writer)
        .stderr(std::process::Stdio::piped());
    c.output().unwrap()
}

/// Creates run `r` with these units.
fn init_run(root: &std::path::Path, units: impl Iterator<Item = String>) {
    let units = units.collect::<Vec<_>>().join(",");
    ok(
        root,
        &["init", "--id", "r", "--task", "t", "--units", &units],
    );
}

#[test]
fn readers_end_by_sigpipe_without_a_word_on_a_closed_stdout() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    init_run(root, (0..200).map(|i| format!("u{i}")));
    ok(root, &["unit", "r", "u0", "done"]);
    let before = tree_bytes_but_locks(root);
    let cases: [&[&str]; 9] = [
        &["get", "r"],
        &["--json", "get", "r"],
        &["get", "r", "--unit", "u0"],
        &["dump", "r"],
        &["resume", "r"],
        &["status", "r"],
        &["--json", "status", "r"],
        &["status", "--list"],
        &["verify", "r"],
    ];
    for args in cases {
        let o = run_into_closed_pipe(root, args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.is_empty(), "{args:?} wrote to stderr: {stderr}");
        assert_eq!(
            o.status.signal(),
            Some(libc::SIGPIPE),
            "{args:?} ended with {:?}, not by SIGPIPE",
            o.status
        );
    }
    assert_eq!(
        tree_bytes_but_locks(root),
        before,
        "a reader changed the run"
    );
}

#[test]
fn a_shell_pipeline_into_head_reports_no_error() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    init_run(root, (0..2000).map(|i| format!("unit-{i}")));
    for verb in ["get", "dump", "resume", "status"] {
        let script = format!(
            "set -o pipefail 2>/dev/null; \"$0\" --dir \"$1\" {verb} r | head -2 >/dev/null; echo \"status=$?\""
        );
        let o = std::process::Command::new("bash")
            .args(["-c", &script, BIN])
            .arg(root)
            .env_remove("RUNLOG_DIR")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(!stderr.contains("panicked"), "{verb}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{verb}: {stderr}");
        // 0 when the whole output fitted in the pipe before head closed it;
        // 141 (SIGPIPE) otherwise; never 1 (an error) or 101 (a panic).
        assert!(
            stdout.contains("status=0") || stdout.contains("status=141"),
            "{verb}: {stdout} {stderr}"
        );
    }
}
