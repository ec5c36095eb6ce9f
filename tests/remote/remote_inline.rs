//! Records carried inline in the manifest (FORMAT.md §13.2, §13.4 step 2):
//! a sync round of small records is one PUT, counted at the object store
//! seam; past the inline cap the records leave the manifest in one chunk; a
//! damaged or retagged inline record fails restore naming the manifest; gc
//! keeps what the kept manifests need; a version 1 chain still restores and a
//! new writer continues it.
#![cfg(feature = "remote")]

use crate::remote_support;

use object_store::ObjectStore;
use object_store::memory::InMemory;
use remote_support::{Fault, Faulty, Log, open, read};
use runlog::engine::RealFs;
use runlog::remote::layout::{
    CHUNK_DIR, MANIFEST_DIR, MANIFEST_VERSION, Manifest, SNAPSHOT_DIR, manifest_name,
    parse_manifest_name,
};
use runlog::remote::{
    Policy, Remote, RemoteConfig, RemoteError, Replication, gc, latest_manifest, restore,
    verify_remote,
};
use std::sync::Arc;
use std::sync::atomic::Ordering;

fn config() -> RemoteConfig {
    RemoteConfig::new("test://inline", Policy::Sync)
}

fn remote(store: Arc<dyn ObjectStore>) -> Remote {
    Remote::with_store(store, "runs/r1", "test://inline").unwrap()
}

/// Replaces manifest `number` with `m` (a test forging what the store holds).
fn overwrite_manifest(rem: &Remote, m: &Manifest) {
    let name = manifest_name(m.number);
    rem.delete("test", &name).unwrap();
    rem.put_create("test", &name, m.encode()).unwrap();
}

#[test]
fn a_sync_round_of_small_records_is_one_put() {
    let tmp = tempfile::tempdir().unwrap();
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let counter = Arc::new(Faulty::new(inner.clone(), u64::MAX, Fault::Fail));
    let r_local = open(&tmp.path().join("a"));
    let r = Replication::start(&r_local, remote(counter.clone()), &config()).unwrap();
    let rounds = || {
        r.status()
            .and_then(|s| s.rounds)
            .expect("a started replication")
    };
    let (puts0, rounds0) = (counter.puts.load(Ordering::SeqCst), rounds());
    // One writer thread: every append is a round of its own.
    for v in 1..=50u64 {
        r.append(&r_local, &v).unwrap();
    }
    // Eight threads: the rounds the group commit makes, each covering many waiters.
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (r, r_local) = (&r, &r_local);
            s.spawn(move || {
                for i in 0..25u64 {
                    r.append(r_local, &(1000 + t * 100 + i)).unwrap();
                }
            });
        }
    });
    let puts = counter.puts.load(Ordering::SeqCst) - puts0;
    let rounds = rounds() - rounds0;
    assert!(rounds >= 51, "{rounds} rounds");
    assert_eq!(
        puts, rounds,
        "one PUT per sync round: {puts} PUTs, {rounds} rounds"
    );
    r.close().unwrap();

    let rem = remote(inner);
    let head = latest_manifest(&rem).unwrap().unwrap();
    assert_eq!(head.version, MANIFEST_VERSION);
    assert!(head.chunks.is_empty(), "{:?}", head.chunks);
    assert_eq!(head.inline.len() as u64, rounds);
    assert!(rem.list("test", CHUNK_DIR).unwrap().is_empty());
    assert_eq!(head.shipped, 250);
    let b = tmp.path().join("b");
    let rep = restore(&RealFs, &rem, &b, None).unwrap();
    assert_eq!(
        (rep.chunks, rep.inline as u64, rep.last_seq),
        (0, rounds, 250)
    );
    let mut got = read(&b);
    assert_eq!(got[..50], (1..=50).collect::<Vec<_>>()[..]);
    got.sort_unstable();
    let mut want: Vec<u64> = (1..=50).collect();
    want.extend((0..8u64).flat_map(|t| (0..25u64).map(move |i| 1000 + t * 100 + i)));
    want.sort_unstable();
    assert_eq!(got, want);
}

