//! Proves eight one-shot CLI writers (FORMAT.md §5.8: each lets the writer
//! lock go after its `pwrite` and shares the fdatasync through `SYNC` and
//! `SHARED`), about one call in four SIGKILLed at a random moment, beside two
//! readers, lose no acknowledged transition: every call that printed `seq N`
//! and exited 0 is in the log at seq N, no two acknowledgements share a seq,
//! the run verifies clean, and the store the killed writers left is writable.
//! `RUNLOG_KILL9_UNITS` sets the number of units (default 1600; two calls each).
//!
//! And the same checks for thirty-two writers, none killed, over a history
//! long enough for their compactions to write and merge delta tables
//! (FORMAT.md §14) while other writers replay without the lock: the run found
//! unreadable once, when a catch-up missed a compaction's new snapshot
//! (`bug_one_shot_catch_up` in the engine tests).
//! `RUNLOG_WRITERS32_UNITS` sets its units (default 2000; two calls each).
use crate::cli_support;
use cli_support::*;
use runlog::engine::sim::SimRng;
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const READERS: usize = 2;
const RUN: &str = "r";

/// How one `unit RUN UNIT STATUS` call ended.
#[derive(Debug, Clone)]
enum Outcome {
    /// Exit 0 and `seq N` on stdout: durable.
    Acked(u64),
    /// Died of our SIGKILL.
    Killed,
    /// Exit 1, with this message on stderr (e.g. a sync refused after a kill).
    Failed(String),
}

#[derive(Debug, Clone)]
struct Call {
    unit: String,
    status: &'static str,
    /// Whether a SIGKILL was sent (it may have come after the exit).
    signalled: bool,
    outcome: Outcome,
}

