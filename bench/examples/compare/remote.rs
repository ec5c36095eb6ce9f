//! Rows for issue 15, against the S3 gateway named by the environment
//! (`.ci/ceph.sh start`, then `. $CEPH_DIR/env`): appends replicated `sync`
//! and `async` beside `runlog_group_*`, and the restore of a 1M-unit run.
//! Without the gateway the rows are skipped with that reason.

use crate::common::{self, Units, update};
use crate::contenders::Cache;
use crate::contenders::{parallel, tempdir};
use crate::{Config, Contender};
use runlog::engine::{Codec, RealFs, Store};
use runlog::remote::{Policy, Remote, RemoteConfig, Replication, restore};
use std::sync::Arc;
use std::time::Instant;

const UNITS: u64 = 1000;
const RESTORE_UNITS: u64 = 1_000_000;

fn url(tag: &str) -> Result<String, String> {
    let bucket = std::env::var("RUNLOG_S3_BUCKET")
        .map_err(|_| "no S3 gateway: run .ci/ceph.sh start and source its env".to_string())?;
    std::env::var("AWS_ENDPOINT_URL")
        .map_err(|_| "no S3 gateway: AWS_ENDPOINT_URL unset".to_string())?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    Ok(format!("s3://{bucket}/compare/{tag}-{nanos}"))
}

/// `runlog_remote_{sync,async}_Nt`: the `runlog_group_Nt` loop through [`Replication`].
pub fn append(name: &'static str, policy: Policy, threads: usize) -> Result<Contender, String> {
    let url = url(name)?;
    let dir = tempdir()?;
    let store = Store::<Units>::open(
        dir.path().join("store"),
        common::opts(Codec::Binary, common::GROUPED),
    )
    .map_err(|e| e.to_string())?;
    let config = RemoteConfig {
        url: url.clone(),
        policy,
        epoch: 0,
    };
    let mut remote = Remote::open(&url).map_err(|e| e.to_string())?;
    // RUNLOG_COMPARE_INLINE=round,total: other inline limits than the
    // defaults (0,0 ships every round as a chunk then its manifest), to
    // compare the two kinds of round on one binary.
    if let Ok(v) = std::env::var("RUNLOG_COMPARE_INLINE") {
        let (round, total) = v
            .split_once(',')
            .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)))
            .ok_or(format!(
                "RUNLOG_COMPARE_INLINE={v:?}: expected round,total bytes"
            ))?;
        remote = remote.with_inline_limits(round, total);
    }
    let r = Replication::start(&store, remote, &config).map_err(|e| e.to_string())?;
    // The replication first, so it ships what is left before the store closes.
    let r = Arc::new((r, store));
    let updates: Vec<common::Update> = (0..UNITS).map(|i| update(i, UNITS)).collect();
    let mut c = parallel(
        name,
        threads,
        dir,
        (r.clone(), updates),
        |(r, updates), i| {
            r.0.append(&r.1, &updates[(i % UNITS) as usize])
                .map(drop)
                .map_err(|e| e.to_string())
        },
    );
    let mut timed_pass = c.run;
    c.run = Box::new(move |dur| {
        let rate = timed_pass(dur)?;
        if let Some(st) = r.0.status() {
            eprintln!(
                "{name}: durable {} shipped {} lag {} records after the rep ({} rounds)",
                st.durable,
                st.shipped,
                st.lag,
                st.rounds.unwrap_or(0)
            );
        }
        Ok(rate)
    });
    Ok(c)
}

/// `remote_restore_1m`: restores of a 1M-unit run per second (one pass each);
/// prints the local open time of the same run beside it.
pub fn restore_1m(_: &Config, _: &Cache) -> Result<Contender, String> {
    let url = url("restore-1m")?;
    let dir = tempdir()?;
    let path = dir.path().join("store");
    common::build_state_store(&path, Codec::Binary, RESTORE_UNITS);
    let t = Instant::now();
    let store = Store::<Units>::open(&path, common::opts(Codec::Binary, common::GROUPED))
        .map_err(|e| e.to_string())?;
    let open_secs = t.elapsed().as_secs_f64();
    let config = RemoteConfig {
        url: url.clone(),
        policy: Policy::Sync,
        epoch: 0,
    };
    let remote = Remote::open(&url).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let r = Replication::start(&store, remote.clone(), &config).map_err(|e| e.to_string())?;
    let st = r.close().map_err(|e| e.to_string())?;
    drop(store);
    eprintln!(
        "remote_restore_1m: local open {open_secs:.3}s; shipped {} bytes in {:.3}s",
        st.and_then(|s| s.bytes).unwrap_or(0),
        t.elapsed().as_secs_f64()
    );
    let mut n = 0u32;
    Ok(Contender {
        name: "remote_restore_1m",
        threads: 1,
        unit: "restores/s",
        one_shot: true,
        run: Box::new(move |_| {
            n += 1;
            let target = dir.path().join(format!("restored-{n}"));
            let t = Instant::now();
            let rep = restore(&RealFs, &remote, &target, None).map_err(|e| e.to_string())?;
            let secs = t.elapsed().as_secs_f64();
            let t2 = Instant::now();
            let s = Store::<Units>::open(&target, common::opts(Codec::Binary, common::GROUPED))
                .map_err(|e| e.to_string())?;
            let units = s.read(|st| st.len() as u64);
            eprintln!(
                "remote_restore_1m: restore {secs:.3}s ({} bytes), then open {:.3}s: {units} units",
                rep.bytes,
                t2.elapsed().as_secs_f64()
            );
            if units != RESTORE_UNITS {
                return Err(format!("restored {units} units, expected {RESTORE_UNITS}"));
            }
            drop(s);
            let _ = std::fs::remove_dir_all(&target);
            Ok(1.0 / secs)
        }),
    })
}
