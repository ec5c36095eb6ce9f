//! Proves that schema versions are read (issue 11, item 7), with the real
//! binary: a run whose state was written at a newer schema than this build's is
//! refused by every reader and writer ("written by a newer runlog (schema N);
//! this build reads up to M") and nothing is written; a transition or a run
//! document carrying a field this build does not know is never read narrowed
//! (the unknown field is named, and the open or `verify` fails).
use crate::cli_support;
use cli_support::*;
use runlog::engine::Codec;
use runlog::engine::frame::encode_record;
use runlog::engine::snapfile::encode_snapshot;
use runlog::run::SCHEMA_VERSION;
use std::io::Write;
use std::path::{Path, PathBuf};

fn run_dir(root: &Path) -> PathBuf {
    root.join("runs").join("g")
}

/// A run `g` (JSONL) with one record, plus a whole-state snapshot at seq 1
/// holding `doc` as a build that wrote it would.
fn run_with_snapshot(root: &Path, edit: impl Fn(&mut serde_json::Value)) {
    ok(root, &["init", "--id", "g", "--task", "t", "--units", "a"]);
    let mut doc = ok_json(root, &["get", "g"]);
    edit(&mut doc);
    let mut payload = Vec::new();
    Codec::Jsonl.encode(&doc, &mut payload).unwrap();
    let snap = encode_snapshot(Codec::Jsonl, 1, &payload);
    std::fs::write(run_dir(root).join("snap-00000000000000000001.snap"), snap).unwrap();
}

#[test]
fn a_run_from_a_newer_schema_is_refused_by_every_command() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let newer = SCHEMA_VERSION + 1;
    run_with_snapshot(root, |d| d["schemaVersion"] = newer.into());
    let before = tree_bytes_but_locks(&run_dir(root));
    let want = format!(
        "written by a newer runlog (schema {newer}); this build reads up to {SCHEMA_VERSION}"
    );
    for verb in [
        &["get", "g"][..],
        &["status", "g"],
        &["resume", "g"],
        &["verify", "g"],
        &["dump", "g"],
        &["unit", "g", "a", "done"],
        &["compact", "g"],
    ] {
        let o = runlog(root, verb);
        assert_eq!(o.status.code(), Some(1), "{verb:?}: {}", text(&o));
        assert!(text(&o).contains(&want), "{verb:?}: {}", text(&o));
        assert!(o.stdout.is_empty(), "{verb:?}: {}", text(&o));
    }
    assert_eq!(before, tree_bytes_but_locks(&run_dir(root)));
}

#[test]
fn the_current_schema_reads_and_an_unknown_document_field_is_loud() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    // Control: this build's own schema, written the same way, reads.
    run_with_snapshot(root, |_| {});
    assert!(ok(root, &["verify", "g"]).contains("clean"));
    // A field this build does not know: not dropped. The snapshot fails to
    // decode, naming the field, and verify says so (the open uses the log).
    std::fs::remove_dir_all(run_dir(root)).unwrap();
    run_with_snapshot(root, |d| d["fromTheFuture"] = 1.into());
    let o = runlog(root, &["verify", "g"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("unknown field `fromTheFuture`"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_transition_with_an_unknown_field_is_never_replayed_narrowed() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    ok(root, &["init", "--id", "g", "--task", "t", "--units", "a"]);
    let seg = run_dir(root).join("seg-00000000000000000001.log");
    let t = br#"{"at":"2026-12-01T00:00:00.000Z","change":{"unit":{"unit":"a","status":"done","note":null,"deps":null,"priority":9}}}"#;
    let mut rec = Vec::new();
    encode_record(Codec::Jsonl, 2, 1, t, &mut rec);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&seg)
        .unwrap()
        .write_all(&rec)
        .unwrap();
    for verb in [
        &["get", "g"][..],
        &["verify", "g"],
        &["unit", "g", "a", "done"],
    ] {
        let o = runlog(root, verb);
        assert_eq!(o.status.code(), Some(1), "{verb:?}: {}", text(&o));
        assert!(
            text(&o).contains("unknown field `priority`"),
            "{verb:?}: {}",
            text(&o)
        );
    }
}
