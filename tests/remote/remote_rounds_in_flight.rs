//! Issue 50, part 1: a writer keeps up to K manifest PUTs in flight
//! (FORMAT.md §13.3–13.4), on `InMemory` and on the Ceph gateway. A gate in
//! front of the store holds manifest PUTs as a network holds a dead process's
//! requests, and lets them land later, in the order a test chooses:
//!
//! * many appenders keep up to K rounds in flight, never more, and every
//!   acknowledged record restores;
//! * a writer dead with K rounds outstanding is fenced by another host that
//!   claims meanwhile: none of its waiting appends is acknowledged, its late
//!   manifest that lands above the claim never becomes the head, and the new
//!   writer's next round, finding that slot taken by a lower epoch, goes on
//!   above it;
//! * the same, with the successor on the dead process's own directory (every
//!   process claims an epoch of its own);
//! * a late manifest landing below gc's floor is ignored by readers and claims.
#![cfg(feature = "remote")]

use crate::remote_support;

use object_store::ObjectStore;
use object_store::memory::InMemory;
use remote_support::gate_store::Gate;
use remote_support::{open, read};
use runlog::engine::RealFs;
use runlog::remote::layout::{FLOOR_DIR, MANIFEST_DIR, manifest_name, parse_manifest_name};
use runlog::remote::{
    Policy, Remote, RemoteConfig, RemoteError, Replication, gc, latest_manifest, restore,
    verify_remote,
};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

fn config(url: &str) -> RemoteConfig {
    RemoteConfig::new(url, Policy::Sync)
}

/// A store under test: its prefix and URL.
struct Place {
    inner: Arc<dyn ObjectStore>,
    prefix: String,
    url: String,
}

impl Place {
    fn memory() -> Place {
        Place {
            inner: Arc::new(InMemory::new()),
            prefix: "run".into(),
            url: "memory://run".into(),
        }
    }

    fn ceph(bucket: &str, tag: &str) -> Place {
        let url = remote_support::s3_url(bucket, tag);
        Place {
            inner: crate::remote_ceph::s3_store(bucket),
            prefix: url
                .trim_start_matches(&format!("s3://{bucket}/"))
                .to_string(),
            url,
        }
    }

    fn remote(&self) -> Remote {
        Remote::with_store(self.inner.clone(), &self.prefix, &self.url).unwrap()
    }

    fn gated(&self, gate: &Arc<Gate>, rounds: u64) -> Remote {
        Remote::with_store(gate.clone(), &self.prefix, &self.url)
            .unwrap()
            .with_rounds_in_flight(rounds)
    }

    /// Restores the run into `dir` and returns its values.
    fn restored(&self, dir: &Path) -> Vec<u64> {
        verify_remote(&RealFs, &self.remote(), None).unwrap();
        restore(&RealFs, &self.remote(), dir, None).unwrap();
        read(dir)
    }
}

fn is_fenced(r: &Result<u64, RemoteError>, epoch: u64, newer: u64) -> bool {
    matches!(r, Err(RemoteError::Fenced { epoch: e, newer: n, .. }) if *e == epoch && *n == newer)
}

fn appenders_keep_up_to_k_rounds_in_flight(place: &Place, dir: &Path, rounds: u64) {
    let gate = Arc::new(Gate::new(place.inner.clone(), Duration::from_millis(15)));
    let local = open(dir);
    let r = Replication::start(&local, place.gated(&gate, rounds), &config(&place.url)).unwrap();
    let acked = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (r, local, acked) = (&r, &local, &acked);
            s.spawn(move || {
                for i in 0..10u64 {
                    let v = 1000 + t * 100 + i;
                    r.append(local, &v).unwrap();
                    acked.lock().unwrap().push(v);
                }
            });
        }
    });
    r.close().unwrap();
    let most = gate.max_in_flight.load(Ordering::SeqCst) as u64;
    assert!(
        most <= rounds,
        "{most} manifest PUTs in flight, window {rounds}"
    );
    if rounds > 1 {
        assert!(
            most >= 2,
            "eight appenders kept only {most} round in flight"
        );
    }
    let restored = place.restored(&dir.with_extension("restored"));
    assert_eq!(restored, read(dir), "the remote holds the local log");
    for v in acked.into_inner().unwrap() {
        assert!(restored.contains(&v), "acknowledged {v} lost");
    }
}

#[test]
fn appenders_keep_up_to_k_rounds_in_flight_and_every_acknowledged_record_restores() {
    for rounds in [1, 4, 8] {
        let tmp = tempfile::tempdir().unwrap();
        appenders_keep_up_to_k_rounds_in_flight(&Place::memory(), &tmp.path().join("a"), rounds);
    }
}

