//! Proves the remote layer against object_store's InMemory and LocalFileSystem:
//! ship + restore keeps every acknowledged record (sync and async, across a
//! compaction), fencing (a takeover fences the old writer, of two concurrent
//! claimers exactly one wins), a gap or a flipped byte fails the restore,
//! gc keeps what the last K manifests reference, and a stale copy cannot claim.
#![cfg(feature = "remote")]

use crate::remote_support;

use object_store::ObjectStore;
use object_store::memory::InMemory;
use remote_support::{Log, open, read, two_claimers_one_wins};
use runlog::engine::{RealFs, Store};
use runlog::remote::{
    Policy, Remote, RemoteConfig, RemoteError, Replication, gc, latest_manifest, restore,
    verify_remote,
};
use std::sync::Arc;

fn config(policy: Policy) -> RemoteConfig {
    RemoteConfig::new("test://remote", policy)
}

fn backends() -> Vec<(&'static str, Arc<dyn ObjectStore>, tempfile::TempDir)> {
    let fs_dir = tempfile::tempdir().unwrap();
    let fs = object_store::local::LocalFileSystem::new_with_prefix(fs_dir.path())
        .unwrap()
        .with_fsync(true);
    vec![
        (
            "memory",
            Arc::new(InMemory::new()),
            tempfile::tempdir().unwrap(),
        ),
        ("localfs", Arc::new(fs), fs_dir),
    ]
}

fn remote(store: &Arc<dyn ObjectStore>) -> Remote {
    Remote::with_store(store.clone(), "runs/r1", "test://remote").unwrap()
}

/// The run's remote with records never carried inline: every round uploads
/// a chunk, for the tests of chunks themselves (gaps, merging, tampering).
fn chunks_only(store: &Arc<dyn ObjectStore>) -> Remote {
    remote(store).with_inline_limits(0, 0)
}

/// A new store at `dir` and its `sync` replication, claiming the run in `store`.
fn sync_writer(store: &Arc<dyn ObjectStore>, dir: &std::path::Path) -> (Store<Log>, Replication) {
    let local = open(dir);
    let r = Replication::start(&local, remote(store), &config(Policy::Sync)).unwrap();
    (local, r)
}

/// As [`sync_writer`], shipping every round as a chunk.
fn chunk_writer(store: &Arc<dyn ObjectStore>, dir: &std::path::Path) -> (Store<Log>, Replication) {
    let local = open(dir);
    let r = Replication::start(&local, chunks_only(store), &config(Policy::Sync)).unwrap();
    (local, r)
}

#[test]
fn sync_ship_then_restore_keeps_every_acknowledged_record_across_a_compaction() {
    for (name, store, _keep) in backends() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a");
        let (r_local, r) = sync_writer(&store, &a);
        let mut acked = vec![];
        for v in 1..=40u64 {
            assert_eq!(r.append(&r_local, &v).unwrap(), v);
            acked.push(v);
            if v == 25 {
                r_local.compact().unwrap();
            }
        }
        let stats = r.status().unwrap();
        assert_eq!(
            (stats.shipped, stats.lag, stats.epoch),
            (40, 0, 1),
            "{name}"
        );
        let batch = r.append_batch(&r_local, &[41, 42, 43]);
        assert!(batch.iter().all(|x| x.is_ok()), "{name}");
        acked.extend([41, 42, 43]);
        r.close().unwrap();

        let head = latest_manifest(&remote(&store)).unwrap().unwrap();
        assert!(
            head.snapshot.is_some(),
            "{name}: the compaction's snapshot was shipped"
        );
        let report = verify_remote(&RealFs, &remote(&store), None).unwrap();
        assert_eq!(report.last_seq, 43, "{name}");

        let b = tmp.path().join("restored").join("b");
        let rep = restore(&RealFs, &remote(&store), &b, None).unwrap();
        assert_eq!(rep.last_seq, 43);
        assert_eq!(read(&b), acked, "{name}: restored state");
        // The restored copy is an ordinary store: it opens and takes appends.
        let s = open(&b);
        assert_eq!(s.append(&44).unwrap(), 44);
    }
}

#[test]
fn async_acks_locally_reports_lag_and_catches_up_on_close() {
    for (name, store, _keep) in backends() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a");
        let policy = Policy::Async {
            interval_ms: 3_600_000,
        };
        let r_local = open(&a);
        let r = Replication::start(&r_local, remote(&store), &config(policy)).unwrap();
        for v in 1..=30u64 {
            r.append(&r_local, &v).unwrap();
        }
        // The interval is an hour: nothing shipped yet beyond the claim.
        let s = r.status().unwrap();
        assert_eq!((s.durable, s.shipped, s.lag), (30, 0, 30), "{name}");
        r.flush().unwrap();
        assert_eq!(r.status().unwrap().lag, 0, "{name}");
        for v in 31..=35u64 {
            r.append(&r_local, &v).unwrap();
        }
        let closed = r.close().unwrap().expect("started");
        assert_eq!((closed.shipped, closed.lag), (35, 0), "{name}");
        let b = tmp.path().join("b");
        restore(&RealFs, &remote(&store), &b, None).unwrap();
        assert_eq!(read(&b), (1..=35).collect::<Vec<_>>(), "{name}");
    }
}

