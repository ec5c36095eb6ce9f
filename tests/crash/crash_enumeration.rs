//! Proves that every state a crash can leave (at every operation boundary, for
//! the allowed subsets of pending writes and directory operations) recovers to a
//! prefix of the issued history holding every acknowledged transition, and to
//! the same state again after a crash during recovery.
//!
//! Each sweep has a quick depth (the default) and a full one
//! (`RUNLOG_TEST_DEPTH=full`, `scripts/test --full`, CI; tests/depth); the
//! figures below are the full depth's, with the quick one's in brackets.
//!
//! * **Short workloads**: every workload of up to 4 steps (append, batch of 2–8,
//!   compact, reopen; pads of 1 B–64 KiB), crashed at every write / fsync /
//!   rename / unlink / truncate / directory-fsync boundary, with up to 128
//!   allowed crash outcomes per boundary (torn and garbage sectors, subsets of
//!   pending operations), and a crash during recovery of 1 in 2 crash states
//!   [every workload of up to 3 steps, and 1 in 8 of 4 steps
//!   (`RUNLOG_SHORT_ONE_IN`), drawn from the printed `RUNLOG_SAMPLE_SEED`;
//!   every crash state of those, and a crash during recovery of 1 in 8
//!   (`RUNLOG_SHORT_RECOVERY_ONE_IN`)].
//! * **Random workloads** of 200 steps from seeds (appends of 1, 511, 512,
//!   4095, 4097 and 64 KiB pads and sizes around them, batches of 2–8,
//!   concurrent appends, compactions, reopens; half the seeds in the Weak model,
//!   half Ordered; both codecs; seeds ≡ 7 mod 8 under grouped commit). At each
//!   boundary two crash outcomes are taken: nothing pending persisted and
//!   everything pending persisted (the enumeration when at most two are
//!   allowed). Identical images are recovered once, with the highest
//!   acknowledged watermark of any boundary that left them. Seeds below
//!   `RUNLOG_CRASH_FULL_SEEDS` (160 [16]) crash at **every** boundary; the
//!   others at each boundary with probability 1 in `RUNLOG_EVERY` (default
//!   500), to keep the debug `cargo test` of this file near 3 minutes on two
//!   cores. A crash during recovery is taken for 1 in 4 crash states; read-only
//!   recovery and `verify` are checked on 1 in 8 (on all for short workloads).
//!
//! * **Keyed stores** (format v2, the state in a table snapshot): the keyed
//!   test machine (tests/common/keyed.rs) through the same enumeration: every
//!   short workload of up to 3 steps at every boundary (Weak and Ordered; a
//!   crash during recovery of 1 in 2 crash states [1 in 8]), and
//!   `RUNLOG_KEYED_CRASH_SEEDS` (24 [8]) random workloads of 60 steps
//!   crashed at every boundary, so crashes land inside every table write of a
//!   compaction (temp file partly written, before and after its rename, before
//!   the directory fsync, during the old segments' deletion). The recovered
//!   state (header and every entry read back through the table) must be the
//!   model's for a prefix holding every acknowledged transition.
//!
//! * **Open after every acknowledged write**: in the short workloads, the
//!   keyed ones and every 16th random seed, the live files after each
//!   acknowledged step are opened by a writer, which must read back every
//!   acknowledged transition (issue 11: no writer acknowledges into a run the
//!   next open cannot read).
//!
//! Knobs: `RUNLOG_CRASH_SEEDS` (2000 [200]) sets how many seeds,
//! `RUNLOG_CRASH_FULL_SEEDS` how many of them crash at every boundary,
//! `RUNLOG_EVERY` the sampling of the rest, `RUNLOG_CRASH_SEED=n` reruns one
//! seed (at every boundary if `n` < `RUNLOG_CRASH_FULL_SEEDS`). Every boundary
//! of 100,000 seeds (about 1 s of CPU per seed in debug builds; use
//! `--release`):
//!
//! ```text
//! RUNLOG_CRASH_SEEDS=100000 RUNLOG_CRASH_FULL_SEEDS=100000 \
//!     cargo test --release --test crash crash_enumeration::random -- --nocapture
//! ```
use crate::common;
use crate::depth;
use common::crash::*;
use common::env_u64;
use runlog::engine::sim::{Persistence, SimFs};
use runlog::engine::{Codec, SyncPolicy};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn codec_of(n: u64) -> Codec {
    if n.is_multiple_of(2) {
        Codec::Binary
    } else {
        Codec::Jsonl
    }
}

