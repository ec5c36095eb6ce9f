//! Proves, with the real binary, that `verify` reaches the verdict every open
//! reaches and every reader stops at the same damage (issue 11, items 0–1): a
//! planted segment that does not continue the log is corruption, never a torn
//! tail that a writer would acknowledge past; a CRC-valid record that does not
//! decode fails `verify`, `get`, `unit` and `dump` alike; a damaged newest
//! snapshot is reported by `verify` (exit 1) and `status`; a run whose only
//! record is torn, and an empty run directory, are "no run" (exit 2) everywhere.
use crate::cli_support;
use cli_support::*;
use runlog::engine::Codec;
use runlog::engine::frame::encode_record;
use std::io::Write;
use std::path::{Path, PathBuf};

fn code(o: &std::process::Output) -> Option<i32> {
    o.status.code()
}

fn run_dir(root: &Path, id: &str) -> PathBuf {
    root.join("runs").join(id)
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            n.starts_with("seg-") && n.ends_with(".log")
        })
        .collect();
    v.sort();
    v
}

fn snapshots(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "snap"))
        .collect();
    v.sort();
    v
}

/// Issue 11 item 0's probe: `echo junk > seg-…99` after `init`.
#[test]
fn junk_segment_that_does_not_continue_the_log_is_corruption_and_nothing_is_acknowledged() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    ok(
        root,
        &["init", "--id", "g", "--task", "t", "--units", "a,b"],
    );
    let dir = run_dir(root, "g");
    let junk = dir.join("seg-00000000000000000099.log");
    std::fs::write(&junk, b"junk\n").unwrap();
    let before = tree_bytes_but_locks(&dir);

    let v = runlog(root, &["verify", "g"]);
    assert_eq!(code(&v), Some(1), "{}", text(&v));
    let out = text(&v);
    assert!(out.contains("CORRUPT"), "{out}");
    assert!(out.contains("seg-00000000000000000099.log"), "{out}");
    assert!(out.contains("expected 2"), "{out}");

    // The writer refuses too, acknowledging nothing and changing no byte but LOCK's.
    let u = runlog(root, &["unit", "g", "a", "done"]);
    assert_eq!(code(&u), Some(1), "{}", text(&u));
    assert!(
        !String::from_utf8_lossy(&u.stdout).contains("seq"),
        "{}",
        text(&u)
    );
    assert!(
        text(&u).contains("seg-00000000000000000099.log"),
        "{}",
        text(&u)
    );
    assert_eq!(
        before,
        tree_bytes_but_locks(&dir),
        "a refused open wrote to the run"
    );
    for verb in [&["get", "g"][..], &["resume", "g"], &["dump", "g"]] {
        let o = runlog(root, verb);
        assert_eq!(code(&o), Some(1), "{verb:?}: {}", text(&o));
        assert!(
            text(&o).contains("seg-00000000000000000099.log"),
            "{verb:?}: {}",
            text(&o)
        );
    }
    // Once the planted file is gone the run is whole again.
    std::fs::remove_file(&junk).unwrap();
    ok(root, &["unit", "g", "a", "done"]);
    assert!(ok(root, &["verify", "g"]).contains("clean, 2 records"));
}

/// Issue 11 item 1's probe: a CRC-valid JSONL record `{"bogus":1}`.
#[test]
fn record_that_does_not_decode_fails_verify_get_unit_and_dump_at_the_same_offset() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    ok(
        root,
        &["init", "--id", "g", "--task", "t", "--units", "a,b"],
    );
    ok(root, &["unit", "g", "a", "done"]);
    let seg = segments(&run_dir(root, "g")).pop().unwrap();
    let offset = std::fs::metadata(&seg).unwrap().len();
    let mut rec = Vec::new();
    encode_record(Codec::Jsonl, 3, 2, br#"{"bogus":1}"#, &mut rec);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&seg)
        .unwrap()
        .write_all(&rec)
        .unwrap();
    let at = format!("offset {offset}");

    let v = runlog(root, &["verify", "g"]);
    assert_eq!(code(&v), Some(1), "{}", text(&v));
    let out = text(&v);
    assert!(out.contains("CORRUPT") && out.contains(&at), "{out}");
    assert!(
        out.contains("cannot be replayed"),
        "says which rule failed: {out}"
    );
    let j = ok_json_any(root, &["verify", "g"]);
    assert_eq!(j["integrity"], "corrupt");
    assert_eq!(j["offset"], offset);
    assert_eq!(j["seq"], 3);
    for verb in [
        &["get", "g"][..],
        &["unit", "g", "b", "done"],
        &["dump", "g"],
        &["resume", "g"],
        &["status", "g"],
    ] {
        let o = runlog(root, verb);
        assert_eq!(code(&o), Some(1), "{verb:?}: {}", text(&o));
        let t = text(&o);
        assert!(
            t.contains(seg.file_name().unwrap().to_str().unwrap())
                && t.contains(&format!("byte offset {offset}")),
            "{verb:?} must name the file and offset: {t}"
        );
        assert!(o.stdout.is_empty(), "{verb:?} printed before failing: {t}");
    }
}

