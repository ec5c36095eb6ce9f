//! Rows for issue 15, against the S3 gateway named by the environment
//! (`.ci/ceph.sh start`, then `. $CEPH_DIR/env`): appends replicated `sync`
//! and `async` beside `runlog_group_*`, and the restore of a 1M-unit run.
//! Without the gateway the rows are skipped with that reason.
//!
//! `RUNLOG_COMPARE_DELAY_MS=30`: every request to the gateway 30 ms later
//! (issue 50; [`runlog_bench::delay_proxy`], started by [`delay_from_env`]).
//! `RUNLOG_RESTORE_PARALLEL=n`: the restore's GETs in flight (1: one after
//! the other, as before issue 50; default `READ_AHEAD_REQUESTS`).
//! `RUNLOG_COMPARE_RESTORE_UNITS=n`: the restored run's size (default 1M);
//! `RUNLOG_COMPARE_RESTORE_LOG=n`: n updates in its log after the snapshot;
//! `RUNLOG_COMPARE_RESTORE_ROUNDS=k`: then k more, shipped as k small chunks.

use crate::common::{self, Units, update};
use crate::contenders::Cache;
use crate::contenders::{parallel, tempdir};
use crate::{Config, Contender};
use runlog::engine::{Codec, RealFs, Store, SyncPolicy};
use runlog::remote::{Policy, READ_AHEAD_BYTES, Remote, RemoteConfig, Replication, restore};
use runlog_bench::delay_proxy::{DelayProxy, host_port};
use std::sync::Arc;
use std::time::Instant;

const UNITS: u64 = 1000;
const RESTORE_UNITS: u64 = 1_000_000;

/// With `RUNLOG_COMPARE_DELAY_MS` set, starts a [`DelayProxy`] in front of
/// `AWS_ENDPOINT_URL` and points that variable at it; the proxy lives as
/// long as the returned value. Call first thing in `main`, before any
/// thread that could read the environment exists.
pub fn delay_from_env() -> Result<Option<DelayProxy>, String> {
    let Ok(ms) = std::env::var("RUNLOG_COMPARE_DELAY_MS") else {
        return Ok(None);
    };
    let ms: u64 = ms
        .trim()
        .parse()
        .map_err(|_| format!("RUNLOG_COMPARE_DELAY_MS={ms:?}: expected milliseconds"))?;
    let endpoint = std::env::var("AWS_ENDPOINT_URL")
        .map_err(|_| "RUNLOG_COMPARE_DELAY_MS: AWS_ENDPOINT_URL unset".to_string())?;
    let upstream = host_port(&endpoint).ok_or(format!(
        "RUNLOG_COMPARE_DELAY_MS: AWS_ENDPOINT_URL={endpoint:?} is not http://host:port"
    ))?;
    let proxy = DelayProxy::start(upstream, std::time::Duration::from_millis(ms))
        .map_err(|e| format!("start the delay proxy before {upstream}: {e}"))?;
    eprintln!(
        "remote rows: {ms} ms added to every request ({} -> {endpoint})",
        proxy.url()
    );
    // SAFETY: called first in `main`, while this is the only thread that
    // reads the environment (the proxy's threads never do).
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("AWS_ENDPOINT_URL", proxy.url())
    };
    Ok(Some(proxy))
}