fn exhaustive(model: Persistence) {
    let one_in = depth::scaled("RUNLOG_SHORT_ONE_IN", SHORT_ONE_IN_QUICK, 1).max(1);
    let f = exhaustive_as::<common::Ledger>(model, 4, one_in);
    // A sweep that explored next to nothing would pass vacuously: every
    // workload of up to 4 steps has ~8,400 boundaries and ~57,000 crash states;
    // the quick depth's sample of the longest about a third of that.
    if f.sampled_out == 0 {
        explored_at_least(&f, 8_000, 50_000);
    } else {
        explored_at_least(&f, 2_000, 12_000);
    }
}

/// Fails a sweep that explored fewer boundaries or crash states than its
/// floor: a change that stops crashes from being taken (a workload that
/// writes nothing, a model that offers no outcome) would otherwise pass.
fn explored_at_least(f: &Figures, boundaries: u64, crash_states: u64) {
    assert!(
        f.boundaries >= boundaries && f.crash_states >= crash_states,
        "the sweep explored {} boundaries and {} crash states, under its floor of {boundaries} and {crash_states}: {f:?}",
        f.boundaries,
        f.crash_states
    );
}

/// Workloads of the longest length run at the quick depth: 1 in this many,
/// drawn from a printed seed (`RUNLOG_SAMPLE_SEED`); the full depth runs all
/// (`RUNLOG_SHORT_ONE_IN=1`).
const SHORT_ONE_IN_QUICK: u64 = 8;

/// A short workload's crash states that are also crashed during their
/// recovery: 1 in this many at the quick and the full depth
/// (`RUNLOG_SHORT_RECOVERY_ONE_IN`). Recovering the images a crash during
/// recovery leaves was most of the quick sweep's time (1 in 2: 38 s for the
/// Ordered model; 1 in 8: 18 s), while every workload, boundary and crash
/// state stays in.
const SHORT_RECOVERY_ONE_IN: (u64, u64) = (8, 2);

/// Every workload of up to `max_len` steps, but of the longest only 1 in `one_in`.
fn exhaustive_as<S: Subject>(model: Persistence, max_len: u32, one_in: u64) -> Figures {
    let started = Instant::now();
    let mut f = Figures::default();
    let mut workloads = 0;
    let sample = depth::sample_seed();
    let recovery_one_in = depth::scaled(
        "RUNLOG_SHORT_RECOVERY_ONE_IN",
        SHORT_RECOVERY_ONE_IN.0,
        SHORT_RECOVERY_ONE_IN.1,
    )
    .max(1);
    for len in 1..=max_len {
        for w in 0..4usize.pow(len) {
            // Every shorter workload always; of the longest, 1 in `one_in`.
            if len == max_len && one_in > 1 && !(w as u64 + sample).is_multiple_of(one_in) {
                f.sampled_out += 1;
                continue;
            }
            let steps = short_workload(w, len);
            let x = Explore {
                model,
                codec: codec_of(w as u64 + len as u64),
                sync: SyncPolicy::Always,
                outcomes: 128,
                every: 1,
                recovery_outcomes: 2,
                recovery_one_in,
                seed: w as u64 * 31 + len as u64,
                read_only_one_in: 1,
                paranoid: true,
                open_after_ack: true,
            };
            match explore_as::<S>(&steps, x) {
                Ok(g) => f += g,
                Err(e) => panic!("{model:?} workload {steps:?} ({:?}): {e}", x.codec),
            }
            workloads += 1;
        }
        common::progress(format_args!(
            "crash_enumeration: exhaustive {} {model:?}: workloads of length {len} of {max_len} done ({workloads} so far, {} crash states)",
            std::any::type_name::<S>(),
            f.crash_states
        ));
    }
    depth::explored(
        &format!(
            "crash_enumeration exhaustive {} {model:?}",
            std::any::type_name::<S>()
        ),
        format_args!(
            "{workloads} workloads ({} of length {max_len} left out: 1 in {one_in} run, RUNLOG_SAMPLE_SEED={sample}), {} boundaries ({} sampled at the cap), {} crash states, {} crash states during recovery (of 1 in {recovery_one_in}), {:?}",
            f.sampled_out,
            f.boundaries,
            f.capped,
            f.crash_states,
            f.recovery_crash_states,
            started.elapsed()
        ),
    );
    f
}

