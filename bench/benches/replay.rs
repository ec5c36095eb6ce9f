//! Opening a store whose log holds 1,000,000 records after its snapshot, per codec:
//! `replay/binary/1m`, `replay/jsonl/1m` (one iteration = one open = 1M records
//! replayed, so records/s = 1e6 / time).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use runlog::engine::{Codec, Store, SyncPolicy};
use runlog_bench::{Units, build_replay_store, opts};

const RECORDS: u64 = 1_000_000;

fn bench_replay(c: &mut Criterion) {
    let mut g = c.benchmark_group("replay");
    g.throughput(Throughput::Elements(RECORDS));
    for (name, codec) in [("binary/1m", Codec::Binary), ("jsonl/1m", Codec::Jsonl)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("store");
        build_replay_store(&path, codec, RECORDS, 100_000);
        g.bench_function(name, |b| {
            b.iter(|| {
                let s = Store::<Units>::open(&path, opts(codec, SyncPolicy::Always)).expect("open");
                assert_eq!(s.recovery().records_replayed, RECORDS);
                s
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = runlog_bench::large_store_config();
    targets = bench_replay
}
criterion_main!(benches);
