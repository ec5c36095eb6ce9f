//! Proves that a remote call failing, or succeeding with its response lost, at
//! every position N of a small sync workload (claim, appends, a compaction's
//! snapshot, close) never loses an acknowledged record: the chain restores,
//! verifies, holds every acknowledged value, and is a prefix of the local log.
//! The sweep runs three ways: records inline in the manifest (the default: one
//! PUT a round), inline until a small cap then a chunk carrying them (both
//! kinds of round), and chunks only (two PUTs a round); and once more with
//! four appenders keeping rounds in flight together.
#![cfg(feature = "remote")]

use crate::remote_support;

use object_store::ObjectStore;
use object_store::memory::InMemory;
use remote_support::{Fault, Faulty, open, read};
use runlog::engine::RealFs;
use runlog::remote::{Policy, Remote, RemoteConfig, Replication, restore, verify_remote};
use std::sync::Arc;
use std::sync::atomic::Ordering;

fn config() -> RemoteConfig {
    RemoteConfig::new("test://faulty", Policy::Sync)
}

/// How the rounds ship their records: `(round, total)` inline limits.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// The defaults: every round of this workload rides in its manifest.
    Inline,
    /// Inline until the manifest holds 100 bytes of frames (about 3 records),
    /// then a chunk of them and the new ones.
    Mixed,
    /// Every round uploads a chunk, then its manifest.
    ChunksOnly,
}

fn remote_for(store: Arc<dyn ObjectStore>, mode: Mode) -> Remote {
    let r = Remote::with_store(store, "run", "test://faulty").unwrap();
    match mode {
        Mode::Inline => r,
        Mode::Mixed => r.with_inline_limits(64 << 10, 100),
        Mode::ChunksOnly => r.with_inline_limits(0, 0),
    }
}

/// Starts replicating `local`: with one call failing, a claim succeeds
/// within 3 attempts.
fn claim(local: &runlog::engine::Store<remote_support::Log>, remote: &Remote) -> Replication {
    (0..3)
        .find_map(|_| Replication::start(local, remote.clone(), &config()).ok())
        .expect("a claim succeeds within 3 attempts when one call fails")
}

/// Runs the workload against `store`; returns the values acknowledged.
fn workload(store: Arc<dyn ObjectStore>, dir: &std::path::Path, mode: Mode) -> Vec<u64> {
    let remote = remote_for(store, mode);
    let local = open(dir);
    let r = claim(&local, &remote);
    let mut acked = vec![];
    for v in 1..=8u64 {
        if r.append(&local, &v).is_ok() {
            acked.push(v);
        }
        if v == 4 {
            local.compact().unwrap();
        }
    }
    let _ = r.close();
    acked
}

fn check(inner: Arc<dyn ObjectStore>, dir: &std::path::Path, acked: &[u64], what: &str) {
    let remote = Remote::with_store(inner, "run", "test://faulty").unwrap();
    verify_remote(&RealFs, &remote, None).unwrap_or_else(|e| panic!("{what}: verify: {e}"));
    let target = dir.parent().unwrap().join("restored");
    restore(&RealFs, &remote, &target, None).unwrap_or_else(|e| panic!("{what}: restore: {e}"));
    let restored = read(&target);
    let local = read(dir);
    assert!(
        local.starts_with(&restored),
        "{what}: remote {restored:?} not a prefix of local {local:?}"
    );
    for v in acked {
        assert!(
            restored.contains(v),
            "{what}: acknowledged {v} lost: {restored:?}"
        );
    }
}

#[test]
fn every_call_failing_or_losing_its_answer_loses_nothing_acknowledged() {
    for mode in [Mode::Inline, Mode::Mixed, Mode::ChunksOnly] {
        sweep(mode);
    }
}