#[test]
fn every_crash_state_of_every_short_workload_weak_directory_model() {
    exhaustive(Persistence::WeakDirs);
}

/// ALICE's weakest model also lets an unsynced write persist with a hole before
/// later sectors: a damaged record followed by a valid one. Recovery tells it
/// from mid-log corruption by the later records' `synced` watermark (see
/// tests/crash/crash_weak_model_hole_in_unsynced_batch.rs).
#[test]
fn every_crash_state_of_every_short_workload_weak_model() {
    exhaustive(Persistence::Weak);
}

#[test]
fn every_crash_state_of_every_short_workload_ordered_model() {
    exhaustive(Persistence::Ordered);
}

/// Seeds run at the quick and the full depth (`RUNLOG_CRASH_SEEDS`; tests/depth).
const SEEDS: (u64, u64) = (200, 2000);
/// Seeds below this crash at every boundary (`RUNLOG_CRASH_FULL_SEEDS`), quick
/// and full: most of the quick depth's time (about 1.5 s each; the other
/// seeds, crashed at 1 in `SAMPLE_EVERY` boundaries, a twentieth of that).
const FULL_SEEDS: (u64, u64) = (16, 160);
/// The other seeds crash at each boundary with probability 1 in this (`RUNLOG_EVERY`).
const SAMPLE_EVERY: u64 = 500;

/// The sync policy of a random workload: grouped commit for seeds ≡ 7 mod 8,
/// `Always` for the rest.
fn sync_of(seed: u64) -> SyncPolicy {
    if seed % 8 == 7 {
        SyncPolicy::Grouped {
            linger: Duration::from_micros(50),
        }
    } else {
        SyncPolicy::Always
    }
}

/// Seeds `first, first + 2, ...`: two tests share the seeds so both cores work.
fn random(first: u64) {
    let started = Instant::now();
    let mut f = Figures::default();
    let full_seeds = depth::scaled("RUNLOG_CRASH_FULL_SEEDS", FULL_SEEDS.0, FULL_SEEDS.1);
    let every = env_u64("RUNLOG_EVERY", SAMPLE_EVERY).max(1);
    let (mut seed, n) = match std::env::var("RUNLOG_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        Some(s) if s % 2 == first => (s, s + 1),
        Some(_) => return,
        None => (first, depth::scaled("RUNLOG_CRASH_SEEDS", SEEDS.0, SEEDS.1)),
    };
    let (mut count, mut full) = (0u64, 0u64);
    while seed < n {
        let steps = random_workload(seed, 200);
        let x = Explore {
            model: if seed % 4 < 2 {
                Persistence::Weak
            } else {
                Persistence::Ordered
            },
            codec: codec_of(seed / 2),
            sync: sync_of(seed),
            outcomes: 2,
            every: if seed < full_seeds { 1 } else { every },
            recovery_outcomes: 1,
            recovery_one_in: 4,
            read_only_one_in: 8,
            seed,
            paranoid: false,
            // Every 16th seed opens after every acknowledged step.
            open_after_ack: seed % 16 == 0,
        };
        match explore(&steps, x) {
            Ok(g) => f += g,
            Err(e) => panic!(
                "seed {seed} failed (rerun alone: RUNLOG_CRASH_SEED={seed} cargo test --test crash_enumeration): {e}"
            ),
        }
        count += 1;
        full += u64::from(x.every == 1);
        seed += 2;
        if count.is_multiple_of(250) {
            common::progress(format_args!(
                "crash_enumeration: random from {first}: {count} of {} seeds done",
                n.saturating_sub(first).div_ceil(2)
            ));
        }
    }
    depth::explored(
        &format!("crash_enumeration random from {first}"),
        format_args!(
            "{count} seeds ({full} crashed at every boundary, the rest at 1 in {every}), {} boundaries, {} crash states, {} during recovery, {:?}",
            f.boundaries,
            f.crash_states,
            f.recovery_crash_states,
            started.elapsed()
        ),
    );
    // Each 200-step workload has ~170 boundaries; a seed crashed at every
    // boundary has at least one crash state at each of them.
    explored_at_least(&f, 100 * count, 100 * full);
}

