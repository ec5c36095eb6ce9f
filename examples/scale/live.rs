//! The live cycle: a run being worked on. After the build, `batches` rounds
//! of: one `runlog apply` of `batch` random unit transitions (a worker's
//! stream), then a one-shot `runlog unit` and a `status`, each timed as a
//! whole process. The log grows between compactions exactly as in a real run,
//! so these figures show what a process pays while the tail is live, not right
//! after a compaction.
//!
//! The transitions are drawn from a fixed-seed generator, never refused: a
//! unit not yet done goes `in_progress` then `done`; a unit already done gets
//! `done` again (accepted, a record all the same). The reserved unit (the
//! one-shot calls' own) is never drawn.

use crate::build::{RUN_ID, unit_name};
use crate::child;
use crate::measure::{Ctx, median};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;

/// What the live cycle is told to do.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Rounds at least.
    pub batches: usize,
    /// Transitions per `apply` (about: a fresh unit takes two).
    pub batch: usize,
    /// Keep cycling until this many seconds passed, past `batches` if need be.
    pub min_secs: f64,
    /// Then this many one-shot calls in a row, with no `apply` between them:
    /// the tail grows by one-shot records only, so their worst case (the call
    /// that flushes a delta, or merges the chain's newest deltas) is met.
    pub oneshots: usize,
}

/// splitmix64: a fixed-seed stream, the same workload on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The `apply` input of one batch: about `batch` lines over units `0..n-1`.
fn batch_lines(n: u64, batch: usize, rng: &mut Rng, done: &mut HashSet<u64>) -> (Vec<u8>, usize) {
    let mut out = Vec::with_capacity(batch * 64);
    let mut lines = 0usize;
    let pool = n.saturating_sub(1).max(1);
    while lines < batch {
        let i = rng.next() % pool;
        let unit = unit_name(i);
        let statuses: &[&str] = if done.insert(i) {
            &["in_progress", "done"]
        } else {
            &["done"]
        };
        for s in statuses {
            let line = json!({"op": "unit", "unit": unit, "status": s});
            out.extend_from_slice(line.to_string().as_bytes());
            out.push(b'\n');
            lines += 1;
        }
    }
    (out, lines)
}

/// Per-call samples: seconds and peak RSS KiB.
#[derive(Debug, Default)]
struct Calls {
    secs: Vec<f64>,
    rss_kib: Vec<u64>,
    errors: Vec<String>,
}

impl Calls {
    fn push(&mut self, r: Result<child::Finished, String>) {
        match r {
            Ok(f) => {
                self.secs.push(f.secs);
                self.rss_kib.push(f.maxrss_kib);
            }
            Err(e) => self.errors.push(e),
        }
    }

    fn to_json(&self) -> Value {
        let mut s = self.secs.clone();
        s.sort_by(|a, b| a.total_cmp(b));
        let p90 = (!s.is_empty()).then(|| s[((s.len() * 9).div_ceil(10)).saturating_sub(1)]);
        let rss: Vec<f64> = self.rss_kib.iter().map(|&k| k as f64 / 1024.0).collect();
        json!({
            "calls": self.secs.len(),
            "secs": median(&self.secs),
            "secs_p90": p90,
            "secs_max": s.last(),
            "secs_all": self.secs,
            "rss_mib": median(&rss),
            "rss_mib_max": rss.iter().copied().reduce(f64::max),
            "failed": self.errors.len(),
            "error": self.errors.first(),
        })
    }
}

/// Bytes of every file in the run's directory, and how many snapshot files.
fn run_dir_bytes(root: &Path) -> Result<(u64, u64), String> {
    let dir = root.join(runlog::run::RUNS_SUBDIR).join(RUN_ID);
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("list {}: {e}", dir.display()))?;
    let (mut bytes, mut snaps) = (0u64, 0u64);
    for e in entries.flatten() {
        let meta = e
            .metadata()
            .map_err(|err| format!("stat {:?}: {err}", e.file_name()))?;
        if meta.is_file() {
            // Allocated bytes, not the length: a segment's preallocation counts.
            bytes += std::os::unix::fs::MetadataExt::blocks(&meta) * 512;
            let name = e.file_name().to_string_lossy().into_owned();
            snaps += u64::from(name.ends_with(runlog::engine::format::SNAPSHOT_SUFFIX));
        }
    }
    Ok((bytes, snaps))
}

/// One `runlog apply` of a batch; checks that every line was acknowledged.
fn apply_batch(ctx: &Ctx, input: Vec<u8>, lines: usize) -> Result<child::Finished, String> {
    let f =
        child::run_with_input(&mut ctx.runlog(&["apply", RUN_ID]), input)?.ok("runlog apply")?;
    if f.stderr.contains("apply: line") {
        return Err(format!("runlog apply refused a line: {}", f.stderr.trim()));
    }
    let kept_all = f.stdout_bytes == f.stdout.len() as u64;
    let acks = f.stdout.iter().filter(|&&b| b == b'\n').count();
    if kept_all && acks != lines {
        return Err(format!("runlog apply acknowledged {acks} of {lines} lines"));
    }
    Ok(f)
}

/// The live cycle on the run under `ctx.root` of `n` units, whose build left
/// units `0..built_done` done (the build's tail, `Pool` order).
pub fn cycle(ctx: &Ctx, n: u64, built_done: u64, plan: Plan) -> Value {
    let mut rng = Rng(0x5EED ^ n);
    let mut done: HashSet<u64> = (0..built_done.min(n.saturating_sub(1))).collect();
    let reserved = unit_name(n - 1);
    let (mut apply, mut oneshot, mut status) =
        (Calls::default(), Calls::default(), Calls::default());
    let mut transitions = 0u64;
    let started = Instant::now();
    let mut round = 0usize;
    while round < plan.batches || started.elapsed().as_secs_f64() < plan.min_secs {
        round += 1;
        let (input, lines) = batch_lines(n, plan.batch, &mut rng, &mut done);
        let r = apply_batch(ctx, input, lines);
        if r.is_ok() {
            transitions += lines as u64;
        }
        apply.push(r);
        let unit = ["unit", RUN_ID, reserved.as_str(), "in_progress"];
        oneshot.push(child::run(&mut ctx.runlog(&unit)).and_then(|f| f.ok("runlog unit")));
        status.push(
            child::run(&mut ctx.runlog(&["status", RUN_ID])).and_then(|f| f.ok("runlog status")),
        );
        if apply.errors.len() + oneshot.errors.len() + status.errors.len() > 3 {
            break; // failing: report what was measured, not 30 copies of one error
        }
    }
    let cycle_secs = started.elapsed().as_secs_f64();
    let mut only = Calls::default();
    for _ in 0..plan.oneshots {
        let unit = ["unit", RUN_ID, reserved.as_str(), "in_progress"];
        only.push(child::run(&mut ctx.runlog(&unit)).and_then(|f| f.ok("runlog unit")));
        if only.errors.len() > 3 {
            break;
        }
    }
    let disk = run_dir_bytes(ctx.root);
    json!({
        "rounds": round,
        "batch": plan.batch,
        "transitions": transitions,
        "secs": cycle_secs,
        "apply": apply.to_json(),
        "oneshot": oneshot.to_json(),
        "status": status.to_json(),
        "oneshots_in_a_row": only.to_json(),
        "disk_bytes": disk.as_ref().ok().map(|d| d.0),
        "disk_bytes_per_unit": disk.as_ref().ok().map(|d| d.0 as f64 / n as f64),
        "snapshot_files": disk.as_ref().ok().map(|d| d.1),
        "disk_error": disk.err(),
    })
}