#[test]
fn inline_records_past_the_cap_leave_the_manifest_in_one_chunk() {
    let tmp = tempfile::tempdir().unwrap();
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let counter = Arc::new(Faulty::new(inner.clone(), u64::MAX, Fault::Fail));
    // At most 100 bytes of frames inline: about three of these records.
    let rem = remote(counter.clone()).with_inline_limits(64 << 10, 100);
    let r_local = open(&tmp.path().join("a"));
    let r = Replication::start(&r_local, rem, &config()).unwrap();
    let check = remote(inner.clone());
    let (mut one_put, mut two_puts) = (0, 0);
    for v in 1..=30u64 {
        let before_chunks = latest_manifest(&check).unwrap().unwrap().chunks.len();
        let before_inline = latest_manifest(&check).unwrap().unwrap().inline.clone();
        let puts0 = counter.puts.load(Ordering::SeqCst);
        r.append(&r_local, &v).unwrap();
        let puts = counter.puts.load(Ordering::SeqCst) - puts0;
        let head = latest_manifest(&check).unwrap().unwrap();
        assert!(
            head.inline_bytes() <= 100,
            "seq {v}: {}",
            head.inline_bytes()
        );
        if head.chunks.len() > before_chunks {
            // The chunk round: the chunk starts at the first record the
            // manifest carried inline, and the manifest carries none now.
            two_puts += 1;
            assert_eq!(puts, 2, "seq {v}");
            assert!(head.inline.is_empty(), "seq {v}");
            let c = head.chunks.last().unwrap();
            assert_eq!(c.last, v);
            assert_eq!(c.first, before_inline.first().map_or(v, |i| i.first));
        } else {
            one_put += 1;
            assert_eq!(puts, 1, "seq {v}");
            assert_eq!(head.inline.last().map(|i| (i.first, i.last)), Some((v, v)));
        }
        // Chunks then inline entries cover 1..=v without a hole.
        let mut next = 1;
        for (a, b) in head
            .chunks
            .iter()
            .map(|c| (c.first, c.last))
            .chain(head.inline.iter().map(|i| (i.first, i.last)))
        {
            assert_eq!(a, next, "seq {v}: {head:?}");
            next = b + 1;
        }
        assert_eq!(next, v + 1);
    }
    assert!(
        one_put > two_puts && two_puts >= 5,
        "{one_put} / {two_puts}"
    );
    r.close().unwrap();
    let rep = verify_remote(&RealFs, &check, None).unwrap();
    assert_eq!(rep.last_seq, 30);
    let b = tmp.path().join("b");
    restore(&RealFs, &check, &b, None).unwrap();
    assert_eq!(read(&b), (1..=30).collect::<Vec<_>>());

    // A round larger than the per-round limit goes out as a chunk at once.
    let tmp = tempfile::tempdir().unwrap();
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let counter = Arc::new(Faulty::new(inner.clone(), u64::MAX, Fault::Fail));
    let rem = remote(counter.clone()).with_inline_limits(8, 64 << 10);
    let r_local = open(&tmp.path().join("a"));
    let r = Replication::start(&r_local, rem, &config()).unwrap();
    let puts0 = counter.puts.load(Ordering::SeqCst);
    for v in 1..=5u64 {
        r.append(&r_local, &v).unwrap();
    }
    assert_eq!(counter.puts.load(Ordering::SeqCst) - puts0, 10);
    r.close().unwrap();
    let head = latest_manifest(&remote(inner)).unwrap().unwrap();
    assert!(head.inline.is_empty() && head.chunks.len() == 5, "{head:?}");
}

