//! The measurements of one run size, each a child process: opening the run for
//! writing, a one-shot `runlog unit`, `status`, `apply` to its first ack,
//! `resume`, compaction, and eight one-shot writers at once beside the bare
//! process floor. Each returns its failure as a value, never panics.

use crate::build::{Pool, RUN_ID};
use crate::child::{self, Finished};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

/// What every measurement needs: the `runlog` binary, this example (for its
/// child modes) and the runs root.
pub struct Ctx<'a> {
    pub bin: &'a Path,
    pub me: &'a Path,
    pub root: &'a Path,
}

impl Ctx<'_> {
    /// `runlog --dir ROOT args…`, with no runs root or key leaking in from the environment.
    pub fn runlog(&self, args: &[&str]) -> Command {
        let mut c = Command::new(self.bin);
        c.arg("--dir")
            .arg(self.root)
            .args(args)
            .env_remove("RUNLOG_DIR")
            .env_remove("RUNLOG_KEY_FILE");
        c
    }

    /// This example in a child mode on the runs root.
    pub fn child(&self, mode: &str) -> Command {
        let mut c = Command::new(self.me);
        c.args(["--child", mode]).arg(self.root);
        c
    }
}

/// Samples of one per-call measurement.
#[derive(Debug, Default)]
pub struct Samples {
    pub secs: Vec<f64>,
    pub rss_kib: Vec<u64>,
    pub stdout_bytes: u64,
    pub errors: Vec<String>,
}

pub fn median(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(s[n / 2]),
        _ => Some((s[n / 2 - 1] + s[n / 2]) / 2.0),
    }
}

impl Samples {
    /// Records one call: its time, RSS and output size, or why it failed.
    pub fn push(&mut self, r: Result<(f64, Finished), String>) {
        match r {
            Ok((secs, f)) => {
                self.secs.push(secs);
                self.rss_kib.push(f.maxrss_kib);
                self.stdout_bytes = f.stdout_bytes;
            }
            Err(e) => self.errors.push(e),
        }
    }

    pub fn median_secs(&self) -> Option<f64> {
        median(&self.secs)
    }

    pub fn median_rss_mib(&self) -> Option<f64> {
        let v: Vec<f64> = self.rss_kib.iter().map(|&k| k as f64 / 1024.0).collect();
        median(&v)
    }

    pub fn to_json(&self) -> Value {
        let min = self.secs.iter().copied().reduce(f64::min);
        let max = self.secs.iter().copied().reduce(f64::max);
        json!({
            "secs": self.median_secs(),
            "secs_min": min,
            "secs_max": max,
            "rss_mib": self.median_rss_mib(),
            "stdout_bytes": self.stdout_bytes,
            "ok": self.secs.len(),
            "failed": self.errors.len(),
            "error": self.errors.first(),
        })
    }
}

/// The `units` a child mode reports, checked against what was built.
fn check_units(f: &Finished, n: u64) -> Result<(), String> {
    let v: Value = serde_json::from_slice(&f.stdout)
        .map_err(|e| format!("child output {:?}: {e}", String::from_utf8_lossy(&f.stdout)))?;
    match v["units"].as_u64() {
        Some(u) if u == n => Ok(()),
        other => Err(format!("child saw {other:?} units, built {n}")),
    }
}

/// A child that opens the run for writing and exits.
pub fn open(ctx: &Ctx, n: u64) -> Result<(f64, Finished), String> {
    let f = child::run(&mut ctx.child("open"))?.ok("child open")?;
    check_units(&f, n)?;
    Ok((f.secs, f))
}

/// `runlog unit scale UNIT in_progress`.
pub fn oneshot(ctx: &Ctx, unit: &str) -> Result<(f64, Finished), String> {
    let f =
        child::run(&mut ctx.runlog(&["unit", RUN_ID, unit, "in_progress"]))?.ok("runlog unit")?;
    Ok((f.secs, f))
}

/// Any read command, e.g. `status scale`, `--json resume scale`.
pub fn reader(ctx: &Ctx, args: &[&str]) -> Result<(f64, Finished), String> {
    let f = child::run(&mut ctx.runlog(args))?.ok(&format!("runlog {}", args.join(" ")))?;
    Ok((f.secs, f))
}

