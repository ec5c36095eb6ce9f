//! Building the measured run through the library: `init`, N pending units in
//! batches (no fsync per batch: a bulk load, synced once at the end), a
//! compaction, then a tail of unit transitions so every measurement opens a
//! snapshot plus a log tail, as a run in progress would.

use runlog::engine::{Codec, CompactionPolicy, SyncPolicy};
use runlog::run::{Change, InitSpec, Runs, UnitStatus};
use std::path::Path;
use std::time::Instant;

/// The id of the measured run.
pub const RUN_ID: &str = "scale";

/// A unit's name: `u` and ten digits (`u0000000042`), so every name has the same length.
pub fn unit_name(i: u64) -> String {
    format!("u{i:010}")
}

/// Hands out units for transitions. Units `0..n-1` are a pool taken in order:
/// a fresh unit goes `in_progress` then `done`, as a worker would move it. Once
/// the pool is used up (only at small N) units are reused with `done` twice,
/// which the rules allow (done is never demoted; done again is accepted).
/// Unit `n-1` is never handed out: the per-call measurements set it
/// `in_progress` again and again, which needs it never to be done.
#[derive(Debug)]
pub struct Pool {
    n: u64,
    next: u64,
}

impl Pool {
    /// A pool over `n` units (`n` ≥ 2).
    pub fn new(n: u64) -> Pool {
        Pool { n, next: 0 }
    }

    /// A pool over `n` units whose first `next` handouts are already made (a
    /// child process continuing the parent's pool).
    pub fn at(n: u64, next: u64) -> Pool {
        Pool { n, next }
    }

    /// How many handouts were made (to continue the pool elsewhere).
    pub fn next_index(&self) -> u64 {
        self.next
    }

    /// The unit the repeated `in_progress` calls use.
    pub fn reserved(&self) -> String {
        unit_name(self.n.saturating_sub(1))
    }

    /// The next unit and the two statuses it goes through.
    pub fn next_pair(&mut self) -> (String, [UnitStatus; 2]) {
        let pool = self.n.saturating_sub(1).max(1);
        let i = self.next;
        self.next += 1;
        if i < pool {
            (unit_name(i), [UnitStatus::InProgress, UnitStatus::Done])
        } else {
            (unit_name(i % pool), [UnitStatus::Done, UnitStatus::Done])
        }
    }

    /// `count` transitions (rounded up to a pair) as changes, in order.
    pub fn changes(&mut self, count: u64) -> Vec<Change> {
        let mut out = Vec::with_capacity(count as usize + 1);
        while (out.len() as u64) < count {
            let (unit, statuses) = self.next_pair();
            for status in statuses {
                out.push(unit_change(&unit, status));
            }
        }
        out
    }
}

/// A `unit` change with no note and no deps.
pub fn unit_change(unit: &str, status: UnitStatus) -> Change {
    Change::Unit {
        unit: unit.to_string(),
        status,
        note: None,
        deps: None,
    }
}

fn runs(root: &Path, codec: Codec) -> Runs {
    // A bulk load: no fsync per batch, and one compaction at the end rather
    // than the automatic ones a live run makes.
    Runs::new(root)
        .with_codec(codec)
        .with_sync(SyncPolicy::Never)
        .with_compaction(CompactionPolicy::Manual)
}

/// What building the run took.
#[derive(Debug)]
pub struct Built {
    /// Wall clock of the whole build (init, units, sync, compact, tail).
    pub secs: f64,
    /// Seconds of the compaction within it.
    pub compact_secs: f64,
    /// Log records written.
    pub records: u64,
}

/// Applies `changes` to the run in batches, each change accepted on its own;
/// any refusal is an error (the workload is built never to be refused).
fn apply_all(run: &runlog::run::Run, changes: Vec<Change>, batch: usize) -> Result<u64, String> {
    let mut written = 0u64;
    let mut it = changes.into_iter().peekable();
    while it.peek().is_some() {
        let chunk: Vec<Change> = it.by_ref().take(batch.max(1)).collect();
        for r in run.apply_batch(chunk) {
            r.map_err(|e| format!("apply_batch: {e}"))?;
            written += 1;
        }
    }
    Ok(written)
}

/// Creates run [`RUN_ID`] under `root` with `n` units, compacts it and appends
/// a tail of `tail` transitions from `pool`.
pub fn build(
    root: &Path,
    n: u64,
    codec: Codec,
    batch: usize,
    tail: u64,
    pool: &mut Pool,
) -> Result<Built, String> {
    let started = Instant::now();
    let runs = runs(root, codec);
    let spec = InitSpec {
        id: RUN_ID.into(),
        task: format!("scale: {n} units"),
        ..InitSpec::default()
    };
    let run = runs.init(spec).map_err(|e| format!("init: {e}"))?;
    let mut records = 1u64;
    let mut i = 0u64;
    while i < n {
        let end = (i + batch.max(1) as u64).min(n);
        let chunk: Vec<Change> = (i..end)
            .map(|k| unit_change(&unit_name(k), UnitStatus::Pending))
            .collect();
        records += apply_all(&run, chunk, batch)?;
        i = end;
    }
    run.store().sync().map_err(|e| format!("sync: {e}"))?;
    let c0 = Instant::now();
    run.compact().map_err(|e| format!("compact: {e}"))?;
    let compact_secs = c0.elapsed().as_secs_f64();
    records += apply_all(&run, pool.changes(tail), batch)?;
    run.store().sync().map_err(|e| format!("sync: {e}"))?;
    drop(run);
    Ok(Built {
        secs: started.elapsed().as_secs_f64(),
        compact_secs,
        records,
    })
}

/// Opens the run and appends `count` more transitions from `pool`.
pub fn append_tail(root: &Path, count: u64, batch: usize, pool: &mut Pool) -> Result<u64, String> {
    let run = runs(root, Codec::Jsonl)
        .open(RUN_ID)
        .map_err(|e| format!("open: {e}"))?;
    let n = apply_all(&run, pool.changes(count), batch)?;
    run.store().sync().map_err(|e| format!("sync: {e}"))?;
    Ok(n)
}

/// Size in bytes of the newest `snap-*.snap` in the run's directory.
pub fn newest_snapshot_bytes(root: &Path) -> Result<u64, String> {
    let dir = root.join(runlog::run::RUNS_SUBDIR).join(RUN_ID);
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("list {}: {e}", dir.display()))?;
    let mut newest: Option<(String, u64)> = None;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let fmt = runlog::engine::format::SNAPSHOT_PREFIX;
        if !(name.starts_with(fmt) && name.ends_with(runlog::engine::format::SNAPSHOT_SUFFIX)) {
            continue;
        }
        let len = e
            .metadata()
            .map_err(|err| format!("stat {name}: {err}"))?
            .len();
        // Names carry the seq zero-padded to 20 digits: the greatest name is the newest.
        if newest.as_ref().is_none_or(|(best, _)| name > *best) {
            newest = Some((name, len));
        }
    }
    newest
        .map(|(_, len)| len)
        .ok_or_else(|| format!("no snapshot in {}", dir.display()))
}
