//! `--atomic`: the contender a checkpoint store replaces. Each checkpoint
//! changes one unit of an N-unit run document (the same `RunDoc` the CLI
//! prints) and rewrites the whole file atomically: write a temp file, fsync it,
//! rename it over the old one, fsync the directory.

use crate::build::{RUN_ID, unit_name};
use crate::measure::median;
use runlog::engine::Machine;
use runlog::run::{Change, InitSpec, RunDoc, RunMachine, Transition, UnitStatus};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::time::Instant;

fn apply(doc: &mut RunDoc, change: Change) -> Result<(), String> {
    let t = Transition {
        at: "2030-01-02T03:04:05.000Z".into(),
        change,
    };
    RunMachine::apply(doc, &t).map_err(|e| e.to_string())
}

/// The document of a run with `n` pending units.
fn document(n: u64) -> Result<RunDoc, String> {
    let mut doc = RunDoc::default();
    apply(
        &mut doc,
        Change::Init(InitSpec {
            id: RUN_ID.into(),
            task: format!("scale: {n} units"),
            ..InitSpec::default()
        }),
    )?;
    for i in 0..n {
        apply(
            &mut doc,
            crate::build::unit_change(&unit_name(i), UnitStatus::Pending),
        )?;
    }
    Ok(doc)
}

/// Writes `bytes` to `dir/name` atomically and durably.
fn rewrite(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    let tmp = dir.join(format!("{name}.tmp"));
    let dst = dir.join(name);
    let mut f =
        std::fs::File::create(&tmp).map_err(|e| format!("create {}: {e}", tmp.display()))?;
    f.write_all(bytes)
        .map_err(|e| format!("write {}: {e}", tmp.display()))?;
    // The data must be durable before the rename makes it the document.
    f.sync_all()
        .map_err(|e| format!("fsync {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &dst).map_err(|e| format!("rename to {}: {e}", dst.display()))?;
    // And the rename itself durable before the checkpoint is acknowledged.
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("fsync directory {}: {e}", dir.display()))
}

/// `reps` checkpoints of the atomic rewrite of an `n`-unit document in `dir`:
/// the median seconds per checkpoint and the document's size.
pub fn measure(dir: &Path, n: u64, reps: usize) -> Result<Value, String> {
    let mut doc = document(n)?;
    let mut buf = Vec::new();
    let mut secs = Vec::new();
    for rep in 0..reps.max(1) as u64 {
        let unit = unit_name(rep.wrapping_mul(7919) % n);
        let started = Instant::now();
        apply(
            &mut doc,
            crate::build::unit_change(&unit, UnitStatus::InProgress),
        )?;
        buf.clear();
        serde_json::to_writer(&mut buf, &doc).map_err(|e| format!("serialize: {e}"))?;
        rewrite(dir, "run.json", &buf)?;
        secs.push(started.elapsed().as_secs_f64());
    }
    Ok(json!({
        "secs": median(&secs),
        "reps": secs.len(),
        "document_bytes": buf.len(),
    }))
}
