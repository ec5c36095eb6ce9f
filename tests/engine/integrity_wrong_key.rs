//! Proves that a tagged store's key check (FORMAT.md §10.6) tells a wrong key
//! from tampering (issue 11, item 1): with the real binary, every command given
//! another key is refused at once, exit 2, "wrong key", and writes nothing;
//! a record changed under the right key stays TAMPERED (exit 1); and a tagged
//! store written before key checks (no check in its headers) is still read.
use crate::cli_support;
use cli_support::*;
use runlog::engine::frame::{decode_segment_header, encode_segment_header_tagged};
use std::path::{Path, PathBuf};

fn first_segment(root: &Path, id: &str) -> PathBuf {
    let mut v: Vec<_> = std::fs::read_dir(root.join("runs").join(id))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    v.sort();
    v.remove(0)
}

#[test]
fn wrong_key_is_refused_as_the_wrong_key_for_both_codecs() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    let right = key_file(&d.path().join("right"), "3c", 0o600);
    let wrong = key_file(&d.path().join("wrong"), "4d", 0o600);
    for (id, codec) in [("kj", "jsonl"), ("kb", "binary")] {
        let init = [
            "init", "--id", id, "--task", "t", "--units", "a,b", "--codec", codec,
        ];
        ok(&root, &with_key(&right, &init));
        ok(&root, &with_key(&right, &["unit", id, "a", "done"]));
        let seg = first_segment(&root, id);
        let h = decode_segment_header(&std::fs::read(&seg).unwrap()).unwrap();
        assert!(
            h.key_check.is_some(),
            "a new tagged segment carries its key check"
        );
        let before = tree_bytes_but_locks(&root.join("runs").join(id));
        for verb in [
            &["verify", id][..],
            &["get", id],
            &["dump", id],
            &["status", id],
            &["unit", id, "b", "done"],
        ] {
            let o = runlog(&root, &with_key(&wrong, verb));
            assert_eq!(o.status.code(), Some(2), "{verb:?}: {}", text(&o));
            assert!(text(&o).contains("wrong key"), "{verb:?}: {}", text(&o));
            assert!(!text(&o).contains("TAMPERED"), "{verb:?}: {}", text(&o));
        }
        let after = tree_bytes_but_locks(&root.join("runs").join(id));
        assert_eq!(before, after, "a wrong key wrote to the run");
        // The right key still reads it.
        assert!(ok(&root, &with_key(&right, &["verify", id])).contains("clean"));
    }
}

#[test]
fn tagged_store_without_a_key_check_is_still_read_and_a_wrong_key_is_still_caught() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    let right = key_file(&d.path().join("right"), "3c", 0o600);
    let wrong = key_file(&d.path().join("wrong"), "4d", 0o600);
    for (id, codec) in [("oj", "jsonl"), ("ob", "binary")] {
        let init = [
            "init", "--id", id, "--task", "t", "--units", "a", "--codec", codec,
        ];
        ok(&root, &with_key(&right, &init));
        // Rewrite the header as a build before key checks wrote it.
        let seg = first_segment(&root, id);
        let bytes = std::fs::read(&seg).unwrap();
        let h = decode_segment_header(&bytes).unwrap();
        let mut old = encode_segment_header_tagged(h.codec, h.first_seq, h.store_id.as_ref());
        assert!(decode_segment_header(&old).unwrap().key_check.is_none());
        old.extend_from_slice(&bytes[h.len..]);
        std::fs::write(&seg, old).unwrap();
        // That build wrote no durability mark either (FORMAT.md §5.7), and the
        // shorter JSONL header moved the records the mark names.
        std::fs::remove_file(seg.parent().unwrap().join("DURABLE")).unwrap();
        assert!(ok(&root, &with_key(&right, &["verify", id])).contains("clean, 1 records"));
        ok(&root, &with_key(&right, &["unit", id, "a", "done"]));
        // Without a check, the first tag tells (as before key checks).
        let o = runlog(&root, &with_key(&wrong, &["verify", id]));
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("TAMPERED"), "{}", text(&o));
    }
}
