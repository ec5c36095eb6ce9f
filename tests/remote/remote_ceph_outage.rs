//! Proves what happens when the Ceph gateway stops mid-run and starts again:
//! `async` keeps acknowledging locally, reports the lag and catches up; `sync`
//! fails with a clear error and acknowledges nothing without the remote. Each
//! ends with a restore holding every acknowledged value. Needs .ci/ceph.sh's
//! gateway (it stops and starts radosgw); skips without it, fails instead
//! when RUNLOG_REQUIRE_S3=1.
#![cfg(feature = "remote")]

use crate::remote_support;

use remote_support::{gateway_alone, open, read, s3_url};
use runlog::engine::RealFs;
use runlog::remote::{Policy, Remote, RemoteConfig, Replication, latest_manifest, restore};
use std::process::Command;

fn ceph(cmd: &str) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/ceph.sh");
    let st = Command::new("bash").args([script, cmd]).status().unwrap();
    assert!(st.success(), "ceph.sh {cmd}");
}

/// Waits (by polling, not by a timed assertion) until the gateway answers.
fn wait_up(url: &str) {
    for _ in 0..120 {
        if latest_manifest(&Remote::open(url).unwrap()).is_ok() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    panic!("the gateway did not come back");
}

#[test]
fn ceph_gateway_stopped_mid_run_async_catches_up_and_sync_never_acks_without_it() {
    let Some((bucket, _gateway)) = gateway_alone("ceph_outage") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let url_a = s3_url(&bucket, "outage-async");
    let url_s = s3_url(&bucket, "outage-sync");
    let cfg = |url: &str, policy| RemoteConfig::new(url, policy);
    let a_local = open(&tmp.path().join("async"));
    let a = Replication::start(
        &a_local,
        Remote::open(&url_a).unwrap(),
        &cfg(&url_a, Policy::Async { interval_ms: 100 }),
    )
    .unwrap();
    let s_local = open(&tmp.path().join("sync"));
    let s = Replication::start(
        &s_local,
        Remote::open(&url_s).unwrap(),
        &cfg(&url_s, Policy::Sync),
    )
    .unwrap();
    for v in 1..=10u64 {
        a.append(&a_local, &v).unwrap();
        s.append(&s_local, &v).unwrap();
    }
    a.flush().unwrap();

    ceph("stop-rgw");
    // async: every append is acknowledged after the local fsync.
    for v in 11..=30u64 {
        a.append(&a_local, &v).unwrap();
    }
    let e = a.flush().unwrap_err();
    let lag = a.status().unwrap();
    assert_eq!((lag.durable, lag.shipped, lag.lag), (30, 10, 20), "{e}");
    // sync: refused with the remote's error, not acknowledged.
    let e = s.append(&s_local, &11).unwrap_err();
    let msg = runlog::engine::ErrorChain(&e).to_string();
    assert!(
        msg.contains("put chunk") || msg.contains("put manifest"),
        "{msg}"
    );
    assert_eq!(s.status().unwrap().shipped, 10);

    ceph("start-rgw");
    wait_up(&url_a);
    a.flush().unwrap();
    assert_eq!(a.status().unwrap().lag, 0);
    s.append(&s_local, &12).unwrap();
    let a_stats = a.close().unwrap().expect("started");
    assert_eq!(a_stats.shipped, 30);
    s.close().unwrap();

    let ra = tmp.path().join("ra");
    restore(&RealFs, &Remote::open(&url_a).unwrap(), &ra, None).unwrap();
    assert_eq!(read(&ra), (1..=30).collect::<Vec<_>>());
    let rs = tmp.path().join("rs");
    restore(&RealFs, &Remote::open(&url_s).unwrap(), &rs, None).unwrap();
    let mut want: Vec<u64> = (1..=10).collect();
    want.extend([11, 12]); // 11 was durable locally, shipped (and acked) with 12
    assert_eq!(read(&rs), want);
}