#[test]
fn ceph_appenders_keep_up_to_k_rounds_in_flight_and_every_acknowledged_record_restores() {
    let Some((bucket, _gateway)) = remote_support::gateway("ceph_rounds_in_flight") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let place = Place::ceph(&bucket, "rounds-in-flight");
    appenders_keep_up_to_k_rounds_in_flight(&place, &tmp.path().join("a"), 4);
}

/// A writer on `a` (epoch 1) acknowledges 1, then has four appends (2..=5)
/// waiting on four manifests held at the gate (slots 3..=6), and a fifth (6)
/// waiting for room in its window. `successor` then claims and writes; the
/// held manifests land; the writer's six waiting appends must all be fenced.
/// Returns what the successor's store and replication are, for more writes.
fn dead_with_rounds_outstanding<S>(place: &Place, tmp: &Path, successor: S)
where
    S: FnOnce(
        &Path,
    ) -> (
        runlog::engine::Store<remote_support::Log>,
        Replication,
        Vec<u64>,
    ),
{
    let gate = Arc::new(Gate::new(place.inner.clone(), Duration::ZERO));
    let a = tmp.join("a");
    let local = open(&a);
    let w = Replication::start(&local, place.gated(&gate, 4), &config(&place.url)).unwrap();
    w.append(&local, &1).unwrap();
    gate.close();
    std::thread::scope(|s| {
        let mut waiting = Vec::new();
        for v in 2..=5u64 {
            let (w, local) = (&w, &local);
            waiting.push(s.spawn(move || w.append(local, &v)));
            gate.wait_held((v - 1) as usize);
        }
        // The window is full: the fifth append waits without sending.
        let (w5, local5) = (&w, &local);
        waiting.push(s.spawn(move || w5.append(local5, &6)));
        std::thread::sleep(Duration::from_millis(100));
        let held = gate.held();
        assert_eq!(held.len(), 4, "{held:?}");
        assert!(
            held.iter().all(|n| n.ends_with(".json")),
            "only manifests are held: {held:?}"
        );

        let (s_local, s_rep, mut expected) = successor(tmp);
        for name in gate.held() {
            gate.release(&name);
        }
        gate.wait_drained();
        for h in waiting {
            let r = h.join().unwrap();
            assert!(is_fenced(&r, 1, 2), "the dead writer's append: {r:?}");
        }
        assert!(is_fenced(&w.append(&local, &7), 1, 2), "fenced for good");

        // Slot 6 holds the dead writer's late manifest (epoch 1): the
        // successor's next round finds it taken by a lower epoch and lands above.
        let late = place.remote();
        let six = runlog::remote::Remote::get(&late, "test", &manifest_name(6), u64::MAX)
            .unwrap()
            .expect("the dead writer's last held manifest landed");
        assert!(String::from_utf8_lossy(&six).contains("\"epoch\":1,"));
        // The newest manifest is not the head: readers take the successor's.
        let head = latest_manifest(&late).unwrap().unwrap();
        assert_eq!((head.number, head.epoch), (5, 2));
        assert_eq!(place.restored(&tmp.join("before-102")), expected);
        s_rep.append(&s_local, &102).unwrap();
        expected.push(102);
        let st = s_rep.status().unwrap();
        assert_eq!((st.epoch, st.manifest), (2, 7), "{st:?}");
        s_rep.close().unwrap();
        let head = latest_manifest(&late).unwrap().unwrap();
        assert_eq!((head.number, head.epoch), (7, 2));
        assert_eq!(place.restored(&tmp.join("c")), expected);
    });
}

fn fenced_by_another_host(place: &Place) {
    let tmp = tempfile::tempdir().unwrap();
    dead_with_rounds_outstanding(place, tmp.path(), |tmp| {
        // Another host restores what the chain holds (1) and claims slot 3.
        let b = tmp.join("b");
        assert_eq!(place.restored(&b), vec![1]);
        let local = open(&b);
        let r = Replication::start(&local, place.remote(), &config(&place.url)).unwrap();
        for v in [100, 101] {
            r.append(&local, &v).unwrap();
        }
        (local, r, vec![1, 100, 101])
    });
}

#[test]
fn a_writer_dead_with_k_rounds_outstanding_is_fenced_by_another_host_and_loses_nothing_acknowledged()
 {
    fenced_by_another_host(&Place::memory());
}