/// `runlog apply scale`: spawn to the ack of one `in_progress` line.
pub fn apply_first_ack(ctx: &Ctx, unit: &str) -> Result<(f64, Finished), String> {
    let line = json!({"op": "unit", "unit": unit, "status": "in_progress"}).to_string();
    let (secs, ack, f) = child::first_ack(&mut ctx.runlog(&["apply", RUN_ID]), &line)?;
    let f = f.ok("runlog apply")?;
    let seq = serde_json::from_str::<Value>(&ack)
        .ok()
        .and_then(|v| v["seq"].as_u64());
    match seq {
        Some(_) => Ok((secs, f)),
        None => Err(format!("runlog apply: ack {ack:?} is not {{\"seq\":N}}")),
    }
}

/// The fsyncs of one `runlog unit scale UNIT in_progress` (`None` without strace).
pub fn oneshot_fsyncs(ctx: &Ctx, unit: &str, tmp: &Path) -> Option<Result<u64, String>> {
    if !child::strace_present() {
        return None;
    }
    let root = ctx.root.to_string_lossy();
    let args = ["--dir", &root, "unit", RUN_ID, unit, "in_progress"];
    Some(child::count_fsyncs(ctx.bin, &args, tmp))
}

/// A child that opens the run and compacts it: (seconds, peak RSS MiB, snapshot bytes).
pub fn compaction(ctx: &Ctx, n: u64) -> Result<Value, String> {
    let f = child::run(&mut ctx.child("compact"))?.ok("child compact")?;
    check_units(&f, n)?;
    let v: Value = serde_json::from_slice(&f.stdout).map_err(|e| e.to_string())?;
    Ok(json!({
        "secs": f.secs,
        "compact_secs": v["compact_secs"],
        "snapshot_bytes": v["snapshot_bytes"],
        "rss_mib": f.rss_mib(),
    }))
}

/// Spawns `jobs` (each a list of argument lists run in order) over `writers`
/// threads, job j on thread j % writers; returns (calls ok, first error, secs).
pub fn spawn_all(ctx: &Ctx, writers: usize, jobs: &[Vec<Vec<String>>]) -> (u64, Vec<String>, f64) {
    let ok = Mutex::new(0u64);
    let errors = Mutex::new(Vec::new());
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..writers {
            let (ok, errors) = (&ok, &errors);
            s.spawn(move || {
                for job in jobs.iter().skip(t).step_by(writers.max(1)) {
                    for args in job {
                        let args: Vec<&str> = args.iter().map(String::as_str).collect();
                        let r = ctx.runlog(&args).output();
                        match r {
                            Ok(o) if o.status.success() => {
                                *ok.lock().unwrap_or_else(|p| p.into_inner()) += 1
                            }
                            Ok(o) => {
                                errors
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .push(format!(
                                        "runlog {}: {}: {}",
                                        args.join(" "),
                                        o.status,
                                        String::from_utf8_lossy(&o.stderr).trim()
                                    ))
                            }
                            Err(e) => errors
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .push(format!("spawn runlog: {e}")),
                        }
                    }
                }
            });
        }
    });
    let secs = started.elapsed().as_secs_f64();
    let ok = ok.into_inner().unwrap_or_else(|p| p.into_inner());
    let errors = errors.into_inner().unwrap_or_else(|p| p.into_inner());
    (ok, errors, secs)
}

/// `writers` threads spawning one-shot `runlog unit` calls (`spawns` in all:
/// each unit `in_progress` then `done`), then the same number of `runlog
/// --version` spawns as the floor of spawning a process at all.
pub fn concurrent(ctx: &Ctx, writers: usize, spawns: u64, pool: &mut Pool) -> Value {
    let jobs: Vec<Vec<Vec<String>>> = (0..spawns / 2)
        .map(|_| {
            let (unit, statuses) = pool.next_pair();
            statuses
                .iter()
                .map(|s| vec!["unit".into(), RUN_ID.into(), unit.clone(), s.to_string()])
                .collect()
        })
        .collect();
    let (ok, errors, secs) = spawn_all(ctx, writers, &jobs);
    let version: Vec<Vec<Vec<String>>> = (0..spawns / 2)
        .map(|_| vec![vec!["--version".to_string()]; 2])
        .collect();
    let (v_ok, v_errors, v_secs) = spawn_all(ctx, writers, &version);
    let rate = ok as f64 / secs;
    let floor = v_ok as f64 / v_secs;
    json!({
        "writers": writers,
        "spawns": spawns,
        "ok": ok,
        "failed": errors.len(),
        "secs": secs,
        "checkpoints_per_sec": rate,
        "version_ok": v_ok,
        "version_secs": v_secs,
        "version_per_sec": floor,
        "ratio_to_floor": if floor > 0.0 { json!(rate / floor) } else { Value::Null },
        "error": errors.first().or(v_errors.first()),
    })
}