#[test]
fn a_replication_appends_to_no_store_but_the_one_it_ships() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let tmp = tempfile::tempdir().unwrap();
    let (local, r) = sync_writer(&store, &tmp.path().join("a"));
    let other = open(&tmp.path().join("b"));
    let e = r.append(&other, &1).unwrap_err();
    assert!(e.to_string().contains("this replication ships"), "{e}");
    let batch = r.append_batch(&other, &[2, 3]);
    assert!(batch.iter().all(Result::is_err), "{batch:?}");
    assert_eq!(other.last_seq(), 0, "nothing appended to the other store");
    assert_eq!(r.append(&local, &4).unwrap(), 1);
    assert_eq!(r.status().unwrap().shipped, 1);
}

#[test]
fn a_takeover_fences_the_old_writer_which_then_acknowledges_nothing() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let (old_local, old) = sync_writer(&store, &a);
    for v in 1..=5u64 {
        old.append(&old_local, &v).unwrap();
    }
    // A new host restores the run and takes it.
    let b = tmp.path().join("b");
    restore(&RealFs, &remote(&store), &b, None).unwrap();
    let (new_local, new) = sync_writer(&store, &b);
    assert_eq!(new.status().unwrap().epoch, 2);
    new.append(&new_local, &6).unwrap();

    // The rounds rode inline in the manifests (the default): the zombie's
    // next round would too, in a manifest that cannot land.
    let head = latest_manifest(&remote(&store)).unwrap().unwrap();
    assert!(
        head.chunks.is_empty() && !head.inline.is_empty(),
        "{head:?}"
    );
    let e = old.append(&old_local, &100).unwrap_err();
    assert!(e.is_fenced(), "{e}");
    assert!(
        e.to_string().contains("epoch 2"),
        "names the newer epoch: {e}"
    );
    let local_after = old_local.last_seq();
    let e2 = old.append(&old_local, &101).unwrap_err();
    assert!(e2.is_fenced());
    assert_eq!(
        old_local.last_seq(),
        local_after,
        "a fenced writer appends nothing more"
    );
    let fenced = old.status().unwrap();
    assert_eq!((fenced.fenced, fenced.head_epoch), (true, 2), "{fenced:?}");
    drop(old);

    new.close().unwrap();
    let c = tmp.path().join("c");
    restore(&RealFs, &remote(&store), &c, None).unwrap();
    assert_eq!(
        read(&c),
        vec![1, 2, 3, 4, 5, 6],
        "the fenced writer's record is not in the chain"
    );
}

#[test]
fn of_two_concurrent_claimers_exactly_one_wins() {
    for round in 0..20 {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let tmp = tempfile::tempdir().unwrap();
        let claim = move || Ok(remote(&store));
        two_claimers_one_wins(tmp.path(), claim, &config(Policy::Sync), round);
    }
}

#[test]
fn a_missing_chunk_is_a_gap_and_a_flipped_byte_is_corruption() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let tmp = tempfile::tempdir().unwrap();
    let (r_local, r) = chunk_writer(&store, &tmp.path().join("a"));
    for v in 1..=6u64 {
        r.append(&r_local, &v).unwrap();
    }
    r.close().unwrap();
    let rem = remote(&store);
    let head = latest_manifest(&rem).unwrap().unwrap();
    assert!(head.chunks.len() >= 3);
    let victim = head.chunks[2].clone();

    // A flipped byte inside a chunk.
    let bytes = runlog::remote::Remote::get(&rem, "test", &victim.object, u64::MAX)
        .unwrap()
        .unwrap();
    let mut bad = bytes.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    rem.delete("test", &victim.object).unwrap();
    rem.put_create("test", &victim.object, bad).unwrap();
    let t = tmp.path().join("t1");
    let e = restore(&RealFs, &rem, &t, None).unwrap_err();
    assert!(matches!(e, RemoteError::Corrupt { .. }), "{e}");
    assert!(!t.exists(), "a failed restore leaves no directory");
    assert!(verify_remote(&RealFs, &rem, None).is_err());

    // The chunk gone altogether: the restore names the missing seqs.
    rem.delete("test", &victim.object).unwrap();
    let e = restore(&RealFs, &rem, &t, None).unwrap_err();
    match e {
        RemoteError::Gap { from, to } => assert_eq!((from, to), (victim.first, victim.last)),
        other => panic!("expected a gap, got {other}"),
    }
    assert!(!t.exists());
    assert!(std::fs::read_dir(tmp.path()).unwrap().all(|e| {
        !e.unwrap()
            .file_name()
            .to_string_lossy()
            .contains(".restore-")
    }));
}

