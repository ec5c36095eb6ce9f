//! Proves that SIGKILL at any instant loses no acknowledged append: a child
//! process (this test binary re-executed, running the ignored `kill9_child_process`)
//! appends from three threads under `Always` or `Grouped` sync, rotates segments,
//! compacts (explicitly and automatically) and prints each seq after `append`
//! returns; the parent kills it a random 0–20 ms after the spawn (often while it
//! is still recovering) or after its recovery (mid-append, often mid-snapshot),
//! reopens, and checks that every acked seq holds its value, the state is exactly
//! the model's fold, and a second recovery and a read-only load agree.
//! `RUNLOG_KILL9_ITERS` (100 at the quick depth, 1,000 at the full one: tests/depth) sets the iterations, `RUNLOG_KILL9_SEED` the seed.
use crate::common;
use crate::depth;
use common::kill9;
use common::*;
use runlog::engine::{self, Codec, CompactionPolicy, Machine, Options, RealFs, Store, SyncPolicy};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn store_opts(codec: Codec, iter: u64) -> Options {
    Options {
        create: true,
        codec,
        sync: if iter.is_multiple_of(2) {
            SyncPolicy::Always
        } else {
            SyncPolicy::Grouped {
                linger: Duration::from_micros(200),
            }
        },
        lock_wait: Some(Duration::from_secs(30)),
        segment_bytes: 2048,
        compaction: CompactionPolicy::Auto {
            min_log_bytes: 8192,
            ratio: 0.5,
        },
        ..Options::default()
    }
}

fn codec_of(iter: u64) -> Codec {
    // One store per codec: iterations alternate between two directories.
    if (iter / 2).is_multiple_of(2) {
        Codec::Binary
    } else {
        Codec::Jsonl
    }
}

/// The value thread `t` appends as its `c`th transition in iteration `iter`.
fn value_for(iter: u64, t: u64, c: u64) -> u64 {
    iter * 10_000_000 + c * 4 + t + 1
}

/// The pad the child gives value `v` (the inverse of `value_for`).
fn pad_of_value(v: u64) -> usize {
    (((v - 1) % 10_000_000) / 4 % 50) as usize
}

#[test]
#[ignore = "the child side of kill9_soak; runs only when re-executed by it"]
fn kill9_child_process() {
    let Some((dir, iter)) = kill9::child_args() else {
        crate::common::child_run_bare("kill9_child_process", kill9::CHILD_DIR);
    };
    // libtest has printed "test kill9_child_process ... " without a newline.
    println!();
    let s = Store::<Ledger>::open(&dir, store_opts(codec_of(iter), iter)).unwrap();
    println!("opened {} .", s.last_seq());
    std::thread::scope(|sc| {
        for t in 0..3u64 {
            let s = &s;
            sc.spawn(move || {
                for c in 0.. {
                    let v = value_for(iter, t, c);
                    match s.append(&entry(v, pad_of_value(v))) {
                        Ok(seq) => println!("ack {seq} {v} ."),
                        Err(e) if e.is_refused() => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            });
        }
        loop {
            std::thread::sleep(Duration::from_millis(2));
            println!("compacting .");
            s.compact().unwrap();
            println!("compacted .");
        }
    });
}

/// What the parent knows: seq → value of every record acked or recovered so far.
#[derive(Default)]
struct Model {
    known: BTreeMap<u64, u64>,
}

fn check_store(
    dir: &Path,
    codec: Codec,
    iter: u64,
    model: &mut Model,
    acked: &[(u64, u64)],
    what: &str,
) {
    let s = Store::<Ledger>::open(dir, store_opts(codec, iter))
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let st = s.read(|st| st.clone());
    let last = s.last_seq();
    assert_eq!(st.values.len() as u64, last, "{what}: one value per seq");
    for &(seq, v) in acked {
        assert!(
            seq <= last,
            "{what}: acked seq {seq} lost (recovered up to {last})"
        );
        model.known.insert(seq, v);
    }
    for (i, v) in st.values.iter().enumerate() {
        let seq = i as u64 + 1;
        let known = *model.known.entry(seq).or_insert(*v);
        assert_eq!(known, *v, "{what}: seq {seq} holds {v}, was {known}");
    }
    assert_eq!(
        model.known.range(last + 1..).next(),
        None,
        "{what}: records past {last} vanished"
    );
    // The state is exactly the model's fold of the recovered seqs' values.
    let mut fold = LedgerState::default();
    for v in model.known.range(..=last).map(|(_, v)| *v) {
        Ledger::apply(&mut fold, &entry(v, pad_of_value(v))).unwrap();
    }
    assert_eq!(fold, st, "{what}: state differs from the model's fold");
    drop(s);
    let again = Store::<Ledger>::open(dir, store_opts(codec, iter)).unwrap();
    assert_eq!(
        again.read(|st| st.clone()),
        st,
        "{what}: second recovery differs"
    );
    assert_eq!(again.last_seq(), last);
    assert!(
        again.recovery().torn_tail.is_none(),
        "{what}: torn tail twice"
    );
    drop(again);
    let (ro, _) = engine::Reader::new(&RealFs, dir).state::<Ledger>().unwrap();
    assert_eq!(ro, st, "{what}: read-only load differs");
    let v = engine::Reader::new(&RealFs, dir).verify().unwrap();
    assert!(v.integrity.is_clean(), "{what}");
}

#[test]
fn kill9_soak() {
    let iters = depth::scaled("RUNLOG_KILL9_ITERS", 100, 1000);
    let seed = kill9::seed();
    let mut rng = kill9::Rng(seed);
    let t = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = ["binary", "jsonl"]
        .iter()
        .map(|n| t.path().join(n))
        .collect();
    let mut models = [Model::default(), Model::default()];
    let mut total_acked = 0usize;
    let mut killed_before_open = 0;
    let mut killed_compacting = 0;
    for iter in 0..iters {
        let codec = codec_of(iter);
        let which = usize::from(codec == Codec::Jsonl);
        let dir = &dirs[which];
        let delay = Duration::from_micros(rng.next() % 20_001);
        let what = format!("seed {seed} iteration {iter} ({codec:?}, kill after {delay:?})");
        let kill9::Killed {
            acked,
            opened,
            compacting,
            ..
        } = kill9::Kill {
            module: module_path!(),
            child: "kill9_child_process",
            dir,
            iter,
            // Two in three kills count the delay from the end of recovery (so a
            // loaded machine still kills mid-append); the rest from the spawn
            // (mid-recovery).
            after_open: (!iter.is_multiple_of(3)).then_some(Duration::from_secs(30)),
            delay,
            stderr: &t.path().join("child.stderr"),
            what: &what,
        }
        .run();
        if !opened {
            killed_before_open += 1;
        }
        if compacting {
            killed_compacting += 1;
        }
        total_acked += acked.len();
        if dir.exists() {
            let mode = std::fs::metadata(dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{what}");
            check_store(dir, codec, iter, &mut models[which], &acked, &what);
        } else {
            assert!(acked.is_empty(), "{what}");
        }
    }
    depth::explored(
        "kill9_soak",
        format_args!(
            "RUNLOG_KILL9_SEED={seed}, {iters} kills, {total_acked} acked appends checked, \
             {killed_before_open} kills before the open finished, {killed_compacting} during an \
             explicit compaction"
        ),
    );
    assert!(total_acked > 0, "no child ever acknowledged an append");
}
