//! The cost of one snapshot of a state with 1,000,000 units: `snapshot/1m_units`.
//! Each iteration appends one transition (so there is something new to cover)
//! and runs `compact()`: rebuild the state from the previous snapshot and log,
//! encode it, write temp + fsync + rename + fsync dir, delete the old log.

use criterion::{Criterion, criterion_group, criterion_main};
use runlog::engine::{Codec, Store, SyncPolicy};
use runlog_bench::{Units, build_state_store, opts, update};

const UNITS: u64 = 1_000_000;

fn bench_snapshot(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store");
    build_state_store(&path, Codec::Binary, UNITS);
    let s = Store::<Units>::open(&path, opts(Codec::Binary, SyncPolicy::Always)).expect("open");
    let mut i = UNITS;
    c.bench_function("snapshot/1m_units", |b| {
        b.iter(|| {
            i += 1;
            s.append(&update(i, UNITS)).expect("append");
            s.compact().expect("compact")
        })
    });
}

criterion_group! {
    name = benches;
    config = runlog_bench::large_store_config();
    targets = bench_snapshot
}
criterion_main!(benches);