#[test]
fn a_damaged_inline_frame_fails_restore_naming_the_manifest_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let r_local = open(&tmp.path().join("a"));
    let r = Replication::start(&r_local, remote(store.clone()), &config()).unwrap();
    for v in 1..=5u64 {
        r.append(&r_local, &v).unwrap();
    }
    r.close().unwrap();
    let rem = remote(store);
    let mut head = latest_manifest(&rem).unwrap().unwrap();
    assert_eq!(head.inline.len(), 5);
    let name = manifest_name(head.number);

    // The frames changed and the digest left: the manifest itself is refused.
    let good = head.clone();
    // The first base64 digit changed (to another digit: it still decodes).
    let mut text = head.inline[2].frames.as_bytes().to_vec();
    text[0] = if text[0] == b'A' { b'B' } else { b'A' };
    head.inline[2].frames = String::from_utf8(text).unwrap();
    overwrite_manifest(&rem, &head);
    let e = verify_remote(&RealFs, &rem, None).unwrap_err();
    match &e {
        RemoteError::Corrupt {
            object,
            offset,
            reason,
        } => {
            assert_eq!(object, &name, "{e}");
            assert!(reason.contains("inline entry 2"), "{e}");
            assert!(reason.contains("digest"), "{e}");
            // A manifest's field, not a byte of it: no offset, none made up.
            assert_eq!(*offset, None, "{e}");
            assert!(!e.to_string().contains("at byte"), "{e}");
        }
        other => panic!("expected Corrupt naming {name}: {other}"),
    }

    // The digest made to match: the frame's own checksum still tells.
    let bytes = {
        let mut b = good.inline[2].bytes().unwrap();
        let last = b.len() - 1;
        b[last] ^= 1;
        b
    };
    let forged = runlog::remote::layout::InlineRef::new(3, 3, &bytes);
    head.inline[2] = forged;
    overwrite_manifest(&rem, &head);
    let t = tmp.path().join("t");
    let e = restore(&RealFs, &rem, &t, None).unwrap_err();
    match &e {
        RemoteError::Corrupt {
            object,
            offset,
            reason,
        } => {
            assert_eq!(object, &name, "{e}");
            assert_eq!(
                *offset,
                Some(0),
                "the record's offset in the entry's frames: {e}"
            );
            assert!(reason.contains("inline entry 2"), "{e}");
        }
        other => panic!("expected Corrupt naming {name}: {other}"),
    }
    assert!(!t.exists(), "a failed restore leaves no directory");
    assert!(verify_remote(&RealFs, &rem, None).is_err());

    // An entry missing altogether: the seqs it held are a gap.
    let mut gap = good.clone();
    gap.inline.remove(2);
    overwrite_manifest(&rem, &gap);
    match restore(&RealFs, &rem, &t, None).unwrap_err() {
        RemoteError::Gap { from, to } => assert_eq!((from, to), (3, 3)),
        other => panic!("expected a gap, got {other}"),
    }
    overwrite_manifest(&rem, &good);
    restore(&RealFs, &rem, &t, None).unwrap();
    assert_eq!(read(&t), vec![1, 2, 3, 4, 5]);
}

#[test]
fn a_retagged_inline_record_of_a_tagged_run_is_named_by_restore() {
    use runlog::engine::frame::{Frame, decode_record, encode_record};
    use runlog::engine::{Key, Options, Store};
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let key = Key::from_bytes([7; 32]);
    let s = Store::<Log>::open(
        tmp.path().join("a"),
        Options {
            create: true,
            key: Some(key.clone()),
            ..Options::default()
        },
    )
    .unwrap();
    let r = Replication::start(&s, remote(store.clone()), &config()).unwrap();
    for v in 1..=4u64 {
        r.append(&s, &v).unwrap();
    }
    r.close().unwrap();
    let rem = remote(store);
    let mut head = latest_manifest(&rem).unwrap().unwrap();
    assert!(head.chunks.is_empty() && head.inline.len() == 4);
    assert!(!head.store_id.is_empty());
    verify_remote(&RealFs, &rem, Some(&key)).unwrap();
    // The wrong key: the inline records' tags do not open.
    let e = verify_remote(&RealFs, &rem, Some(&Key::from_bytes([1; 32]))).unwrap_err();
    assert!(e.to_string().contains("inline entry 0"), "{e}");

    // Record 2 re-framed with a payload byte changed: every checksum and the
    // digest are valid, only the tag can tell.
    let bytes = head.inline[1].bytes().unwrap();
    let codec = head.codec.parse().unwrap();
    let Frame::Record {
        seq,
        synced,
        payload,
        ..
    } = decode_record(codec, &bytes, 0)
    else {
        panic!("inline entry 1 holds a record");
    };
    let mut p = payload.to_vec();
    p[0] ^= 1;
    let mut bad = Vec::new();
    encode_record(codec, seq, synced, &p, &mut bad);
    assert_eq!(bad.len(), bytes.len());
    head.inline[1] = runlog::remote::layout::InlineRef::new(2, 2, &bad);
    overwrite_manifest(&rem, &head);
    let name = manifest_name(head.number);
    let e = restore(&RealFs, &rem, &tmp.path().join("b"), Some(&key)).unwrap_err();
    match &e {
        RemoteError::Corrupt { object, reason, .. } => {
            assert_eq!(object, &name, "{e}");
            assert!(
                reason.contains("inline entry 1") && reason.contains("tag"),
                "{e}"
            );
        }
        other => panic!("expected Corrupt naming {name}: {other}"),
    }
    assert!(!tmp.path().join("b").exists());
}