#[test]
fn gc_keeps_what_the_last_manifests_reference_and_restore_still_works() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let tmp = tempfile::tempdir().unwrap();
    let (r_local, r) = sync_writer(&store, &tmp.path().join("a"));
    for v in 1..=10u64 {
        r.append(&r_local, &v).unwrap();
    }
    r_local.compact().unwrap();
    for v in 11..=15u64 {
        r.append(&r_local, &v).unwrap();
    }
    r.close().unwrap();
    let rem = remote(&store);
    // An orphan: a chunk uploaded for a manifest that never landed (a crash),
    // numbered below the head.
    let orphan = runlog::remote::layout::chunk_name(1, 1, 1, 2);
    rem.put_create("test", &orphan, b"junk".to_vec()).unwrap();
    // An upload for the *next* manifest: gc must not touch it.
    let head = latest_manifest(&rem).unwrap().unwrap();
    let pending = runlog::remote::layout::chunk_name(16, 16, 1, head.number + 1);
    rem.put_create("test", &pending, b"in flight".to_vec())
        .unwrap();

    let report = gc(&rem, 2).unwrap();
    assert_eq!(report.kept_manifests.len(), 2);
    assert!(report.deleted_objects.contains(&orphan));
    assert!(!report.deleted_objects.contains(&pending));
    let live: Vec<String> = head.objects().map(str::to_string).collect();
    for o in &live {
        assert!(
            !report.deleted_objects.contains(o),
            "live object {o} deleted"
        );
    }
    assert!(!report.deleted_objects.is_empty());
    let b = tmp.path().join("b");
    restore(&RealFs, &rem, &b, None).unwrap();
    assert_eq!(read(&b), (1..=15).collect::<Vec<_>>());
}

/// A copy one record behind the remote: epoch 1 ships 1 from `root/a`, the
/// copy `root/b` is restored, then epoch 1 ships 2 and closes. Returns `b`.
fn copy_behind(store: &Arc<dyn ObjectStore>, root: &std::path::Path) -> std::path::PathBuf {
    let (r_local, r) = sync_writer(store, &root.join("a"));
    r.append(&r_local, &1).unwrap();
    let b = root.join("b");
    restore(&RealFs, &remote(store), &b, None).unwrap();
    r.append(&r_local, &2).unwrap();
    r.close().unwrap();
    b
}

#[test]
fn a_copy_behind_the_remote_cannot_claim() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let tmp = tempfile::tempdir().unwrap();
    let b = copy_behind(&store, tmp.path());
    // b holds seq 1 only; the chain holds 2, written by epoch 1: a writer b
    // never was moved past b's copy, so b is fenced, naming that epoch.
    let local = open(&b);
    let e = Replication::start(&local, remote(&store), &config(Policy::Sync)).unwrap_err();
    assert!(
        matches!(
            e,
            RemoteError::Fenced {
                epoch: 0,
                newer: 1,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("epoch 1"), "{e}");
    // A local log that differs at the chain's last seq is fenced too.
    let c = tmp.path().join("c");
    let s = open(&c);
    s.append(&1).unwrap();
    s.append(&99).unwrap();
    let e = Replication::start(&s, remote(&store), &config(Policy::Sync)).unwrap_err();
    assert!(matches!(e, RemoteError::Fenced { newer: 1, .. }), "{e}");
    // The chain is untouched by either: epoch 1 still holds its head.
    let head = latest_manifest(&remote(&store)).unwrap().unwrap();
    assert_eq!((head.epoch, head.shipped), (1, 2));
    let _ = Log;
}

#[test]
fn a_writer_missing_records_its_own_epoch_shipped_is_diverged_not_fenced() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let tmp = tempfile::tempdir().unwrap();
    let b = copy_behind(&store, tmp.path());
    // b says it holds epoch 1, the head's own epoch, yet lacks seq 2 that
    // epoch shipped: not a newer writer, damage (a host's copy rolled back).
    let own = RemoteConfig {
        epoch: 1,
        ..config(Policy::Sync)
    };
    let local = open(&b);
    let e = Replication::start(&local, remote(&store), &own).unwrap_err();
    assert!(matches!(e, RemoteError::Diverged { .. }), "{e}");
    // A directory claiming an epoch the chain never reached: its claim is missing.
    let ahead = RemoteConfig {
        epoch: 5,
        ..config(Policy::Sync)
    };
    let local = open(&tmp.path().join("a"));
    let e = Replication::start(&local, remote(&store), &ahead).unwrap_err();
    assert!(matches!(e, RemoteError::Diverged { .. }), "{e}");
}

