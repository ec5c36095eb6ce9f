//! Proves runlog never writes through a symlink planted in a store: in place of a
//! segment, a snapshot, the LOCK file, a leftover temp file or a quarantine file,
//! or as the store directory itself, the link is refused (open fails, or a
//! snapshot is loudly skipped) and the file it points to keeps every byte.
use crate::common;
use common::*;
use runlog::engine::{Codec, Error, Store};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

const SEG1: &str = "seg-00000000000000000001.log";

/// A store with records 1..=20, a snapshot at 10 and records after it.
fn store(root: &Path, codec: Codec) -> PathBuf {
    let dir = root.join("s");
    let s = Store::<Ledger>::open(&dir, opts(codec)).unwrap();
    for v in 1..=10 {
        s.append(&entry(v, 5)).unwrap();
    }
    s.compact().unwrap();
    for v in 11..=20 {
        s.append(&entry(v, 5)).unwrap();
    }
    dir
}

/// Replaces `dir/name` by a symlink to an outside copy of its bytes; returns the copy.
fn plant(dir: &Path, name: &str) -> (PathBuf, Vec<u8>) {
    let target = dir.parent().unwrap().join(format!("outside-{name}"));
    let bytes = std::fs::read(dir.join(name)).unwrap_or_else(|_| b"precious".to_vec());
    std::fs::write(&target, &bytes).unwrap();
    let _ = std::fs::remove_file(dir.join(name));
    symlink(&target, dir.join(name)).unwrap();
    (target, bytes)
}

/// Opens, and if that works appends and compacts; the symlink's target must not change.
fn exercise(dir: &Path, codec: Codec) -> Result<(), Error> {
    let s = Store::<Ledger>::open(dir, opts(codec))?;
    s.append(&entry(21, 5))?;
    s.compact()?;
    s.append(&entry(22, 5))?;
    Ok(())
}

#[test]
fn symlinked_segment_is_refused() {
    for codec in codecs() {
        let t = tempfile::tempdir().unwrap();
        let dir = store(t.path(), codec);
        let (target, bytes) = plant(&dir, "seg-00000000000000000011.log");
        let e = exercise(&dir, codec).unwrap_err();
        assert!(
            e.to_string().contains("seg-00000000000000000011.log"),
            "{e}"
        );
        assert_eq!(std::fs::read(&target).unwrap(), bytes);
        let (target, bytes) = plant(&dir, SEG1);
        assert!(exercise(&dir, codec).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), bytes);
    }
}

#[test]
fn symlinked_snapshot_is_not_followed() {
    for codec in codecs() {
        let t = tempfile::tempdir().unwrap();
        let dir = store(t.path(), codec);
        let name = "snap-00000000000000000010.snap";
        let (target, bytes) = plant(&dir, name);
        // The log still starts at 1, so the open may fall back, but only loudly.
        match Store::<Ledger>::open(&dir, opts(codec)) {
            Ok(s) => {
                let r = s.recovery();
                assert_eq!(r.snapshot_seq, None);
                assert!(
                    r.snapshot_fallbacks
                        .iter()
                        .any(|(p, _)| p == &dir.join(name))
                );
                assert_eq!(s.read(|st| st.values.clone()), (1..=20).collect::<Vec<_>>());
            }
            Err(e) => assert!(e.to_string().contains(name), "{e}"),
        }
        let _ = exercise(&dir, codec);
        assert_eq!(std::fs::read(&target).unwrap(), bytes);
    }
}

#[test]
fn symlinked_lock_file_is_refused() {
    for codec in codecs() {
        let t = tempfile::tempdir().unwrap();
        let dir = store(t.path(), codec);
        let (target, bytes) = plant(&dir, "LOCK");
        let e = exercise(&dir, codec).unwrap_err();
        assert!(e.to_string().contains("LOCK"), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), bytes);
    }
}

#[test]
fn symlinked_temp_and_quarantine_files_are_not_followed() {
    for codec in codecs() {
        let t = tempfile::tempdir().unwrap();
        let dir = store(t.path(), codec);
        // A leftover "temp" file that is a link: removing it unlinks only the link.
        let temp = "snap-00000000000000000020.snap.tmp-0123456789abcdef";
        let (temp_target, temp_bytes) = plant(&dir, temp);
        // A torn tail at a known offset, and a link where its quarantine file goes.
        let seg = dir.join("seg-00000000000000000011.log");
        // Its records end before its preallocated zeros; the garbage goes right there.
        let bytes = std::fs::read(&seg).unwrap();
        let len = runlog::engine::scan::scan_segment::<()>(&bytes, |_, _, _| Ok(()))
            .unwrap()
            .valid_len;
        let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
        f.set_len(len).unwrap();
        std::io::Write::write_all(&mut f, b"\x07garbage").unwrap();
        drop(f);
        let q = format!("seg-00000000000000000011.log.broken-{len}");
        let (q_target, q_bytes) = plant(&dir, &q);
        let s = Store::<Ledger>::open(&dir, opts(codec)).unwrap();
        let torn = s.recovery().torn_tail.clone().unwrap();
        let kept = torn.quarantined_to.unwrap();
        assert_ne!(kept, dir.join(&q));
        assert!(
            !std::fs::symlink_metadata(&kept)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(&kept).unwrap(), b"\x07garbage");
        s.append(&entry(21, 1)).unwrap();
        s.compact().unwrap();
        drop(s);
        assert_eq!(std::fs::read(&temp_target).unwrap(), temp_bytes);
        assert_eq!(std::fs::read(&q_target).unwrap(), q_bytes);
    }
}

#[test]
fn symlinked_store_directory_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let dir = store(t.path(), Codec::Binary);
    let link = t.path().join("link");
    symlink(&dir, &link).unwrap();
    let before = dir_bytes(&dir);
    match Store::<Ledger>::open(&link, opts(Codec::Binary)) {
        Err(Error::Unsafe { .. }) => {}
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened a store through a symlinked directory"),
    }
    assert!(
        runlog::engine::Reader::new(&runlog::engine::RealFs, &link)
            .verify()
            .is_err()
    );
    assert_eq!(dir_bytes(&dir), before);
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
}
