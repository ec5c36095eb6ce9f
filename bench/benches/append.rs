//! Append throughput of the engine under each sync policy and writer count:
//! `append/sync/1t`, `append/grouped/{8,64}t` (N writers sharing fsyncs through
//! the leader/follower protocol, `runlog_bench::GROUPED`), `append/linger/8t`
//! (`SyncPolicy::Grouped` with a 100 us linger) and `append/interval/1t`.
//! Every append is one ~120-byte transition; except under `interval` each
//! returns only after an fsync covering it. `examples/compare` puts these beside peers.

use criterion::{Criterion, criterion_group, criterion_main};
use runlog::engine::{Codec, Store, SyncPolicy};
use runlog_bench::{Units, opts, update};
use std::hint::black_box;
use std::time::{Duration, Instant};

fn store(dir: &tempfile::TempDir, sync: SyncPolicy) -> Store<Units> {
    Store::<Units>::open(dir.path().join("store"), opts(Codec::Binary, sync)).expect("open")
}

/// `iters` appends spread over `threads` writers; the time until all are durable.
fn appends_across(s: &Store<Units>, threads: u64, iters: u64) -> Duration {
    let per = iters.div_ceil(threads);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads {
            scope.spawn(move || {
                for i in 0..per {
                    black_box(s.append(&update(t * per + i, 1000)).expect("append"));
                }
            });
        }
    });
    started.elapsed()
}

fn bench_append(c: &mut Criterion) {
    let mut g = c.benchmark_group("append");
    let dir = tempfile::tempdir().expect("tempdir");
    let s = store(&dir, SyncPolicy::Always);
    let mut i = 0u64;
    g.bench_function("sync/1t", |b| {
        b.iter(|| {
            i += 1;
            s.append(&update(i, 1000)).expect("append")
        })
    });
    drop(s);
    for (name, policy, threads) in [
        ("grouped", runlog_bench::GROUPED, 8u64),
        ("grouped", runlog_bench::GROUPED, 64),
        ("linger", runlog_bench::LINGER, 8),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = store(&dir, policy);
        g.bench_function(format!("{name}/{threads}t"), |b| {
            b.iter_custom(|iters| appends_across(&s, threads, iters))
        });
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let s = store(&dir, SyncPolicy::Interval(Duration::from_millis(10)));
    let mut i = 0u64;
    g.bench_function("interval/1t", |b| {
        b.iter(|| {
            i += 1;
            s.append(&update(i, 1000)).expect("append")
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    targets = bench_append
}
criterion_main!(benches);
