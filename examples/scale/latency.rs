//! Append latency in a long-lived writer, with and without a compaction
//! running beside it: the issue's "p99 append latency during compaction ≤ 2×
//! without it". Runs in a child process (`--child latency ROOT`).

use runlog::run::{Run, UnitStatus};
use serde_json::{Value, json};
use std::time::Instant;

/// Appends made before the compaction starts (the baseline), which also give
/// the compaction a tail to merge.
const BASELINE: usize = 2_000;

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(i).copied().unwrap_or(f64::NAN)
}

fn append(run: &Run, i: usize) -> Result<f64, String> {
    let t = Instant::now();
    run.set_unit(&format!("lat-{i:08}"), UnitStatus::Pending, None, None)
        .map_err(|e| format!("append: {e}"))?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// Baseline appends, then appends while `compact` runs on another thread,
/// until it ends. Latencies in ms; each append is one durable transition
/// (`SyncPolicy::Always`) that adds a unit (a table lookup and an insert).
pub fn measure(run: &Run) -> Result<Value, String> {
    let mut before = Vec::with_capacity(BASELINE);
    for i in 0..BASELINE {
        before.push(append(run, i)?);
    }
    let mut during = Vec::new();
    let (compact_secs, compacted) = std::thread::scope(|s| {
        let c = s.spawn(|| {
            let t = Instant::now();
            let r = run.compact();
            (t.elapsed().as_secs_f64(), r)
        });
        let mut i = BASELINE;
        while !c.is_finished() {
            match append(run, i) {
                Ok(ms) => during.push(ms),
                Err(e) => return (0.0, Err(e)),
            }
            i += 1;
        }
        match c.join() {
            Ok((secs, r)) => (
                secs,
                r.map_err(|e| format!("compact: {e}"))
                    .map(|c| c.snapshot_bytes),
            ),
            Err(_) => (0.0, Err("the compacting thread panicked".to_string())),
        }
    });
    let snapshot_bytes = compacted?;
    let p99_before = percentile(&mut before, 0.99);
    let p99_during = percentile(&mut during, 0.99);
    Ok(json!({
        "appends_before": before.len(),
        "appends_during": during.len(),
        "p50_ms_before": percentile(&mut before, 0.5),
        "p99_ms_before": p99_before,
        "p50_ms_during": percentile(&mut during, 0.5),
        "p99_ms_during": p99_during,
        "p99_ratio": p99_during / p99_before,
        "compact_secs": compact_secs,
        "snapshot_bytes": snapshot_bytes,
    }))
}
