//! Proves the remote layer against a real S3 server, the Ceph RADOS Gateway
//! (.ci/ceph.sh): sync and async ship + restore with the invariant check, two
//! writers on two local directories claiming one run (exactly one wins), and a
//! failing or answer-losing call at every position of a workload. Skips with a
//! printed reason without the gateway; fails instead when RUNLOG_REQUIRE_S3=1.
#![cfg(feature = "remote")]

use crate::remote_support;

use object_store::ObjectStore;
use remote_support::{Fault, Faulty, gateway, open, read, s3_url, two_claimers_one_wins};
use runlog::engine::RealFs;
use runlog::remote::{
    Policy, Remote, RemoteConfig, Replication, gc, latest_manifest, restore, verify_remote,
};
use std::sync::Arc;
use std::sync::atomic::Ordering;

fn config(url: &str, policy: Policy) -> RemoteConfig {
    RemoteConfig::new(url, policy)
}

pub(crate) fn s3_store(bucket: &str) -> Arc<dyn ObjectStore> {
    Arc::new(
        object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .build()
            .unwrap(),
    )
}

#[test]
fn ceph_sync_and_async_ship_then_restore_hold_every_acknowledged_record() {
    let Some((bucket, _gateway)) = gateway("ceph_ship_restore") else {
        return;
    };
    for policy in [Policy::Sync, Policy::Async { interval_ms: 50 }] {
        let url = s3_url(&bucket, &format!("ship-{}", policy.name()));
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a");
        let local = open(&a);
        let r =
            Replication::start(&local, Remote::open(&url).unwrap(), &config(&url, policy)).unwrap();
        for v in 1..=60u64 {
            r.append(&local, &v).unwrap();
            if v == 30 {
                local.compact().unwrap();
            }
        }
        let stats = r.close().unwrap().expect("started");
        assert_eq!((stats.shipped, stats.lag), (60, 0), "{url}");
        let remote = Remote::open(&url).unwrap();
        assert_eq!(verify_remote(&RealFs, &remote, None).unwrap().last_seq, 60);
        let b = tmp.path().join("b");
        restore(&RealFs, &remote, &b, None).unwrap();
        assert_eq!(read(&b), (1..=60).collect::<Vec<_>>(), "{url}");
        let g = gc(&remote, 1).unwrap();
        assert!(!g.deleted_manifests.is_empty());
        let c = tmp.path().join("c");
        restore(&RealFs, &remote, &c, None).unwrap();
        assert_eq!(read(&c), (1..=60).collect::<Vec<_>>(), "after gc");
    }
}

#[test]
fn ceph_two_writers_on_two_local_dirs_claiming_one_run_exactly_one_wins() {
    let Some((bucket, _gateway)) = gateway("ceph_two_writers") else {
        return;
    };
    for round in 0..5 {
        let url = s3_url(&bucket, &format!("claim-{round}"));
        let tmp = tempfile::tempdir().unwrap();
        let claim = {
            let url = url.clone();
            move || Remote::open(&url)
        };
        two_claimers_one_wins(tmp.path(), claim, &config(&url, Policy::Sync), round);
        let head = latest_manifest(&Remote::open(&url).unwrap())
            .unwrap()
            .unwrap();
        assert!(head.epoch >= 2);
    }
}

#[test]
fn ceph_every_call_failing_or_losing_its_answer_loses_nothing_acknowledged() {
    let Some((bucket, _gateway)) = gateway("ceph_faults") else {
        return;
    };
    // Records inline in the manifest (the default), inline until 100 bytes
    // then a chunk of them (both kinds of round), and chunks only.
    let limits = [
        ("inline", None),
        ("mixed", Some((64 << 10, 100))),
        ("chunks", Some((0, 0))),
    ];
    let run = |at: u64, fault: Fault, tag: &str, limits: Option<(u64, u64)>| {
        let url = s3_url(&bucket, tag);
        let prefix = url
            .trim_start_matches(&format!("s3://{bucket}/"))
            .to_string();
        let inner = s3_store(&bucket);
        let faulty = Arc::new(Faulty::new(inner.clone(), at, fault));
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a");
        let mut remote = Remote::with_store(faulty.clone(), &prefix, &url).unwrap();
        if let Some((round, total)) = limits {
            remote = remote.with_inline_limits(round, total);
        }
        let local = open(&dir);
        let mut rep = None;
        for _ in 0..3 {
            if let Ok(r) = Replication::start(&local, remote.clone(), &config(&url, Policy::Sync)) {
                rep = Some(r);
                break;
            }
        }
        let r = rep.expect("a claim succeeds within 3 attempts");
        let mut acked = vec![];
        for v in 1..=6u64 {
            if r.append(&local, &v).is_ok() {
                acked.push(v);
            }
        }
        let _ = r.close();
        let clean = Remote::with_store(inner, &prefix, &url).unwrap();
        let target = tmp.path().join("restored");
        restore(&RealFs, &clean, &target, None).unwrap_or_else(|e| panic!("{tag}: {e}"));
        let restored = read(&target);
        assert!(read(&dir).starts_with(&restored), "{tag}");
        for v in &acked {
            assert!(restored.contains(v), "{tag}: acknowledged {v} lost");
        }
        (faulty.calls.load(Ordering::SeqCst), acked.len())
    };
    for (name, limits) in limits {
        let (calls, acked) = run(
            u64::MAX,
            Fault::Fail,
            &format!("faults-{name}-clean"),
            limits,
        );
        assert_eq!(acked, 6, "{name}");
        // Two listings (manifests, gc floors) and the claim, then the rounds.
        match name {
            "inline" => assert_eq!(calls, 3 + 6, "{name}: one PUT a round"),
            "chunks" => assert_eq!(calls, 3 + 2 * 6, "{name}: two PUTs a round"),
            _ => assert!(calls > 3 + 6 && calls < 3 + 2 * 6, "{name}: {calls} calls"),
        }
        for fault in [Fault::Fail, Fault::DropResponse] {
            for at in 1..=calls {
                let (_, acked) = run(at, fault, &format!("faults-{name}-{fault:?}-{at}"), limits);
                assert!(
                    acked >= 5,
                    "{name}: {fault:?} at {at}: one fault costs at most one ack"
                );
            }
        }
    }
}