#[test]
fn random_workloads_even_seeds() {
    random(0);
}

#[test]
fn random_workloads_odd_seeds() {
    random(1);
}

#[test]
fn keyed_every_crash_state_of_every_short_workload_weak_model() {
    let f = exhaustive_as::<KeyedTab>(Persistence::Weak, 3, 1);
    assert!(f.table_temps > 0 && f.tables > 0, "{f:?}");
    explored_at_least(&f, 1_500, 8_000);
}

#[test]
fn keyed_every_crash_state_of_every_short_workload_ordered_model() {
    let f = exhaustive_as::<KeyedTab>(Persistence::Ordered, 3, 1);
    assert!(f.table_temps > 0 && f.tables > 0, "{f:?}");
    explored_at_least(&f, 1_500, 8_000);
}

/// Keyed seeds run at the quick and the full depth (`RUNLOG_KEYED_CRASH_SEEDS`),
/// each at every boundary.
const KEYED_SEEDS: (u64, u64) = (8, 24);

/// Random keyed workloads: 60 steps, so several compactions write tables over
/// a table; every boundary of every seed.
#[test]
fn keyed_random_workloads_every_boundary() {
    let started = Instant::now();
    let mut f = Figures::default();
    let n = depth::scaled("RUNLOG_KEYED_CRASH_SEEDS", KEYED_SEEDS.0, KEYED_SEEDS.1);
    let mut compactions = 0;
    for seed in 0..n {
        let steps = random_workload(seed ^ 0x6b65_7964, 60);
        compactions += steps
            .iter()
            .filter(|s| matches!(s, Step::Compact | Step::Flush))
            .count();
        let x = Explore {
            model: if seed % 2 == 0 {
                Persistence::Weak
            } else {
                Persistence::Ordered
            },
            codec: codec_of(seed / 2),
            sync: sync_of(seed),
            outcomes: 2,
            every: 1,
            recovery_outcomes: 1,
            recovery_one_in: 4,
            read_only_one_in: 4,
            seed,
            paranoid: false,
            open_after_ack: true,
        };
        match explore_as::<KeyedTab>(&steps, x) {
            Ok(g) => f += g,
            Err(e) => panic!("keyed seed {seed} failed: {e}"),
        }
        if (seed + 1).is_multiple_of(4) {
            common::progress(format_args!(
                "crash_enumeration: keyed random: {} of {n} seeds done",
                seed + 1
            ));
        }
    }
    depth::explored(
        "crash_enumeration keyed random",
        format_args!(
            "{n} seeds, {compactions} compactions, {} boundaries, {} crash states ({} inside a table write, {} holding a table), {} during recovery, {:?}",
            f.boundaries,
            f.crash_states,
            f.table_temps,
            f.tables,
            f.recovery_crash_states,
            started.elapsed()
        ),
    );
    // Crashes did land inside table writes, and tables were recovered from.
    assert!(f.table_temps > 0 && f.tables > 0, "{f:?}");
    // ~640 boundaries and ~500 crash states per 60-step seed on average.
    explored_at_least(&f, 200 * n, 150 * n);
}