/// Runs `unit RUN unit status` as its own process; when `kill_after` is given,
/// SIGKILLs it after that delay (a call that finished first counts as it ended).
fn one_call(
    root: &std::path::Path,
    unit: &str,
    status: &'static str,
    kill_after: Option<Duration>,
) -> Call {
    let mut child = cmd(root)
        .args(["unit", RUN, unit, status, "--lock-timeout", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn runlog");
    if let Some(delay) = kill_after {
        std::thread::sleep(delay);
        // SIGKILL; an already exited (unreaped) child is not an error.
        child.kill().expect("kill runlog");
    }
    let o = child.wait_with_output().expect("wait for runlog");
    let what = format!("unit {RUN} {unit} {status}");
    let outcome = match (o.status.code(), o.status.signal()) {
        (Some(0), _) => {
            let stdout = String::from_utf8_lossy(&o.stdout);
            let seq = stdout
                .lines()
                .find_map(|l| l.strip_prefix("seq "))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or_else(|| panic!("{what}: exit 0 without `seq N`: {}", text(&o)));
            Outcome::Acked(seq)
        }
        (Some(1), _) => {
            let msg = String::from_utf8_lossy(&o.stderr).trim().to_string();
            assert!(!msg.is_empty(), "{what}: exit 1 with nothing on stderr");
            Outcome::Failed(msg)
        }
        (None, Some(libc::SIGKILL)) if kill_after.is_some() => Outcome::Killed,
        (code, signal) => panic!(
            "{what}: exit code {code:?}, signal {signal:?} (only 0, 1 or our SIGKILL \
             are allowed; 2 would refuse a legal transition): {}",
            text(&o)
        ),
    };
    Call {
        unit: unit.to_string(),
        status,
        signalled: kill_after.is_some(),
        outcome,
    }
}

/// The run document's unit statuses (`get RUN --json`).
fn statuses(root: &std::path::Path) -> BTreeMap<String, String> {
    let doc = stdout_json(&runlog(root, &["get", RUN, "--json"]));
    doc["units"]
        .as_object()
        .unwrap_or_else(|| panic!("no units in {doc}"))
        .iter()
        .map(|(name, u)| (name.clone(), u["status"].as_str().unwrap().to_string()))
        .collect()
}

/// `dump RUN`: each record's seq → (unit, status) for unit changes, `None` else.
fn dump_units(root: &std::path::Path) -> BTreeMap<u64, Option<(String, String)>> {
    let mut out = BTreeMap::new();
    for line in ok(root, &["dump", RUN]).lines() {
        let rec: serde_json::Value = serde_json::from_str(line).unwrap();
        let seq = rec["seq"].as_u64().unwrap();
        let u = &rec["t"]["change"]["unit"];
        let change = u["unit"]
            .as_str()
            .map(|n| (n.to_string(), u["status"].as_str().unwrap().to_string()));
        assert!(out.insert(seq, change).is_none(), "seq {seq} twice in dump");
    }
    out
}

fn units_from_env(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

#[test]
fn eight_one_shot_writers_killed_at_random_lose_no_acknowledged_transition() {
    let units = units_from_env("RUNLOG_KILL9_UNITS", 1600);
    soak("cli_many_writers_kill9", 8, units, Some(4));
}

#[test]
fn thirty_two_one_shot_writers_merging_delta_tables_keep_the_run_readable() {
    let units = units_from_env("RUNLOG_WRITERS32_UNITS", 2000);
    soak("cli_many_writers_32", 32, units, None);
}

/// `writers` one-shot writers over `units` units (each `in_progress`, then
/// `done`), one call in `kill_one_in` SIGKILLed at a random moment (`None`:
/// none), beside two readers; then every check of the module's doc.
fn soak(name: &str, writers: usize, units: usize, kill_one_in: Option<u64>) {
    let started = Instant::now();
    assert!(units >= writers, "{name}: at least {writers} units");
    let d = tempfile::tempdir().unwrap();
    let root = d.path().to_path_buf();
    let names: Vec<String> = (0..units).map(|i| format!("u{i}")).collect();
    init_run(&root, RUN, &names);

    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let (root, stop, reads) = (root.clone(), stop.clone(), reads.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    for args in [["status", RUN, "--json"], ["get", RUN, "--json"]] {
                        let o = runlog(&root, &args);
                        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
                        let v = stdout_json(&o);
                        assert_eq!(v["id"], RUN, "{args:?}: {v}");
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();

    let writer_threads: Vec<_> = (0..writers)
        .map(|w| {
            let root = root.clone();
            std::thread::spawn(move || {
                let mut rng = SimRng::new(0x6B69_6C6C_3921 ^ ((w as u64) << 48));
                let mut calls = vec![];
                for i in (w..units).step_by(writers) {
                    let unit = format!("u{i}");
                    for status in ["in_progress", "done"] {
                        let kill = kill_one_in
                            .filter(|k| rng.next_u64().is_multiple_of(*k))
                            .map(|_| Duration::from_micros(rng.next_u64() % 4_001));
                        calls.push(one_call(&root, &unit, status, kill));
                    }
                }
                calls
            })
        })
        .collect();
    let joined: Vec<_> = writer_threads.into_iter().map(|w| w.join()).collect();
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    let calls: Vec<Call> = joined
        .into_iter()
        .flat_map(|j| j.unwrap_or_else(|p| std::panic::resume_unwind(p)))
        .collect();

    let acked = |c: &&Call| matches!(c.outcome, Outcome::Acked(_));
    let n_acked = calls.iter().filter(acked).count();
    let n_killed = calls
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Killed))
        .count();
    let n_signalled = calls.iter().filter(|c| c.signalled).count();
    let failures: Vec<String> = calls
        .iter()
        .filter_map(|c| match &c.outcome {
            Outcome::Failed(m) => Some(format!("unit {} {}: {m}", c.unit, c.status)),
            _ => None,
        })
        .collect();
    eprintln!(
        "{name}: {writers} writers, {units} units, {} calls, {n_acked} acknowledged, \
         {n_killed} killed (of {n_signalled} sent SIGKILL), {} failed with exit 1, {} reads",
        calls.len(),
        failures.len(),
        reads.load(Ordering::Relaxed)
    );
    for f in &failures {
        eprintln!("  exit 1: {f}");
    }
    assert!(
        n_acked > 0,
        "no call was acknowledged: the test proves nothing"
    );
    if kill_one_in.is_some() {
        assert!(n_killed > 0, "no call was killed: the test proves nothing");
    }

    // The log as the killed writers left it: a torn tail is only possible
    // from a kill during the very last `pwrite`, which no later open cut.
    let o = runlog(&root, &["verify", RUN, "--json"]);
    assert_eq!(o.status.code(), Some(0), "verify: {}", text(&o));
    let v = stdout_json(&o);
    assert!(
        v["integrity"] == "clean" || v["integrity"] == "torn_tail",
        "verify: {v}"
    );
    if v["integrity"] != "clean" {
        eprintln!("{name}: verify before the last call: {v}");
    }

    // Every acknowledged call is in the log at the seq it printed, once (a
    // compaction may have moved the oldest records into a snapshot: those the
    // document checks below). Returns how many were found in the log, and its
    // first seq.
    let check = |root: &std::path::Path| {
        let dump = dump_units(root);
        let first = *dump.keys().next().expect("an empty dump");
        let last = *dump.keys().next_back().unwrap();
        assert_eq!(
            dump.len() as u64,
            last - first + 1,
            "a gap in the log's seqs {first}..={last}"
        );
        let mut seen = BTreeMap::new();
        for c in calls.iter().filter(acked) {
            let Outcome::Acked(seq) = c.outcome else {
                unreachable!()
            };
            if let Some(other) = seen.insert(seq, c) {
                panic!("seq {seq} acknowledged twice: {other:?} and {c:?}");
            }
            assert!(
                seq <= last,
                "acknowledged {c:?} is past the log's end {last}"
            );
            if seq < first {
                continue;
            }
            assert_eq!(
                dump.get(&seq),
                Some(&Some((c.unit.clone(), c.status.to_string()))),
                "acknowledged {c:?} is not the log's record at seq {seq}"
            );
        }
        // And the document agrees with what was acknowledged per unit.
        let now = statuses(root);
        assert_eq!(now.len(), units, "units: {now:?}");
        for name in &names {
            let acked_status = |s: &str| {
                calls
                    .iter()
                    .any(|c| &c.unit == name && c.status == s && acked(&c))
            };
            let st = now[name].as_str();
            let allowed: &[&str] = if acked_status("done") {
                &["done"]
            } else if acked_status("in_progress") {
                &["in_progress", "done"]
            } else {
                &["pending", "in_progress", "done"]
            };
            assert!(
                allowed.contains(&st),
                "{name} is {st}, allowed {allowed:?}; its calls: {:?}",
                calls.iter().filter(|c| &c.unit == name).collect::<Vec<_>>()
            );
        }
        (seen.range(first..).count(), first)
    };
    let (in_log, first) = check(&root);
    eprintln!(
        "{name}: {in_log} acknowledged calls checked against the log \
         (its records from seq {first}; older ones compacted)"
    );

    // The store the killed writers left is writable, and stays consistent.
    let last = ok(&root, &["unit", RUN, "u0", "done"]);
    let seq: u64 = last
        .trim()
        .strip_prefix("seq ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("last call printed {last:?}"));
    check(&root);
    assert_eq!(statuses(&root)["u0"], "done");
    let v = ok_json(&root, &["verify", RUN]);
    assert_eq!(v["integrity"], "clean", "verify after the last call: {v}");
    assert_eq!(v["lastSeq"], seq, "verify after the last call: {v}");
    eprintln!("{name}: {:.1} s", started.elapsed().as_secs_f64());
}
