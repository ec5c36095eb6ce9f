//! Proves readers (`get`, `resume`, `status`, `verify`, `dump`) beside a live
//! `apply` writer take no lock, change no byte, and see every acked transition.
use crate::cli_support;
use cli_support::*;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

#[test]
fn readers_see_acked_transitions_of_a_live_writer_and_change_nothing() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(
        root,
        &["init", "--id", "live-run", "--task", "t", "--units", "a,b"],
    );
    let mut child = cmd(root)
        .args(["apply", "live-run"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut ack = || {
        let mut l = String::new();
        out.read_line(&mut l).unwrap();
        serde_json::from_str::<serde_json::Value>(&l).unwrap()
    };
    for (i, line) in [
        r#"{"op":"unit","unit":"a","status":"in_progress"}"#,
        r#"{"op":"unit","unit":"a","status":"done","note":"ok"}"#,
        r#"{"op":"phase","phase":"build","status":"running"}"#,
        r#"{"op":"item","item":{"finding":"x"}}"#,
    ]
    .iter()
    .enumerate()
    {
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        assert_eq!(ack()["seq"], i as u64 + 2);

        let before = tree_bytes(root);
        let doc = ok_json(root, &["get", "live"]);
        assert!(doc["updatedAt"].is_string());
        let resume = ok_json(root, &["resume", "live-run"]);
        let status = ok(root, &["status", "live-run"]);
        let verify = ok_json(root, &["verify", "live-run"]);
        let dump = ok(root, &["dump", "live-run"]);
        assert_eq!(tree_bytes(root), before, "a reader changed bytes");
        assert_eq!(dump.lines().count(), i + 2, "dump sees every acked record");
        assert_eq!(verify["lastSeq"], i as u64 + 2);
        if i >= 1 {
            assert_eq!(doc["units"]["a"]["status"], "done");
            assert_eq!(resume["skip"], serde_json::json!(["a"]));
            assert!(status.contains("1/2"));
        }
    }
    // The writer still holds the lock: a second writer times out (exit 1).
    let o = runlog(
        root,
        &["unit", "live-run", "b", "done", "--lock-timeout", "0.2"],
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let doc = ok_json(root, &["get", "live-run"]);
    assert_eq!(doc["openItems"][0]["item"]["finding"], "x");
}
