//! Proves `--key-file` end to end with the real binary: `start` with a key
//! creates a tagged run; every verb works on it with the key (flag or
//! $RUNLOG_KEY_FILE) and refuses without it; a payload byte changed with its
//! checksum recomputed makes `verify` exit 1 naming the tampering and its
//! offset, and writers refuse it without touching a byte.
use crate::cli_support;
use cli_support::*;
use runlog::engine::frame::{
    Frame, decode_record, decode_segment_header, encode_record_tagged, jsonl_record_mac,
};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Changes one payload byte of record `seq` of `seg`, recomputing its checksum
/// (so only the tag can tell). Returns the record's offset.
fn tamper(seg: &Path, seq: u64) -> u64 {
    let bytes = std::fs::read(seg).unwrap();
    let h = decode_segment_header(&bytes).unwrap();
    assert!(h.store_id.is_some(), "run is not tagged");
    let mut at = h.len;
    loop {
        let Frame::Record {
            seq: s,
            synced,
            payload,
            next,
        } = decode_record(h.codec, &bytes, at)
        else {
            panic!("record {seq} not found")
        };
        if s == seq {
            let mac = jsonl_record_mac(&bytes, at);
            // A byte in the middle whose change keeps the record valid JSON.
            for i in payload.len() / 2..payload.len() {
                for c in *b"xyz019" {
                    let mut p = payload.to_vec();
                    if p[i] == c || !p[i].is_ascii_alphanumeric() {
                        continue;
                    }
                    p[i] = c;
                    let mut out = bytes[..at].to_vec();
                    encode_record_tagged(h.codec, s, synced, &p, mac.as_ref(), &mut out);
                    out.extend_from_slice(&bytes[next..]);
                    if matches!(decode_record(h.codec, &out, at), Frame::Record { .. }) {
                        std::fs::write(seg, out).unwrap();
                        return at as u64;
                    }
                }
            }
            panic!("no byte of record {seq} to change");
        }
        at = next;
    }
}

#[test]
fn a_tagged_run_detects_a_changed_record_and_needs_its_key() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    let key = key_file(&d.path().join("key-600"), "3c", 0o600);
    for (id, codec) in [("kj", "jsonl"), ("kb", "binary")] {
        let start = [
            "start",
            "--id",
            id,
            "--fingerprint",
            "a=1",
            "--units",
            "u1,u2,u3",
            "--codec",
            codec,
        ];
        ok(&root, &with_key(&key, &start));
        ok(&root, &with_key(&key, &["unit", id, "u1", "done"]));
        ok(&root, &with_key(&key, &["unit", id, "u2", "in_progress"]));
        ok(&root, &with_key(&key, &["phase", id, "build", "running"]));
        let v = ok_json(&root, &with_key(&key, &["verify", id]));
        assert_eq!(v["integrity"], "clean", "{v}");
        // Through the environment as well.
        let o = cmd(&root)
            .env("RUNLOG_KEY_FILE", &key)
            .args(["get", id])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(
            ok_json(&root, &with_key(&key, &["get", id]))["units"]["u1"]["status"],
            "done"
        );
        ok(&root, &with_key(&key, &["dump", id]));

        // Without the key: refused, naming what to do.
        let o = runlog(&root, &["verify", id]);
        assert_eq!(o.status.code(), Some(2));
        assert!(text(&o).contains("tagged; pass its key"), "{}", text(&o));
        let o = runlog(&root, &["unit", id, "u3", "done"]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));

        // One byte of record 2 changed, checksum recomputed.
        let seg = root
            .join("runs")
            .join(id)
            .join("seg-00000000000000000001.log");
        let offset = tamper(&seg, 2);
        let after = std::fs::read(&seg).unwrap();
        let o = runlog(&root, &with_key(&key, &["verify", id]));
        let said = text(&o);
        assert_eq!(o.status.code(), Some(1), "{said}");
        assert!(said.to_lowercase().contains("tamper"), "{said}");
        assert!(said.contains(&format!("offset {offset}")), "{said}");
        let v: serde_json::Value = serde_json::from_slice(
            &runlog(&root, &with_key(&key, &["--json", "verify", id])).stdout,
        )
        .unwrap();
        assert_eq!(
            (
                v["integrity"].as_str(),
                v["offset"].as_u64(),
                v["seq"].as_u64()
            ),
            (Some("tampered"), Some(offset), Some(2)),
            "{v}"
        );
        // Readers and writers refuse too, and no byte of the log changes.
        for args in [
            vec!["get", id],
            vec!["unit", id, "u3", "done"],
            vec!["compact", id],
            vec!["rebuild", id],
            vec!["dump", id],
        ] {
            let o = runlog(&root, &with_key(&key, &args));
            let said = text(&o);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {said}");
            assert!(said.contains("tampering detected"), "{args:?}: {said}");
            assert_eq!(
                std::fs::read(&seg).unwrap(),
                after,
                "{args:?} changed the log"
            );
        }
    }
}

#[test]
fn key_files_missing_or_of_the_wrong_shape_or_mode_and_keys_for_untagged_runs_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    let start = ["start", "--id", "r", "--fingerprint", "a=1"];
    let open_key = key_file(&d.path().join("key-644"), "3c", 0o644);
    let o = runlog(&root, &with_key(&open_key, &start));
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("chmod 600"), "{}", text(&o));
    let short = d.path().join("short");
    std::fs::write(&short, "abcd\n").unwrap();
    std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = runlog(&root, &with_key(&short, &start));
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("32 raw bytes"), "{}", text(&o));
    // A missing key file is refused too (2, as a bad mode is), naming the path.
    let missing = d.path().join("no-such-key");
    let o = runlog(&root, &with_key(&missing, &start));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("no-such-key") && text(&o).contains("does not exist"),
        "{}",
        text(&o)
    );
    assert!(
        !root.join("runs").join("r").exists(),
        "a refused key created the run"
    );

    ok(&root, &start);
    let key = key_file(&d.path().join("key-600"), "3c", 0o600);
    let o = runlog(&root, &with_key(&key, &["get", "r"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("not tagged"), "{}", text(&o));
}