#[test]
fn ceph_a_writer_dead_with_k_rounds_outstanding_is_fenced_by_another_host_and_loses_nothing_acknowledged()
 {
    let Some((bucket, _gateway)) = remote_support::gateway("ceph_dead_writer_fenced") else {
        return;
    };
    fenced_by_another_host(&Place::ceph(&bucket, "dead-writer-fenced"));
}

fn succeeded_in_its_own_directory(place: &Place) {
    let tmp = tempfile::tempdir().unwrap();
    dead_with_rounds_outstanding(place, tmp.path(), |tmp| {
        // The dead process's directory as it left it (its appends 2..=6 are
        // in the local log): its next process claims epoch 2 at slot 3 and
        // ships them with its own.
        let a2 = tmp.join("a2");
        std::fs::create_dir_all(&a2).unwrap();
        for e in std::fs::read_dir(tmp.join("a")).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), a2.join(e.file_name())).unwrap();
        }
        let held = RemoteConfig::read(&RealFs, &a2).unwrap().unwrap();
        assert_eq!(held.epoch, 1);
        let local = open(&a2);
        let r = Replication::start(&local, place.remote(), &held).unwrap();
        for v in [100, 101] {
            r.append(&local, &v).unwrap();
        }
        (local, r, vec![1, 2, 3, 4, 5, 6, 100, 101])
    });
}

#[test]
fn a_process_dead_with_rounds_outstanding_is_succeeded_on_its_own_directory_and_its_late_manifests_never_become_the_head()
 {
    succeeded_in_its_own_directory(&Place::memory());
}

#[test]
fn ceph_a_process_dead_with_rounds_outstanding_is_succeeded_on_its_own_directory_and_its_late_manifests_never_become_the_head()
 {
    let Some((bucket, _gateway)) = remote_support::gateway("ceph_dead_process_succeeded") else {
        return;
    };
    succeeded_in_its_own_directory(&Place::ceph(&bucket, "dead-process-succeeded"));
}

#[test]
fn a_late_manifest_landing_below_gcs_floor_is_ignored_by_readers_and_claims() {
    let place = Place::memory();
    let tmp = tempfile::tempdir().unwrap();
    let local = open(&tmp.path().join("a"));
    let r = Replication::start(&local, place.remote(), &config(&place.url)).unwrap();
    for v in 1..=5u64 {
        r.append(&local, &v).unwrap();
    }
    r.close().unwrap();
    let rem = place.remote();
    let slots = |rem: &Remote| -> Vec<u64> {
        rem.list("test", MANIFEST_DIR)
            .unwrap()
            .iter()
            .filter_map(|n| parse_manifest_name(n))
            .collect()
    };
    assert_eq!(slots(&rem), (1..=6).collect::<Vec<_>>());
    let two = rem
        .get("test", &manifest_name(2), u64::MAX)
        .unwrap()
        .unwrap();

    let report = gc(&rem, 2).unwrap();
    assert_eq!(report.deleted_manifests, vec![1, 2, 3, 4]);
    assert_eq!(report.kept_manifests, vec![5, 6]);
    assert_eq!(
        rem.list("test", FLOOR_DIR).unwrap(),
        vec!["floor/00000000000000000005".to_string()]
    );
    // A PUT of slot 2 that was still in the network lands now, in the hole
    // gc made. Counted from it, slot 3 would be the lowest empty and slot 2
    // (record 1 only) the head; the floor keeps both readers and claims above.
    assert_eq!(
        rem.put_create("test", &manifest_name(2), two).unwrap(),
        runlog::remote::Put::Created
    );
    let head = latest_manifest(&rem).unwrap().unwrap();
    assert_eq!((head.number, head.shipped), (6, 5));
    assert_eq!(place.restored(&tmp.path().join("b")), vec![1, 2, 3, 4, 5]);
    let b = open(&tmp.path().join("b"));
    let w = Replication::start(&b, place.remote(), &config(&place.url)).unwrap();
    w.append(&b, &6).unwrap();
    assert_eq!(w.status().unwrap().manifest, 8, "claimed 7, shipped 8");
    w.close().unwrap();
    drop(b);
    assert_eq!(
        place.restored(&tmp.path().join("c")),
        vec![1, 2, 3, 4, 5, 6]
    );

    // The next gc raises the floor, and the late slot 2 and the old floor go.
    let report = gc(&rem, 1).unwrap();
    assert_eq!(report.deleted_manifests, vec![2, 5, 6, 7]);
    assert_eq!(
        rem.list("test", FLOOR_DIR).unwrap(),
        vec!["floor/00000000000000000008".to_string()]
    );
    assert_eq!(slots(&rem), vec![8]);
}
