//! The workload shared by the criterion benches (`benches/`) and the `compare`
//! example (`examples/compare`): a small state machine of units whose
//! transitions are ~120-byte records, and helpers that build stores of a given
//! size. Kept independent of `runlog::run` (the run model) so the engine is
//! measured on its own.

pub mod delay_proxy;

use runlog::engine::{Codec, CompactionPolicy, Machine, Options, Store, SyncPolicy};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Where a unit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    Pending,
    Running,
    Done,
    Failed,
}

/// One transition: a unit moves to a status, with a note.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Update {
    pub unit: String,
    pub status: Status,
    pub note: String,
}

/// What the state keeps per unit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UnitState {
    pub status: Status,
    pub note: String,
}

/// The state: every unit seen, by name.
pub type State = BTreeMap<String, UnitState>;

/// Never refuses anything; the type exists because `Machine` asks for one.
#[derive(Debug)]
pub struct Never;

impl std::fmt::Display for Never {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("never")
    }
}

impl std::error::Error for Never {}

/// The bench machine.
pub struct Units;

impl Machine for Units {
    type State = State;
    type Transition = Update;
    type Error = Never;

    fn apply(state: &mut State, t: &Update) -> Result<(), Never> {
        match state.get_mut(&t.unit) {
            Some(u) => {
                u.status = t.status;
                u.note.clone_from(&t.note);
            }
            None => {
                state.insert(
                    t.unit.clone(),
                    UnitState {
                        status: t.status,
                        note: t.note.clone(),
                    },
                );
            }
        }
        Ok(())
    }
}

const NOTE: &str = "attempt 1 finished on worker-07 after 1834 ms; outputs in s3://bucket/out/part";

/// The `i`th transition of a run with `units` units (unit `i % units`).
pub fn update(i: u64, units: u64) -> Update {
    let status = match i % 4 {
        0 => Status::Pending,
        1 => Status::Running,
        2 => Status::Done,
        _ => Status::Failed,
    };
    Update {
        unit: format!("unit-{:08}", i % units),
        status,
        note: NOTE.to_string(),
    }
}

/// The JSON text of `update(i, units)`: the record the non-runlog contenders write.
pub fn record_json(i: u64, units: u64) -> Vec<u8> {
    serde_json::to_vec(&update(i, units)).expect("an Update serializes")
}

/// Options for a bench store: created if absent, manual compaction.
pub fn opts(codec: Codec, sync: SyncPolicy) -> Options {
    Options {
        create: true,
        codec,
        sync,
        compaction: CompactionPolicy::Manual,
        ..Options::default()
    }
}

/// Appends transitions `from..to` (units cycling over `units`) without fsyncs,
/// in batches, then syncs once.
pub fn fill(store: &Store<Units>, from: u64, to: u64, units: u64) {
    const BATCH: u64 = 4096;
    let mut i = from;
    while i < to {
        let end = (i + BATCH).min(to);
        let batch: Vec<Update> = (i..end).map(|j| update(j, units)).collect();
        for r in store.append_batch(&batch) {
            r.expect("bench append");
        }
        i = end;
    }
    store.sync().expect("bench sync");
}

/// A store whose newest snapshot holds `units` distinct units and whose log holds
/// (almost) nothing: opening it decodes the snapshot and replays one record.
pub fn build_state_store(dir: &Path, codec: Codec, units: u64) {
    let s = Store::<Units>::open(dir, opts(codec, SyncPolicy::Never)).expect("open bench store");
    fill(&s, 0, units, units);
    s.compact().expect("first compaction");
    // A second snapshot lets compaction delete the log the first one covers.
    fill(&s, units, units + 1, units);
    s.compact().expect("second compaction");
}

/// A store with a snapshot at seq 1 followed by `records` records in the log
/// (units cycling over `units`): opening it replays `records` records.
pub fn build_replay_store(dir: &Path, codec: Codec, records: u64, units: u64) {
    let s = Store::<Units>::open(dir, opts(codec, SyncPolicy::Never)).expect("open bench store");
    fill(&s, 0, 1, units);
    s.compact().expect("compaction");
    fill(&s, 1, records + 1, units);
}

/// The policy of the `grouped` benches and `runlog_group_*` rows: the default
/// `Always`, whose leader/follower protocol already shares one fsync among all
/// writers waiting. (`Grouped { linger }` adds a fixed sleep before each fsync;
/// on a disk whose fsync takes ~70 us that sleep costs more than it gathers, so
/// it is measured separately as `LINGER`.)
pub const GROUPED: SyncPolicy = SyncPolicy::Always;

/// The lingering policy, measured beside `GROUPED`.
pub const LINGER: SyncPolicy = SyncPolicy::Grouped {
    linger: std::time::Duration::from_micros(100),
};

/// The criterion settings of the benches whose one iteration is a whole
/// open or compaction of a million-entry store (`replay`, `snapshot`): few
/// samples, a short warm-up, 5 s of measurement.
pub fn large_store_config() -> criterion::Criterion {
    criterion::Criterion::default()
        .sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(100))
        .measurement_time(std::time::Duration::from_secs(5))
}