/// The restore's read-ahead from `RUNLOG_RESTORE_PARALLEL` (GETs in flight).
fn read_ahead(remote: Remote) -> Result<Remote, String> {
    match std::env::var("RUNLOG_RESTORE_PARALLEL") {
        Err(_) => Ok(remote),
        Ok(v) => {
            let n: usize = v
                .trim()
                .parse()
                .map_err(|_| format!("RUNLOG_RESTORE_PARALLEL={v:?}: expected a count"))?;
            Ok(remote.with_read_ahead(n, READ_AHEAD_BYTES))
        }
    }
}

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
    let config = RemoteConfig::new(url.clone(), policy);
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
    // The `_k1` rows keep one round in flight (as before issue 50); the
    // others the default, or RUNLOG_COMPARE_ROUNDS_IN_FLIGHT.
    if name.ends_with("_k1") {
        remote = remote.with_rounds_in_flight(1);
    } else if let Ok(v) = std::env::var("RUNLOG_COMPARE_ROUNDS_IN_FLIGHT") {
        let k = v.parse().map_err(|_| {
            format!("RUNLOG_COMPARE_ROUNDS_IN_FLIGHT={v:?}: expected a number, 1 to 8")
        })?;
        remote = remote.with_rounds_in_flight(k);
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
    let units_wanted = match std::env::var("RUNLOG_COMPARE_RESTORE_UNITS") {
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| format!("RUNLOG_COMPARE_RESTORE_UNITS={v:?}: expected a count"))?,
        Err(_) => RESTORE_UNITS,
    };
    common::build_state_store(&path, Codec::Binary, units_wanted);
    // RUNLOG_COMPARE_RESTORE_LOG=n: n updates more, in the log after the
    // snapshot, so the chain is a snapshot and chunks (64 MiB each).
    if let Ok(v) = std::env::var("RUNLOG_COMPARE_RESTORE_LOG") {
        let n: u64 = v
            .trim()
            .parse()
            .map_err(|_| format!("RUNLOG_COMPARE_RESTORE_LOG={v:?}: expected a count"))?;
        let s = Store::<Units>::open(&path, common::opts(Codec::Binary, SyncPolicy::Never))
            .map_err(|e| e.to_string())?;
        let from = units_wanted + 1;
        common::fill(&s, from, from + n, units_wanted);
    }
    let t = Instant::now();
    let store = Store::<Units>::open(&path, common::opts(Codec::Binary, common::GROUPED))
        .map_err(|e| e.to_string())?;
    let open_secs = t.elapsed().as_secs_f64();
    let config = RemoteConfig::new(url.clone(), Policy::Sync);
    let remote = read_ahead(Remote::open(&url).map_err(|e| e.to_string())?)?;
    let t = Instant::now();
    let r = Replication::start(&store, remote.clone(), &config).map_err(|e| e.to_string())?;
    // RUNLOG_COMPARE_RESTORE_ROUNDS=k: k updates more, each its own sync
    // round and chunk (inlining off), so the chain ends in k small chunks:
    // a restore whose round trips, not its bytes, set its time.
    let rounds = env_count("RUNLOG_COMPARE_RESTORE_ROUNDS")?.unwrap_or(0);
    let st = if rounds == 0 {
        r.close()
    } else {
        r.close().map_err(|e| e.to_string())?;
        let small = remote.clone().with_inline_limits(0, 0);
        let r = Replication::start(&store, small, &config).map_err(|e| e.to_string())?;
        for i in 0..rounds {
            r.append(&store, &update(i, units_wanted))
                .map_err(|e| e.to_string())?;
        }
        r.close()
    }
    .map_err(|e| e.to_string())?;
    drop(store);
    eprintln!(
        "remote_restore_1m: local open {open_secs:.3}s; shipped {} bytes in {:.3}s",
        st.and_then(|s| s.bytes).unwrap_or(0),
        t.elapsed().as_secs_f64()
    );
    raw_gets(&remote)?;
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
                "remote_restore_1m: restore {secs:.3}s ({} bytes, {} chunks), then open {:.3}s: {units} units",
                rep.bytes,
                rep.chunks,
                t2.elapsed().as_secs_f64()
            );
            if units != units_wanted {
                return Err(format!("restored {units} units, expected {units_wanted}"));
            }
            drop(s);
            let _ = std::fs::remove_dir_all(&target);
            Ok(1.0 / secs)
        }),
    })
}

/// The transfer alone: every object of the chain fetched with one GET after
/// the other and nothing checked, for the bandwidth the restore's target is
/// reckoned at (run without `RUNLOG_COMPARE_DELAY_MS` for the link's own).
fn raw_gets(remote: &Remote) -> Result<(), String> {
    let m = runlog::remote::latest_manifest(remote)
        .map_err(|e| e.to_string())?
        .ok_or("no manifest after shipping")?;
    let objects: Vec<&str> = m
        .snapshot
        .iter()
        .map(|s| s.object.as_str())
        .chain(m.chunks.iter().map(|c| c.object.as_str()))
        .collect();
    let t = Instant::now();
    let mut bytes = 0u64;
    for o in &objects {
        let b = remote
            .get("bench get", o, u64::MAX)
            .map_err(|e| e.to_string())?
            .ok_or(format!("{o} missing"))?;
        bytes += b.len() as u64;
    }
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "remote_restore_1m: raw GETs of {} objects: {bytes} bytes in {secs:.3}s ({:.0} MB/s)",
        objects.len(),
        bytes as f64 / secs / 1e6
    );
    Ok(())
}

/// The count in environment variable `name`, if set.
fn env_count(name: &str) -> Result<Option<u64>, String> {
    match std::env::var(name) {
        Err(_) => Ok(None),
        Ok(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| format!("{name}={v:?}: expected a count")),
    }
}
