//! Proves waiting is visible: a writer that meets another's lock says on
//! stderr, after about a second, who holds it (pid and command) and how long it
//! will wait; and `gc` skips a run in use at once and lists it.
use crate::cli_support;
use cli_support::*;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};

/// Starts `runlog apply RUN`, which holds the run's writer lock while its
/// stdin is open, and returns once it has acknowledged one line (so it holds
/// the lock; a refused line, on a closed run, is acknowledged too).
fn hold_lock(root: &std::path::Path, run: &str) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut c = cmd(root)
        .args(["apply", run])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdin = c.stdin.as_mut().unwrap();
    writeln!(stdin, r#"{{"op":"phase","phase":"p","status":"running"}}"#).unwrap();
    stdin.flush().unwrap();
    let mut out = BufReader::new(c.stdout.take().unwrap());
    let mut ack = String::new();
    out.read_line(&mut ack).unwrap();
    assert!(
        ack.contains("\"seq\"") || ack.contains("\"code\":2"),
        "apply did not ack: {ack:?}"
    );
    (c, out)
}

#[test]
fn a_waiting_writer_says_who_holds_the_lock_and_for_how_long() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(root, &["init", "--id", "r", "--task", "t", "--units", "a"]);
    let (mut holder, _out) = hold_lock(root, "r");
    let o = runlog(root, &["unit", "r", "a", "done", "--lock-timeout", "1.5"]);
    assert_eq!(o.status.code(), Some(1), "the lock was not free");
    let stderr = String::from_utf8_lossy(&o.stderr);
    let pid = format!("pid {}", holder.id());
    assert!(stderr.contains("waiting for the writer lock"), "{stderr}");
    assert!(stderr.contains(&pid), "{stderr} does not name {pid}");
    assert!(
        stderr.contains("apply r"),
        "{stderr} does not show the holder's command"
    );
    assert!(
        stderr.contains("0.5 s more"),
        "{stderr} does not say how long"
    );
    // Exactly one notice, then the failure.
    assert_eq!(
        stderr.matches("waiting for the writer lock").count(),
        1,
        "{stderr}"
    );
    // The failure says how long the call waited in all (it said the last
    // 0.1 s slice's wait).
    let waited: f64 = stderr
        .split("waited ")
        .nth(1)
        .and_then(|w| w.split('s').next())
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("{stderr} does not say how long it waited"));
    assert!(
        waited >= 1.5,
        "waited {waited}s of --lock-timeout 1.5: {stderr}"
    );

    // A wait of a second or less says nothing extra: it fails as before.
    let o = runlog(root, &["unit", "r", "a", "done", "--lock-timeout", "0.2"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("waiting for"));
    drop(holder.stdin.take());
    assert!(holder.wait().unwrap().success());
    ok(root, &["unit", "r", "a", "done"]);
}

#[test]
fn gc_skips_a_run_in_use_at_once_and_lists_it() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(root, &["init", "--id", "old", "--task", "t"]);
    ok(root, &["finalize", "old", "aborted"]);
    let (mut holder, _out) = hold_lock(root, "old");
    // With a lock timeout far longer than the test's patience: gc must not wait.
    let mut gc = cmd(root)
        .args(["gc", "--keep-days", "0", "--lock-timeout", "3600"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut polls = 0;
    while gc.try_wait().unwrap().is_none() {
        polls += 1;
        assert!(polls < 600, "gc is waiting for a run in use");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let o = gc.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("skipped old (in use)"), "{out}");
    assert!(root.join("runs/old").is_dir());
    drop(holder.stdin.take());
    holder.wait().unwrap();
    let v = ok_json(root, &["gc", "--keep-days", "0"]);
    assert_eq!(v["removed"], serde_json::json!(["old"]), "{v}");
}
