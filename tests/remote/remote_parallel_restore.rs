//! Parallel restore and verify (issue 50): a chain of 60 chunks restored with
//! its GETs answered out of order gives the same store, file for file, as a
//! restore fetching one chunk after the other; and for every chunk of such a
//! chain, deleted, truncated or with a byte flipped, restore and
//! `verify_remote` fail with the message the chain's damage calls for (the
//! seqs missing, or the chunk object and offset), leaving no directory behind.
#![cfg(feature = "remote")]

use crate::remote_support;

use object_store::ObjectStore;
use object_store::memory::InMemory;
use remote_support::held_store::Held;
use remote_support::{files, open, read};
use runlog::engine::sim::SimFs;
use runlog::engine::{Codec, RealFs, Vfs};
use runlog::remote::layout::{ChunkRef, Manifest};
use runlog::remote::{
    Policy, READ_AHEAD_BYTES, READ_AHEAD_REQUESTS, Remote, RemoteConfig, RemoteError, Replication,
    check_frames, latest_manifest, restore, verify_remote,
};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

const PREFIX: &str = "runs/r1";
const RECORDS: u64 = 60;

fn remote(store: Arc<dyn ObjectStore>) -> Remote {
    Remote::with_store(store, PREFIX, "test://parallel").unwrap()
}

/// A chain of one chunk per record (inlining off, one round per append; 60
/// stays under the 64 chunks that trigger a merge), and its head manifest.
fn chain(dir: &Path) -> (Arc<dyn ObjectStore>, Manifest) {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let local = open(dir);
    let config = RemoteConfig::new("test://parallel", Policy::Sync);
    let r = Replication::start(
        &local,
        remote(store.clone()).with_inline_limits(0, 0),
        &config,
    )
    .unwrap();
    for v in 1..=RECORDS {
        r.append(&local, &v).unwrap();
    }
    r.close().unwrap();
    drop(local);
    let head = latest_manifest(&remote(store.clone())).unwrap().unwrap();
    assert!(head.chunks.len() >= 50, "{} chunks", head.chunks.len());
    assert!(head.inline.is_empty() && head.snapshot.is_none());
    (store, head)
}

#[test]
fn a_chain_whose_gets_answer_out_of_order_restores_as_one_fetched_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let (inner, head) = chain(&tmp.path().join("a"));
    let full = |c: &ChunkRef| format!("{PREFIX}/{}", c.object);
    // The first chunk's GET answers only after the next seven have.
    let window = READ_AHEAD_REQUESTS.min(head.chunks.len());
    let held = Arc::new(Held::new(
        inner.clone(),
        full(&head.chunks[0]),
        head.chunks[1..window].iter().map(full).collect(),
    ));
    let parallel = tmp.path().join("parallel");
    let got = restore(&RealFs, &remote(held.clone()), &parallel, None).unwrap();
    let in_order = tmp.path().join("in-order");
    let one_by_one = remote(inner.clone()).with_read_ahead(1, READ_AHEAD_BYTES);
    let want = restore(&RealFs, &one_by_one, &in_order, None).unwrap();

    let order = held.order.lock().unwrap().clone();
    let at = |name: &str| order.iter().position(|o| o == name).unwrap();
    let first_at = at(&full(&head.chunks[0]));
    for c in &head.chunks[1..window] {
        assert!(at(&full(c)) < first_at, "answered: {order:?}");
    }
    let most = held.max_in_flight.load(Ordering::SeqCst);
    assert!(
        (window..=READ_AHEAD_REQUESTS).contains(&most),
        "{most} GETs in flight at most"
    );
    assert_eq!(got, want);
    assert_eq!(got.chunks, head.chunks.len());
    assert_eq!(files(&parallel), files(&in_order));
    assert_eq!(read(&parallel), (1..=RECORDS).collect::<Vec<_>>());
    // verify --remote reads the chain the same way and reports the same.
    assert_eq!(verify_remote(&RealFs, &remote(held), None).unwrap(), want);
}

/// What damage does to the chunk at one position.
#[derive(Debug, Clone, Copy)]
enum Damage {
    Deleted,
    Truncated,
    ByteFlipped,
}

/// The damaged bytes (None: the object deleted) and the error a restore of
/// the chain must then give, worked out from the chain and the chunk, not
/// by running a restore.
fn damage(c: &ChunkRef, bytes: &[u8], how: Damage) -> (Option<Vec<u8>>, RemoteError) {
    match how {
        // The chain is contiguous: chunk `c` starts at the next seq needed.
        Damage::Deleted => (
            None,
            RemoteError::Gap {
                from: c.first,
                to: c.last,
            },
        ),
        Damage::Truncated => (
            Some(bytes[..bytes.len() - 1].to_vec()),
            RemoteError::Corrupt {
                object: c.object.clone(),
                offset: None,
                reason: format!("{} bytes, the manifest says {}", bytes.len() - 1, c.len),
            },
        ),
        Damage::ByteFlipped => {
            // The last byte: inside the last record's frame.
            let mut bad = bytes.to_vec();
            let last = bad.len() - 1;
            bad[last] ^= 0x40;
            let header = runlog::engine::frame::decode_segment_header(&bad).unwrap();
            let e = check_frames(
                &c.object,
                &bad,
                header.len,
                Codec::Binary,
                c.first,
                c.last,
                "chunk",
            )
            .unwrap_err();
            (Some(bad), e)
        }
    }
}

fn replace(rem: &Remote, object: &str, bytes: Option<Vec<u8>>) {
    rem.delete("test", object).unwrap();
    if let Some(b) = bytes {
        rem.put_create("test", object, b).unwrap();
    }
}

#[test]
fn every_chunk_deleted_truncated_or_flipped_fails_restore_and_verify_with_its_own_message() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, head) = chain(&tmp.path().join("a"));
    let rem = remote(store);
    let sim = SimFs::new();
    let temp = std::env::temp_dir();
    sim.mkdir(&temp, 0o755);
    let parent = Path::new("/restores");
    let target = parent.join("t");
    for (i, c) in head.chunks.iter().enumerate() {
        let good = rem.get("test", &c.object, u64::MAX).unwrap().unwrap();
        for how in [Damage::Deleted, Damage::Truncated, Damage::ByteFlipped] {
            let (bad, want) = damage(c, &good, how);
            let want = want.to_string();
            replace(&rem, &c.object, bad);
            let what = format!("chunk {i} ({}..={}) {how:?}", c.first, c.last);
            let e = restore(&sim, &rem, &target, None).unwrap_err();
            assert_eq!(e.to_string(), want, "restore, {what}");
            assert!(
                sim.list(parent).unwrap().is_empty(),
                "restore left {:?}, {what}",
                sim.list(parent)
            );
            let e = verify_remote(&sim, &rem, None).unwrap_err();
            assert_eq!(e.to_string(), want, "verify, {what}");
            assert!(
                sim.list(&temp).unwrap().is_empty(),
                "verify left {:?}, {what}",
                sim.list(&temp)
            );
            replace(&rem, &c.object, Some(good.clone()));
        }
    }
    // Repaired, the chain restores whole.
    let rep = restore(&sim, &rem, &target, None).unwrap();
    assert_eq!((rep.chunks, rep.last_seq), (head.chunks.len(), RECORDS));
}