/// Issue 11 item 4: the first `init` under a new root creates the root,
/// `runs/`, `archive/` and the run's directory, each made durable in its
/// parent. After the init is acknowledged, a crash that loses everything still
/// pending leaves the run; a crash at any boundary before leaves no run or the
/// run, never an error (all three models).
#[test]
fn first_init_under_a_new_root_is_durable_at_every_boundary() {
    use runlog::engine::sim::{Fate, SimFs, SimState};
    use runlog::run::{InitSpec, RunError, Runs};
    use std::sync::{Arc, Mutex};
    let root = std::path::PathBuf::from("/data/new/root");
    let spec = || InitSpec {
        id: "g".into(),
        task: "t".into(),
        units: vec!["a".into()],
        ..InitSpec::default()
    };
    let mut checked = 0;
    for (i, model) in [
        Persistence::Ordered,
        Persistence::WeakDirs,
        Persistence::Weak,
    ]
    .into_iter()
    .enumerate()
    {
        for codec in [Codec::Binary, Codec::Jsonl] {
            let fs = SimFs::new();
            let images: Arc<Mutex<Vec<SimFs>>> = Arc::default();
            {
                let images = images.clone();
                let mut seed = i as u64;
                fs.observe(Some(Box::new(move |s: &SimState, _n, _op| {
                    seed += 1;
                    for o in s.outcomes(model, 16, seed) {
                        images.lock().unwrap().push(s.image(&o));
                    }
                })));
            }
            let runs = Runs::new(&root)
                .with_codec(codec)
                .with_vfs(Arc::new(fs.clone()));
            drop(runs.init(spec()).expect("init"));
            fs.observe(None);
            let lost = fs.with_state(|s| s.image(&vec![Fate::Absent; s.pending().len()]));
            let doc = Runs::new(&root)
                .with_vfs(Arc::new(lost))
                .read("g")
                .unwrap_or_else(|e| panic!("{model:?}: the acknowledged init is gone: {e}"));
            assert_eq!(doc.units.len(), 1);
            for img in std::mem::take(&mut *images.lock().unwrap()) {
                match Runs::new(&root).with_vfs(Arc::new(img)).read_run("g") {
                    Ok(_) | Err(RunError::NotFound { .. }) => checked += 1,
                    Err(e) => panic!("{model:?}: a crash during the first init: {e}"),
                }
            }
        }
    }
    assert!(checked > 20, "{checked}");
}

/// One-shot writers of a keyed store leave tail caches (FORMAT.md §15), and
/// later opens (writers, readers, recovery after a crash) read through them:
/// every crash state at every boundary of these workloads, in both models and
/// both codecs, recovers to a prefix of the history holding every
/// acknowledged transition, the cache's records included, whether the crash
/// left the cache whole, torn, stale or gone.
#[test]
fn keyed_one_shot_writers_leaving_tail_caches_every_crash_state() {
    use runlog::engine::tailcache::TAIL_FILE;
    let small = |n| vec![Step::Append(10); n];
    let workloads: Vec<Vec<Step>> = vec![
        [small(9), vec![Step::OneShot(5); 3]].concat(),
        [
            small(9),
            vec![Step::Flush],
            small(9),
            vec![Step::OneShot(5), Step::Append(3), Step::OneShot(5)],
            vec![Step::Compact],
            small(8),
            vec![Step::OneShot(5), Step::OneShot(5)],
        ]
        .concat(),
        [
            vec![Step::Append(4097); 3],
            small(8),
            vec![
                Step::Batch(vec![Some(10), None, Some(10)]),
                Step::OneShot(5),
                Step::OneShot(4097),
                Step::OneShot(5),
            ],
        ]
        .concat(),
    ];
    let mut f = Figures::default();
    for (i, steps) in workloads.iter().enumerate() {
        for codec in [Codec::Jsonl, Codec::Binary] {
            // Run once without crashes: the workload leaves a cache.
            let fs = SimFs::new();
            let plain = Explore {
                model: Persistence::Weak,
                codec,
                sync: SyncPolicy::Always,
                outcomes: 1,
                every: 1,
                recovery_outcomes: 0,
                recovery_one_in: 1,
                read_only_one_in: 1,
                seed: 0,
                paranoid: false,
                open_after_ack: false,
            };
            run_workload_as::<KeyedTab>(&fs, &plain, steps, &Arc::new(Tally::default()));
            let files = fs.with_state(|s| s.live_files());
            assert!(
                files.keys().any(|p| p.ends_with(TAIL_FILE)),
                "workload {i} ({codec:?}) left no tail cache: {:?}",
                files.keys().collect::<Vec<_>>()
            );
            for model in [Persistence::Weak, Persistence::Ordered] {
                let x = Explore {
                    model,
                    codec,
                    sync: SyncPolicy::Always,
                    outcomes: 16,
                    every: 1,
                    recovery_outcomes: 1,
                    recovery_one_in: 4,
                    read_only_one_in: 2,
                    seed: i as u64,
                    paranoid: false,
                    open_after_ack: true,
                };
                match explore_as::<KeyedTab>(steps, x) {
                    Ok(g) => f += g,
                    Err(e) => panic!("workload {i} {model:?} {codec:?}: {e}"),
                }
            }
        }
    }
    common::progress(format_args!(
        "crash_enumeration: one-shot writers with tail caches: {} boundaries, {} crash states",
        f.boundaries, f.crash_states
    ));
    explored_at_least(&f, 500, 1_000);
}