#[test]
fn gc_under_a_live_writer_keeps_what_the_kept_manifests_need() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let rem = remote(store.clone());
    let r_local = open(&tmp.path().join("a"));
    let r = Replication::start(
        &r_local,
        rem.clone().with_inline_limits(64 << 10, 100),
        &config(),
    )
    .unwrap();
    for v in 1..=24u64 {
        r.append(&r_local, &v).unwrap();
        if v == 12 {
            r_local.compact().unwrap();
        }
        let report = gc(&rem, 1).unwrap();
        let head = latest_manifest(&rem).unwrap().unwrap();
        assert_eq!(report.kept_manifests, vec![head.number]);
        for o in head.objects() {
            assert!(
                !report.deleted_objects.iter().any(|d| d == o),
                "seq {v}: {o} deleted"
            );
        }
        // What is left is exactly what the head references.
        let mut left: Vec<String> = rem.list("test", CHUNK_DIR).unwrap();
        left.extend(rem.list("test", SNAPSHOT_DIR).unwrap());
        left.sort();
        let mut want: Vec<String> = head.objects().map(str::to_string).collect();
        want.sort();
        assert_eq!(left, want, "seq {v}");
        let b = tmp.path().join(format!("b{v}"));
        restore(&RealFs, &rem, &b, None).unwrap();
        assert_eq!(read(&b), (1..=v).collect::<Vec<_>>(), "seq {v}");
    }
    r.close().unwrap();
}

#[test]
fn a_version_1_chain_restores_and_a_new_writer_continues_it_as_version_3() {
    let tmp = tempfile::tempdir().unwrap();
    // Chunks only: what a version 1 writer wrote, manifests then relabelled 1.
    let v2: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let r_local = open(&tmp.path().join("a"));
    let r = Replication::start(
        &r_local,
        remote(v2.clone()).with_inline_limits(0, 0),
        &config(),
    )
    .unwrap();
    for v in 1..=6u64 {
        r.append(&r_local, &v).unwrap();
    }
    r.close().unwrap();
    let from = remote(v2);
    let v1: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let to = remote(v1.clone());
    for dir in [MANIFEST_DIR, CHUNK_DIR, SNAPSHOT_DIR] {
        for name in from.list("test", dir).unwrap() {
            let mut bytes = from.get("test", &name, u64::MAX).unwrap().unwrap().to_vec();
            if let Some(n) = parse_manifest_name(&name) {
                let text = String::from_utf8(bytes).unwrap();
                assert!(!text.contains("inline"), "{text}");
                let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
                doc["version"] = 1.into();
                doc.as_object_mut().unwrap().remove("holder");
                bytes = serde_json::to_vec(&doc).unwrap();
                assert_eq!(Manifest::decode(n, &bytes).unwrap().version, 1);
            }
            to.put_create("test", &name, bytes).unwrap();
        }
    }
    // A version 1 manifest carrying inline records is refused.
    let mut head = latest_manifest(&to).unwrap().unwrap();
    assert_eq!(head.version, 1);
    let mut bad = head.clone();
    bad.inline
        .push(runlog::remote::layout::InlineRef::new(7, 7, b"x"));
    bad.shipped = 7;
    assert!(Manifest::decode(bad.number, &bad.encode()).is_err());

    let b = tmp.path().join("b");
    restore(&RealFs, &to, &b, None).unwrap();
    assert_eq!(read(&b), (1..=6).collect::<Vec<_>>());
    // The restored copy claims the version 1 chain and ships inline.
    let w_local = open(&b);
    let w = Replication::start(&w_local, remote(v1.clone()), &config()).unwrap();
    for v in 7..=9u64 {
        w.append(&w_local, &v).unwrap();
    }
    w.close().unwrap();
    head = latest_manifest(&to).unwrap().unwrap();
    assert_eq!(head.version, MANIFEST_VERSION);
    assert_eq!(head.chunks.len(), 6);
    assert_eq!(head.inline.len(), 3);
    let c = tmp.path().join("c");
    restore(&RealFs, &to, &c, None).unwrap();
    assert_eq!(read(&c), (1..=9).collect::<Vec<_>>());
}
