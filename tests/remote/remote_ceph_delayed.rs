//! The Ceph gateway 20 ms away (issue 50): through the delay proxy the
//! benches use (`bench/src/delay_proxy.rs`), a run of a snapshot and 40
//! chunks ships, and restores with its GETs overlapping into the same store,
//! file for file, as a restore fetching one object after the other straight
//! from the gateway.
#![cfg(feature = "remote")]

use crate::remote_support;

use object_store::ObjectStore;
use remote_support::delay_proxy::{DelayProxy, host_port};
use remote_support::{files, gateway, open, read, s3_url};
use runlog::engine::RealFs;
use runlog::remote::{
    Policy, READ_AHEAD_BYTES, Remote, RemoteConfig, Replication, latest_manifest, restore,
    verify_remote,
};
use std::sync::Arc;
use std::time::Duration;

/// The gateway's bucket at `url`'s prefix, reached at `endpoint`.
fn s3_remote(bucket: &str, url: &str, endpoint: &str) -> Remote {
    let store: Arc<dyn ObjectStore> = Arc::new(
        object_store::aws::AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_endpoint(endpoint)
            .build()
            .unwrap(),
    );
    let prefix = url
        .strip_prefix(&format!("s3://{bucket}/"))
        .expect("an s3_url");
    Remote::with_store(store, prefix, url).unwrap()
}

#[test]
fn ceph_behind_a_20ms_delay_restores_in_parallel_what_a_sequential_restore_gives() {
    let Some((bucket, _gateway)) = gateway("ceph_delayed_restore") else {
        return;
    };
    let direct = std::env::var("AWS_ENDPOINT_URL").unwrap();
    let proxy = DelayProxy::start(host_port(&direct).unwrap(), Duration::from_millis(20)).unwrap();
    let url = s3_url(&bucket, "delayed");
    let tmp = tempfile::tempdir().unwrap();
    let local = open(&tmp.path().join("a"));
    let config = RemoteConfig::new(url.clone(), Policy::Sync);
    let far = || s3_remote(&bucket, &url, &proxy.url());
    let r = Replication::start(&local, far().with_inline_limits(0, 0), &config).unwrap();
    for v in 1..=50u64 {
        r.append(&local, &v).unwrap();
        if v == 10 {
            local.compact().unwrap();
        }
    }
    r.close().unwrap();
    drop(local);
    let head = latest_manifest(&far()).unwrap().unwrap();
    assert!(
        head.snapshot.is_some() && head.chunks.len() >= 30,
        "{head:?}"
    );

    let parallel = tmp.path().join("parallel");
    let got = restore(&RealFs, &far(), &parallel, None).unwrap();
    let sequential = tmp.path().join("sequential");
    let one_by_one = s3_remote(&bucket, &url, &direct).with_read_ahead(1, READ_AHEAD_BYTES);
    let want = restore(&RealFs, &one_by_one, &sequential, None).unwrap();
    assert_eq!(got, want);
    assert_eq!(files(&parallel), files(&sequential));
    assert_eq!(read(&parallel), (1..=50).collect::<Vec<_>>());
    assert_eq!(verify_remote(&RealFs, &far(), None).unwrap(), want);
}
