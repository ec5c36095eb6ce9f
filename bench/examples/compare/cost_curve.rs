//! `--cost-curve`: what one durable checkpoint costs as the run grows, for runlog
//! (append one transition) and for the atomic rewrite of a JSON run document.
//! `scripts/plot_checkpoint_cost.py` draws the result.

use crate::common::{self, Units, update};
use crate::contenders::{rewrite_checkpoint, run_doc, timed, timed_one};
use crate::{Config, machine};
use runlog::engine::{Codec, Store, SyncPolicy, format};
use serde_json::{Value, json};
use std::time::Instant;

const SIZES: [u64; 4] = [1_000, 10_000, 100_000, 1_000_000];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn point(units: u64, cfg: &Config) -> Result<Value, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("store");
    common::build_state_store(&path, Codec::Binary, units);
    let store = Store::<Units>::open(&path, common::opts(Codec::Binary, SyncPolicy::Always))
        .map_err(|e| e.to_string())?;
    let mut append = Vec::new();
    let mut snapshot = Vec::new();
    let mut snapshot_bytes = 0u64;
    let mut rewrite = Vec::new();
    let mut doc = run_doc(units);
    let mut buf = Vec::new();
    let mut k = 0u64;
    for _ in 0..cfg.reps {
        let st = &store;
        let rate = timed(1, cfg.secs, |_| {
            Ok(Box::new(move |i: u64| {
                st.append(&update(i.wrapping_mul(7919) % units, units))
                    .map(drop)
                    .map_err(|e| e.to_string())
            }))
        })?;
        append.push(1.0 / rate);
        let started = Instant::now();
        let c = store.compact().map_err(|e| e.to_string())?;
        snapshot.push(started.elapsed().as_secs_f64());
        snapshot_bytes = c.snapshot_bytes;
        let d = dir.path();
        let (doc, buf, k) = (&mut doc, &mut buf, &mut k);
        let rate = timed_one(cfg.secs, |_| {
            *k += 1;
            rewrite_checkpoint(d, doc, *k, buf)
        })?;
        rewrite.push(1.0 / rate);
    }
    // Bytes one transition adds to the log (frame header + payload + crc).
    let mut payload = Vec::new();
    Codec::Binary.encode(&update(0, units), &mut payload)?;
    let record_bytes =
        (format::RECORD_HEADER_LEN + payload.len() + format::RECORD_TRAILER_LEN) as u64;
    // The default auto-compaction snapshots once the log since the last snapshot
    // exceeds max(64 MiB, 1.0 x snapshot size): spread that snapshot over the
    // transitions that triggered it.
    let every = (64u64 << 20).max(snapshot_bytes) as f64 / record_bytes as f64;
    let (append, snapshot, rewrite) = (median(append), median(snapshot), median(rewrite));
    eprintln!(
        "{units:>8} units: append {:.3} ms, snapshot {:.1} ms ({snapshot_bytes} B), json rewrite {:.2} ms ({} B)",
        append * 1e3,
        snapshot * 1e3,
        rewrite * 1e3,
        buf.len()
    );
    Ok(json!({
        "units": units,
        "runlog_append_secs": append,
        "runlog_snapshot_secs": snapshot,
        "runlog_snapshot_bytes": snapshot_bytes,
        "runlog_record_bytes": record_bytes,
        "runlog_amortized_secs": append + snapshot / every,
        "json_rewrite_secs": rewrite,
        "json_document_bytes": buf.len(),
    }))
}

pub fn run(cfg: &Config) -> Value {
    let points: Vec<Value> = SIZES
        .iter()
        .map(|&n| point(n, cfg).unwrap_or_else(|e| json!({"units": n, "error": e})))
        .collect();
    json!({
        "machine": machine(),
        "reps": cfg.reps,
        "secs_per_rep": cfg.secs.as_secs_f64(),
        "points": points,
    })
}

pub fn print(out: &Value) {
    println!(
        "| {:>9} | {:>14} | {:>18} | {:>14} | {:>16} |",
        "units", "runlog append", "+ amortized snap", "snapshot", "json rewrite"
    );
    for p in out["points"].as_array().into_iter().flatten() {
        let ms = |k: &str| {
            p[k].as_f64()
                .map_or("n/a".into(), |v| format!("{:.3} ms", v * 1e3))
        };
        println!(
            "| {:>9} | {:>14} | {:>18} | {:>14} | {:>16} |",
            p["units"],
            ms("runlog_append_secs"),
            ms("runlog_amortized_secs"),
            ms("runlog_snapshot_secs"),
            ms("json_rewrite_secs")
        );
    }
}