/// `--json` output whatever the exit code.
fn ok_json_any(root: &Path, args: &[&str]) -> serde_json::Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    serde_json::from_slice(&runlog(root, &a).stdout).unwrap()
}

fn damaged_snapshot_is_loud(flip_at: impl Fn(usize) -> usize) {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    ok(
        root,
        &["init", "--id", "g", "--task", "t", "--units", "a,b,c"],
    );
    ok(root, &["unit", "g", "a", "done"]);
    ok(root, &["compact", "g"]);
    ok(root, &["unit", "g", "b", "done"]);
    let dir = run_dir(root, "g");
    let snap = snapshots(&dir).pop().unwrap();
    let mut bytes = std::fs::read(&snap).unwrap();
    let i = flip_at(bytes.len());
    bytes[i] ^= 0x01;
    std::fs::write(&snap, &bytes).unwrap();
    let name = snap.file_name().unwrap().to_str().unwrap().to_string();

    let v = runlog(root, &["verify", "g"]);
    assert_eq!(
        code(&v),
        Some(1),
        "a damaged snapshot is not clean: {}",
        text(&v)
    );
    assert!(text(&v).contains(&name), "{}", text(&v));
    let j = ok_json_any(root, &["verify", "g"]);
    if j["integrity"] == "clean" {
        // Skipped at open: what was damaged and what the open used instead.
        assert_eq!(
            j["snapshotFallbacks"][0]["path"]
                .as_str()
                .map(|p| p.ends_with(&name)),
            Some(true),
            "{j}"
        );
        assert_eq!(j["fellBackTo"], 0, "{j}");
        assert!(text(&v).contains("SNAPSHOT DAMAGED"), "{}", text(&v));
        let s = runlog(root, &["status", "g"]);
        assert_eq!(code(&s), Some(0), "{}", text(&s));
        let err = String::from_utf8_lossy(&s.stderr);
        assert!(
            err.contains("SNAPSHOT_DAMAGED") && err.contains(&name),
            "{err}"
        );
        let sj = ok_json_any(root, &["status", "g"]);
        assert!(sj["snapshotFallbacks"][0]["reason"].is_string(), "{sj}");
        // Still the right state, read from the log.
        assert!(ok(root, &["get", "g", "--unit", "b"]).contains("done"));
    } else {
        // A data block: every lookup that enters it and verify name it.
        assert_eq!(j["integrity"], "corrupt", "{j}");
    }
}

/// Issue 11 item 1's probe: one byte flipped in the middle of the newest snapshot.
#[test]
fn snapshot_byte_flipped_in_the_middle_fails_verify() {
    damaged_snapshot_is_loud(|len| len / 2);
}

/// A flipped footer byte: always skipped at open, so always a fallback.
#[test]
fn snapshot_footer_damage_is_a_loud_fallback_in_verify_and_status() {
    damaged_snapshot_is_loud(|len| len - 10);
}

/// A run whose only record is torn, and an empty run directory: no run, exit 2.
#[test]
fn run_without_an_init_record_is_no_run_for_every_command() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    ok(root, &["init", "--id", "g", "--task", "t", "--units", "a"]);
    let seg = segments(&run_dir(root, "g")).pop().unwrap();
    let bytes = std::fs::read(&seg).unwrap();
    // Cut the init record in half: the header line stays whole.
    let header_end = bytes.iter().position(|b| *b == b'\n').unwrap() + 1;
    let cut = header_end + (bytes.len() - header_end) / 2;
    std::fs::write(&seg, &bytes[..cut]).unwrap();
    // A crash tore the record before its fsync returned: no durability mark
    // was ever written for it (FORMAT.md §5.7).
    std::fs::remove_file(run_dir(root, "g").join("DURABLE")).unwrap();
    for verb in [&["get", "g"][..], &["resume", "g"]] {
        let o = runlog(root, verb);
        assert_eq!(code(&o), Some(2), "{verb:?}: {}", text(&o));
        assert!(
            text(&o).contains("never initialized"),
            "{verb:?}: {}",
            text(&o)
        );
        assert!(
            o.stdout.is_empty(),
            "{verb:?} printed a made-up document: {}",
            text(&o)
        );
    }
    // `init` creates it again.
    ok(root, &["init", "--id", "g", "--task", "t", "--units", "a"]);
    assert!(ok(root, &["get", "g"]).contains("\"schemaVersion\": 2"));

    std::fs::create_dir(run_dir(root, "empty")).unwrap();
    for verb in [
        &["verify", "empty"][..],
        &["get", "empty"],
        &["dump", "empty"],
        &["status", "empty"],
    ] {
        let o = runlog(root, verb);
        assert_eq!(code(&o), Some(2), "{verb:?}: {}", text(&o));
        assert!(
            text(&o).contains("no run \"empty\""),
            "{verb:?}: {}",
            text(&o)
        );
    }
}
