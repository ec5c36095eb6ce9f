//! Proves that kill -9 of a sync writer in the middle of its uploads to the
//! Ceph gateway, four appenders keeping rounds in flight, loses nothing it
//! acknowledged: the restored run holds every
//! value the writer printed as acknowledged, and is a prefix of its local log.
//! Skips without the gateway; fails instead when RUNLOG_REQUIRE_S3=1.
#![cfg(feature = "remote")]

use crate::remote_support;

use remote_support::{gateway, open, read, s3_url};
use runlog::engine::RealFs;
use runlog::remote::{Policy, Remote, RemoteConfig, Replication, restore};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

const CHILD_ENV: &str = "RUNLOG_REMOTE_KILL_CHILD";

/// The writer, run in a child process: appends forever, printing each ack.
/// Ignored, so a plain run lists it as ignored rather than as a pass.
#[test]
#[ignore = "the child side of ceph_kill_9_during_upload_loses_nothing_acknowledged; runs only when re-executed by it"]
fn child_writer() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        crate::skip_support::child_only("child_writer", CHILD_ENV);
    };
    let (dir, url) = spec.split_once('|').unwrap();
    let config = RemoteConfig::new(url, Policy::Sync);
    let r_local = open(std::path::Path::new(dir));
    let r = Replication::start(&r_local, Remote::open(url).unwrap(), &config).unwrap();
    // Four appenders: their rounds are in flight together when the kill lands.
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (r, r_local) = (&r, &r_local);
            s.spawn(move || {
                for i in 1.. {
                    let v = t * 1_000_000_000 + i;
                    r.append(r_local, &v).unwrap();
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "acked {v}").unwrap();
                    out.flush().unwrap();
                }
            });
        }
    });
}

#[test]
fn ceph_kill_9_during_upload_loses_nothing_acknowledged() {
    let Some((bucket, _gateway)) = gateway("ceph_kill_9") else {
        return;
    };
    for (i, kill_after) in [1u64, 7, 20, 33].into_iter().enumerate() {
        let url = s3_url(&bucket, &format!("kill-{i}"));
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a");
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                // libtest's name for `child_writer`: the module path without the crate.
                &format!(
                    "{}::child_writer",
                    module_path!().split_once("::").unwrap().1
                ),
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, format!("{}|{url}", dir.display()))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut acked = vec![];
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        while (acked.len() as u64) < kill_after {
            let line = lines.next().expect("the child stopped early").unwrap();
            if let Some(v) = line.strip_prefix("acked ") {
                acked.push(v.parse::<u64>().unwrap());
            }
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        // Acks the child printed before it died.
        for line in lines.map_while(Result::ok) {
            if let Some(v) = line.strip_prefix("acked ") {
                acked.push(v.parse::<u64>().unwrap());
            }
        }
        let target = tmp.path().join("restored");
        restore(&RealFs, &Remote::open(&url).unwrap(), &target, None).unwrap();
        let restored = read(&target);
        for v in &acked {
            assert!(
                restored.contains(v),
                "kill after {kill_after}: acknowledged {v} lost"
            );
        }
        assert!(read(&dir).starts_with(&restored), "kill after {kill_after}");

        // The next process on the same directory claims an epoch of its own
        // over whatever the dead one left in flight, and ships the rest.
        let held = RemoteConfig::read(&RealFs, &dir).unwrap().unwrap();
        let local = open(&dir);
        let r = Replication::start(&local, Remote::open(&url).unwrap(), &held).unwrap();
        assert!(r.status().unwrap().epoch > held.epoch);
        r.append(&local, &7).unwrap();
        r.close().unwrap();
        let again = tmp.path().join("again");
        restore(&RealFs, &Remote::open(&url).unwrap(), &again, None).unwrap();
        assert_eq!(read(&again), read(&dir), "kill after {kill_after}");
    }
}
