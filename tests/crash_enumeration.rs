//! Proves that every state a crash can leave (at every operation boundary, for
//! every allowed subset of pending writes and directory operations) recovers to
//! a prefix of the issued history holding every acknowledged transition, the
//! same again after a crash during recovery. Exhaustive for short workloads,
//! sampled from seeds for long ones (RUNLOG_CRASH_SEEDS sets how many).
mod common;
use common::crash::*;
use runlog::engine::Codec;
use runlog::engine::sim::Persistence;

#[test]
fn smoke() {
    let steps = vec![
        Step::Append(1),
        Step::Append(4097),
        Step::Compact,
        Step::Reopen,
    ];
    let t = std::time::Instant::now();
    let f = explore(
        &steps,
        Explore {
            model: Persistence::Weak,
            codec: Codec::Binary,
            outcomes: 64,
            every: 1,
            recovery_outcomes: 2,
            seed: 1,
        },
    )
    .unwrap();
    eprintln!("{f:?} in {:?}", t.elapsed());
}