#[test]
fn a_tagged_store_whose_chain_is_only_a_snapshot_restores_tagged() {
    use runlog::engine::{Key, Options, Store};
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let tmp = tempfile::tempdir().unwrap();
    let key = Key::from_bytes([9; 32]);
    let opts = || Options {
        create: true,
        key: Some(key.clone()),
        ..Options::default()
    };
    let a = tmp.path().join("a");
    let s = Store::<Log>::open(&a, opts()).unwrap();
    for v in 1..=3u64 {
        s.append(&v).unwrap();
    }
    s.compact().unwrap();
    let r = Replication::start(&s, remote(&store), &config(Policy::Sync)).unwrap();
    r.close().unwrap();
    let head = latest_manifest(&remote(&store)).unwrap().unwrap();
    assert_eq!((head.chunks.len(), head.shipped), (0, 3), "{head:?}");
    assert!(!head.store_id.is_empty());
    let b = tmp.path().join("b");
    restore(&RealFs, &remote(&store), &b, Some(&key)).unwrap();
    let s = Store::<Log>::open(&b, opts()).unwrap();
    assert_eq!(s.read(|v| v.clone()), vec![1, 2, 3]);
    assert_eq!(s.append(&4).unwrap(), 4);
    // The wrong key does not verify.
    assert!(verify_remote(&RealFs, &remote(&store), Some(&Key::from_bytes([1; 32]))).is_err());
}

#[test]
fn many_small_rounds_are_merged_and_the_live_set_stays_small() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let tmp = tempfile::tempdir().unwrap();
    let (r_local, r) = chunk_writer(&store, &tmp.path().join("a"));
    let mut most = 0;
    for v in 1..=300u64 {
        r.append(&r_local, &v).unwrap();
        let head = latest_manifest(&remote(&store)).unwrap().unwrap();
        most = most.max(head.chunks.len());
    }
    r.close().unwrap();
    // One chunk per round would be 300; merging keeps at most 64 live.
    assert!(
        most <= runlog::remote::layout::MERGE_AT_CHUNKS,
        "{most} live chunks"
    );
    let head = latest_manifest(&remote(&store)).unwrap().unwrap();
    assert!(
        head.chunks.len() < 64 && head.chunks[0].first == 1,
        "{:?}",
        head.chunks.len()
    );
    let b = tmp.path().join("b");
    restore(&RealFs, &remote(&store), &b, None).unwrap();
    assert_eq!(read(&b), (1..=300).collect::<Vec<_>>());
}

#[test]
fn a_tampered_chunk_of_a_tagged_run_is_named_as_it_is_downloaded() {
    use runlog::engine::frame::{Frame, decode_record, decode_segment_header, encode_record};
    use runlog::engine::{Key, Options, Store};
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let tmp = tempfile::tempdir().unwrap();
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
    let r = Replication::start(&s, chunks_only(&store), &config(Policy::Sync)).unwrap();
    for v in 1..=6u64 {
        r.append(&s, &v).unwrap();
    }
    r.close().unwrap();
    let rem = remote(&store);
    let head = latest_manifest(&rem).unwrap().unwrap();
    assert!(head.chunks.len() >= 3);
    let victim = head.chunks[2].clone();
    let bytes = Remote::get(&rem, "test", &victim.object, u64::MAX)
        .unwrap()
        .unwrap();
    // Re-frame each record with one payload byte changed: every checksum is
    // valid, only the tags can tell.
    let h = decode_segment_header(&bytes).unwrap();
    let mut bad = bytes[..h.len].to_vec();
    let mut at = h.len;
    while let Frame::Record {
        seq,
        synced,
        payload,
        next,
    } = decode_record(h.codec, &bytes, at)
    {
        let mut p = payload.to_vec();
        p[0] ^= 1;
        encode_record(h.codec, seq, synced, &p, &mut bad);
        at = next;
    }
    assert_eq!(bad.len(), bytes.len());
    rem.delete("test", &victim.object).unwrap();
    rem.put_create("test", &victim.object, bad).unwrap();

    let e = restore(&RealFs, &rem, &tmp.path().join("b"), Some(&key)).unwrap_err();
    match &e {
        RemoteError::Corrupt { object, reason, .. } => {
            assert_eq!(object, &victim.object, "{e}");
            assert!(reason.contains("tag"), "{e}");
        }
        other => panic!("expected Corrupt naming {}: {other}", victim.object),
    }
    assert!(!tmp.path().join("b").exists(), "nothing restored");
    // verify --remote says the same.
    let e = verify_remote(&RealFs, &rem, Some(&key)).unwrap_err();
    assert!(e.to_string().contains(&victim.object), "{e}");
}