fn sweep(mode: Mode) {
    // Count the calls of a clean run.
    let tmp = tempfile::tempdir().unwrap();
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let counter = Arc::new(Faulty::new(inner.clone(), u64::MAX, Fault::Fail));
    let acked = workload(counter.clone(), &tmp.path().join("a"), mode);
    assert_eq!(acked, (1..=8).collect::<Vec<_>>());
    check(inner, &tmp.path().join("a"), &acked, "clean");
    let calls = counter.calls.load(Ordering::SeqCst);
    // Two listings (manifests, gc floors) and the claim, then per append a
    // manifest (and a chunk unless inline), and one snapshot.
    match mode {
        Mode::Inline => assert_eq!(calls, 3 + 8 + 1, "{mode:?}: {calls} calls"),
        Mode::Mixed => assert!(
            calls > 3 + 8 + 1 && calls < 3 + 2 * 8 + 1,
            "{mode:?}: some rounds inline, some with a chunk: {calls} calls"
        ),
        Mode::ChunksOnly => assert_eq!(calls, 3 + 2 * 8 + 1, "{mode:?}: {calls} calls"),
    }

    let mut runs = 0;
    for fault in [Fault::Fail, Fault::DropResponse] {
        for at in 1..=calls {
            let tmp = tempfile::tempdir().unwrap();
            let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
            let faulty = Arc::new(Faulty::new(inner.clone(), at, fault));
            let dir = tmp.path().join("a");
            let acked = workload(faulty, &dir, mode);
            let what = format!("{mode:?}: {fault:?} at call {at} of {calls}");
            assert!(
                acked.len() >= 7,
                "{what}: one fault costs at most one ack: {acked:?}"
            );
            check(inner, &dir, &acked, &what);
            runs += 1;
        }
    }
    assert_eq!(runs, 2 * calls);
}

/// The sweep with rounds in flight: four appenders at once, every manifest
/// PUT held 20 ms by a gate so that rounds overlap (up to 4), and one call
/// failing or losing its answer at every position of the clean run's count.
/// Which round a call belongs to varies from run to run; what must not vary
/// is that every acknowledged value restores, and the chain is a prefix of
/// the local log.
#[test]
fn every_call_failing_or_losing_its_answer_with_rounds_in_flight_loses_nothing_acknowledged() {
    use remote_support::gate_store::Gate;
    let workload = |faulty: Arc<dyn ObjectStore>, dir: &std::path::Path| -> (Vec<u64>, usize) {
        // 20 ms a manifest PUT: long beside a local fsync, so appends made
        // durable while a round is in flight send rounds of their own.
        let gate = Arc::new(Gate::new(faulty, std::time::Duration::from_millis(20)));
        let remote = Remote::with_store(gate.clone(), "run", "test://faulty").unwrap();
        let local = open(dir);
        let r = claim(&local, &remote);
        let acked = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (r, local, acked) = (&r, &local, &acked);
                s.spawn(move || {
                    for i in 1..=4u64 {
                        let v = t * 10 + i;
                        if r.append(local, &v).is_ok() {
                            acked.lock().unwrap().push(v);
                        }
                    }
                });
            }
        });
        let _ = r.close();
        let most = gate.max_in_flight.load(Ordering::SeqCst);
        (acked.into_inner().unwrap(), most)
    };
    let tmp = tempfile::tempdir().unwrap();
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let counter = Arc::new(Faulty::new(inner.clone(), u64::MAX, Fault::Fail));
    let (acked, most) = workload(counter.clone(), &tmp.path().join("a"));
    assert_eq!(acked.len(), 16);
    assert!(most >= 2, "four appenders kept {most} round in flight");
    check(inner, &tmp.path().join("a"), &acked, "clean");
    let calls = counter.calls.load(Ordering::SeqCst);
    let mut overlapped = 0;
    for fault in [Fault::Fail, Fault::DropResponse] {
        for at in 1..=calls {
            let tmp = tempfile::tempdir().unwrap();
            let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
            let faulty = Arc::new(Faulty::new(inner.clone(), at, fault));
            let dir = tmp.path().join("a");
            let (acked, most) = workload(faulty, &dir);
            overlapped += usize::from(most >= 2);
            let what = format!("in flight: {fault:?} at call {at} of {calls}");
            check(inner, &dir, &acked, &what);
        }
    }
    assert!(
        overlapped as u64 >= calls / 2,
        "rounds overlapped in only {overlapped} of {} runs",
        2 * calls
    );
}
