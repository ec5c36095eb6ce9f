//! Proves that a store directory writable by group or others is refused, that
//! a second writer in another process is refused naming the holder's pid, and
//! that a length of u32::MAX (or a huge snapshot length) in a valid-looking
//! header is rejected with no allocation over 64 MiB (a capping global
//! allocator aborts otherwise). The modes of the store's files and directory
//! whatever the umask: bug_lock_file_mode_under_umask.rs.
use crate::common;
use common::*;
use runlog::engine::format::masked_crc;
use runlog::engine::frame::encode_segment_header;
use runlog::engine::snapfile::encode_snapshot;
use runlog::engine::{Codec, Error, Integrity, Reader, RealFs, Store};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

const CHILD_DIR: &str = "RUNLOG_PERM_CHILD_DIR";

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn directory_writable_by_others_is_refused() {
    for bad in [0o720, 0o702, 0o777, 0o730] {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("s");
        drop(Store::<Ledger>::open(&dir, opts(Codec::Binary)).unwrap());
        std::fs::set_permissions(&dir, PermissionsExt::from_mode(bad)).unwrap();
        let before = dir_bytes(&dir);
        for r in [
            Store::<Ledger>::open(&dir, opts(Codec::Binary)).map(|_| ()),
            Reader::new(&RealFs, &dir).state::<Ledger>().map(|_| ()),
            Reader::new(&RealFs, &dir).verify().map(|_| ()),
        ] {
            match r {
                Err(Error::Unsafe { path, .. }) => assert_eq!(path, dir),
                Err(e) => panic!("mode {bad:o}: {e}"),
                Ok(()) => panic!("mode {bad:o}: accepted"),
            }
        }
        assert_eq!(dir_bytes(&dir), before);
        assert_eq!(mode(&dir), bad);
    }
    // Readable (not writable) by the group is fine.
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("s");
    drop(Store::<Ledger>::open(&dir, opts(Codec::Binary)).unwrap());
    std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o750)).unwrap();
    Store::<Ledger>::open(&dir, opts(Codec::Binary)).unwrap();
}

#[test]
#[ignore = "child side of second_writer_in_another_process_is_refused"]
fn lock_holder_child_process() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        crate::common::child_run_bare("lock_holder_child_process", CHILD_DIR);
    };
    let _s = Store::<Ledger>::open(&dir, opts(Codec::Binary)).unwrap();
    println!();
    println!("holding {} .", std::process::id());
    std::thread::sleep(std::time::Duration::from_secs(60));
}

#[test]
fn second_writer_in_another_process_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("s");
    let mut c = child_test(module_path!(), "lock_holder_child_process")
        .env(CHILD_DIR, &dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(c.stdout.take().unwrap()).lines();
    let pid = c.id();
    let held = lines.any(|l| l.unwrap().starts_with("holding"));
    assert!(held, "child did not take the lock");
    let before = dir_bytes(&dir);
    let r = Store::<Ledger>::open(&dir, opts(Codec::Binary));
    c.kill().unwrap();
    c.wait().unwrap();
    match r {
        Err(Error::Locked { holder, .. }) => {
            assert_eq!(holder.as_deref(), Some(format!("pid {pid}").as_str()))
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("second writer got the lock"),
    }
    assert_eq!(dir_bytes(&dir), before);
    // Once the holder is gone the lock is free again.
    Store::<Ledger>::open(&dir, opts(Codec::Binary)).unwrap();
}

fn huge_binary_record(seq: u64) -> Vec<u8> {
    let len = u32::MAX.to_le_bytes();
    let seq = seq.to_le_bytes();
    let mut b = Vec::new();
    b.extend_from_slice(&len);
    b.extend_from_slice(&seq);
    b.extend_from_slice(&masked_crc(&[&len, &seq]).to_le_bytes());
    b.extend_from_slice(&[0xab; 64]);
    b
}

#[test]
fn u32_max_record_length_is_rejected_without_allocating() {
    let fs = mem_fs();
    let dir = Path::new(MEM_DIR);
    let seg = dir.join("seg-00000000000000000001.log");
    for codec in codecs() {
        let mut bytes = encode_segment_header(codec, 1);
        match codec {
            Codec::Binary => bytes.extend_from_slice(&huge_binary_record(1)),
            Codec::Jsonl => bytes.extend_from_slice(
                format!("{{\"seq\":1,\"len\":{},\"crc\":1,\"t\":{{}}}}\n", u32::MAX).as_bytes(),
            ),
        }
        fs.set_files(dir, &[]);
        fs.put(&seg, bytes.clone());
        // The only record: a torn tail, dropped.
        let v = Reader::new(&fs, dir).verify().unwrap();
        assert!(
            matches!(v.integrity, Integrity::TornTail { .. }),
            "{codec:?} {v:?}"
        );
        let s = Store::<Ledger>::open(dir, mem_opts(codec, &fs)).unwrap();
        assert_eq!(s.last_seq(), 0);
        drop(s);
        // Followed by a valid record: corruption at the huge one.
        let header_len = encode_segment_header(codec, 1).len() as u64;
        let mut followed = bytes;
        let mut p = Vec::new();
        codec.encode(&entry(2, 1), &mut p).unwrap();
        runlog::engine::frame::encode_record(codec, 2, 1, &p, &mut followed);
        fs.set_files(dir, &[]);
        fs.put(&seg, followed);
        match Store::<Ledger>::open(dir, mem_opts(codec, &fs)) {
            Err(Error::Corrupt { offset, .. }) => assert_eq!(offset, Some(header_len)),
            Err(e) => panic!("{codec:?}: {e}"),
            Ok(_) => panic!("{codec:?}: opened"),
        }
    }
}

#[test]
fn huge_snapshot_length_is_rejected_without_allocating() {
    for codec in codecs() {
        let good = encode_snapshot(codec, 5, b"[]");
        let bad = match codec {
            Codec::Binary => {
                // Rewrite len to u64::MAX and u32::MAX with a valid header checksum.
                let mut out = vec![];
                for len in [u64::MAX, u64::from(u32::MAX), 1 << 40] {
                    let mut b = good.clone();
                    b[24..32].copy_from_slice(&len.to_le_bytes());
                    let crc = masked_crc(&[&b[..36]]);
                    b[36..40].copy_from_slice(&crc.to_le_bytes());
                    out.push(b);
                }
                out
            }
            Codec::Jsonl => {
                let s = String::from_utf8(good.clone()).unwrap();
                [u64::MAX, u64::from(u32::MAX), 1 << 40]
                    .iter()
                    .map(|n| s.replace("\"len\":2", &format!("\"len\":{n}")).into_bytes())
                    .collect()
            }
        };
        for b in bad {
            assert_ne!(b, good);
            assert!(runlog::engine::snapfile::decode_snapshot(&b).is_err());
        }
    }
}
