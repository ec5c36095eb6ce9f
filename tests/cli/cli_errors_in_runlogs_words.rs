//! Proves errors read as runlog's own: `apply` says what a line must look
//! like (no Rust internals), writes failures to stderr as well as its ack,
//! refuses invalid UTF-8; finalize messages say "refused" once and list only
//! the outcomes it takes; the missing-key message names no library API;
//! and `apply`'s ack says what an `item` or a `spend` came to.
use crate::cli_support;
use cli_support::*;
use std::io::Write;
use std::process::Stdio;

fn apply(root: &std::path::Path, run: &str, input: &[u8]) -> std::process::Output {
    let mut c = cmd(root)
        .args(["apply", run])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(input).unwrap();
    c.wait_with_output().unwrap()
}

#[test]
fn apply_errors_show_the_line_shape_and_go_to_stderr() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(root, &["init", "--id", "r", "--task", "t", "--units", "a"]);
    let o = apply(
        root,
        "r",
        b"[]\n{\"op\":\"bogus\"}\n{\"op\":\"unit\",\"unit\":\"a\"}\n\xff\xfe{}\n{\"op\":\"unit\",\"unit\":\"a\",\"status\":\"done\"}\n",
    );
    assert_eq!(o.status.code(), Some(0));
    let acks: Vec<serde_json::Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(acks.len(), 5, "{acks:?}");
    for a in &acks[..4] {
        assert_eq!(a["code"], 2, "{a}");
        let e = a["error"].as_str().unwrap();
        assert!(
            !e.contains("internally tagged") && !e.contains("enum Op"),
            "{e}"
        );
        assert!(!e.contains('`'), "{e}");
    }
    for a in &acks[..3] {
        assert!(
            a["error"].as_str().unwrap().contains("runlog apply --help"),
            "{a}"
        );
    }
    assert!(
        acks[0]["error"]
            .as_str()
            .unwrap()
            .contains("not a JSON object")
    );
    assert!(
        acks[1]["error"]
            .as_str()
            .unwrap()
            .contains("unknown op \"bogus\"")
    );
    assert!(
        acks[2]["error"]
            .as_str()
            .unwrap()
            .contains("missing field \"status\"")
    );
    assert!(acks[3]["error"].as_str().unwrap().contains("not UTF-8"));
    assert!(acks[4]["seq"].is_u64(), "the good line still applies");
    let stderr = String::from_utf8_lossy(&o.stderr);
    for n in 1..=4 {
        assert!(stderr.contains(&format!("apply: line {n}:")), "{stderr}");
    }
    assert!(!stderr.contains("line 5"), "{stderr}");
    // Nothing invalid was stored: the U+FFFD repair is gone.
    assert!(!ok(root, &["dump", "r"]).contains('\u{fffd}'));
    let help = ok(root, &["apply", "--help"]);
    assert!(
        help.contains("\"op\":\"spend\"") && help.contains("docs/CLI.md"),
        "{help}"
    );
}

#[test]
fn finalize_and_key_messages() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(root, &["init", "--id", "r", "--task", "t", "--units", "a"]);
    let o = runlog(root, &["finalize", "r", "done"]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(e.matches("refused").count(), 1, "{e}");
    let o = runlog(root, &["finalize", "r", "bogus"]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("done, needs_attention or aborted") && !e.contains("running"),
        "{e}"
    );

    let key = key_file(&root.join("key"), "ab", 0o600);
    ok(root, &with_key(&key, &["init", "--id", "k", "--task", "t"]));
    let o = runlog(root, &["get", "k"]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("--key-file") && !e.contains("Options::"), "{e}");
}

/// `--lock-timeout -1` is a number of seconds out of range, refused in
/// runlog's words (exit 2), not an "unexpected argument" from the parser;
/// before or after the command alike.
#[test]
fn a_negative_lock_timeout_is_refused_as_out_of_range() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(root, &["init", "--id", "r", "--task", "t", "--units", "a"]);
    for args in [
        &["--lock-timeout", "-1", "unit", "r", "a", "done"][..],
        &["unit", "r", "a", "done", "--lock-timeout", "-1"][..],
        &["--lock-timeout=-0.5", "unit", "r", "a", "done"][..],
    ] {
        let o = runlog(root, args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("--lock-timeout") && err.contains("is not a number of seconds ≥ 0"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("unexpected argument"), "{args:?}: {err}");
    }
    assert_eq!(
        ok_json(root, &["get", "r"])["units"]["a"]["status"],
        "pending",
        "nothing written"
    );
}

/// Not an error, but `apply`'s ack speaks for the change it answers: an
/// `item`'s ack lists the ids it was given and a `spend`'s the budget after
/// it, each as that change left the run, even in one batch with others.
#[test]
fn apply_acks_an_item_with_its_ids_and_a_spend_with_its_budget() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(
        root,
        &[
            "init",
            "--id",
            "r",
            "--task",
            "t",
            "--units",
            "a,b",
            "--budget",
            "usd=2@ops",
        ],
    );
    let lines = [
        r#"{"op":"unit","unit":"a","status":"in_progress"}"#,
        r#"{"op":"item","item":[{"n":1},{"n":2}]}"#,
        r#"{"op":"item","item":{"n":3}}"#,
        r#"{"op":"spend","budget":"usd","amount":1.5}"#,
        r#"{"op":"unit","unit":"a","status":"done"}"#,
        r#"{"op":"spend","budget":"usd","amount":1}"#,
        r#"{"op":"spend","budget":"nope","amount":1}"#,
        r#"{"op":"unit","unit":"b","status":"done"}"#,
    ];
    let o = apply(root, "r", format!("{}\n", lines.join("\n")).as_bytes());
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let acks: Vec<serde_json::Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(acks.len(), lines.len(), "{acks:?}");
    let seqs: Vec<u64> = acks.iter().filter_map(|a| a["seq"].as_u64()).collect();
    assert_eq!(seqs, (2..=8).collect::<Vec<_>>(), "{acks:?}");
    assert_eq!(
        acks[0].as_object().unwrap().len(),
        1,
        "a unit's ack: {}",
        acks[0]
    );
    assert_eq!(acks[1]["ids"], serde_json::json!(["item-1", "item-2"]));
    assert_eq!(acks[2]["ids"], serde_json::json!(["item-3"]));
    // The budget as each spend left it, not as the batch did.
    assert_eq!(acks[3]["budget"]["spent"], 1.5);
    assert!(acks[3]["budget"]["exhaustedAt"].is_null(), "{}", acks[3]);
    assert_eq!(acks[5]["budget"]["spent"], 2.5);
    assert_eq!(acks[5]["budget"]["limit"], 2.0);
    assert!(acks[5]["budget"]["exhaustedAt"].is_string(), "{}", acks[5]);
    assert_eq!(acks[6]["code"], 2, "{}", acks[6]);
    let doc = ok_json(root, &["get", "r"]);
    assert_eq!(doc["nextItem"], 3);
    assert_eq!(doc["budgets"]["usd"]["spent"], 2.5);
}
