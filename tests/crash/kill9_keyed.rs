//! Proves that SIGKILL at any instant loses no acknowledged append to a keyed
//! store (format v3) whose table holds 100,000 entries: a child process (this
//! test binary re-executed, running the ignored `kill9_keyed_child`) appends
//! from two threads (one new key per append) while a third compacts in a loop,
//! each round either a delta flush (FORMAT.md §14: the tail over the newest
//! snapshot, merging the newest deltas in tiers) or, every fourth, a full
//! compaction streaming every table of the chain and the overlay into a new table;
//! the parent kills it 0–150 ms after its recovery (so often during the
//! streaming merge, which it counts), reopens, and checks that every
//! acknowledged key holds its value, that the entry count and header agree with
//! the recovered seq, and that `verify` finds every block clean.
//! `RUNLOG_KILL9_KEYED_ITERS` (10 at the quick depth, 100 at the full one: tests/depth) sets the iterations:
//! its own variable, because an iteration here rebuilds a 100k-entry table and
//! costs many of `kill9_engine`'s, whose `RUNLOG_KILL9_ITERS` CI sets to 1,000.
//! `RUNLOG_KILL9_SEED` sets the seed, `RUNLOG_KILL9_ENTRIES` (default 100,000) the
//! table's size.
use crate::common;
use crate::depth;
use common::{Rejected, env_u64, kill9};
use runlog::engine::{
    self, ApplyError, Codec, CompactionPolicy, Keyed, KeyedMachine, KeyedState, Options, RealFs,
    Store, SyncPolicy,
};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// One key per value: every accepted append inserts an entry.
struct Wide;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct WideHeader {
    applied: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Put {
    value: u64,
}

fn key(v: u64) -> String {
    format!("{v:016}")
}

impl KeyedMachine for Wide {
    type Header = WideHeader;
    type Value = u64;
    type Transition = Put;
    type Error = Rejected;
    fn apply(s: &mut KeyedState<Self>, t: &Put) -> Result<(), ApplyError<Rejected>> {
        if t.value.is_multiple_of(1000) {
            return Err(ApplyError::Refused(Rejected(t.value)));
        }
        s.put(&key(t.value), t.value).map_err(ApplyError::Damaged)?;
        s.header_mut().applied += 1;
        Ok(())
    }
}

type WStore = Store<Keyed<Wide>>;

fn opts(codec: Codec, iter: u64) -> Options {
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
        segment_bytes: 4096,
        compaction: CompactionPolicy::Manual,
        ..Options::default()
    }
}

/// The value thread `t` appends as its `c`th transition in iteration `iter`
/// (above every prefilled value).
fn value_for(iter: u64, t: u64, c: u64) -> u64 {
    (iter + 1) * 10_000_000_000 + c * 2 + t + 1
}

#[test]
#[ignore = "the child side of kill9_keyed_soak; runs only when re-executed by it"]
fn kill9_keyed_child() {
    let Some((dir, iter)) = kill9::child_args() else {
        crate::common::child_run_bare("kill9_keyed_child", kill9::CHILD_DIR);
    };
    println!();
    let s = WStore::open(&dir, opts(Codec::Binary, iter)).unwrap();
    println!("opened {} .", s.last_seq());
    std::thread::scope(|sc| {
        for t in 0..2u64 {
            let s = &s;
            sc.spawn(move || {
                for c in 0.. {
                    let v = value_for(iter, t, c);
                    match s.append(&Put { value: v }) {
                        Ok(seq) => println!("ack {seq} {v} ."),
                        Err(e) if e.is_refused() => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            });
        }
        // Three delta flushes (tier merges among them), then a full merge of
        // the chain: a kill lands in each kind. Both print the same lines.
        for round in 0u64.. {
            println!("compacting .");
            match round % 4 {
                3 => s.compact().unwrap(),
                _ => s.flush().unwrap(),
            };
            println!("compacted .");
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// Reopens and checks every acknowledged key; returns the recovered seq.
fn check(dir: &Path, iter: u64, acked: &[(u64, u64)], entries: u64, what: &str) -> u64 {
    let s = WStore::open(dir, opts(Codec::Binary, iter))
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let last = s.last_seq();
    s.read(|st| {
        assert_eq!(st.header().applied, last, "{what}: one transition per seq");
        // Prefilled entries plus one per transition since: no key lost or doubled.
        assert_eq!(st.len(), last, "{what}: entries");
        assert!(last >= entries, "{what}");
        for &(seq, v) in acked {
            assert!(
                seq <= last,
                "{what}: acked seq {seq} lost (recovered {last})"
            );
            match st.get(&key(v)) {
                Ok(Some(got)) => assert_eq!(got, v, "{what}: key of {v}"),
                Ok(None) => panic!("{what}: acknowledged value {v} (seq {seq}) missing"),
                Err(e) => panic!("{what}: {e}"),
            }
        }
    });
    assert!(s.recovery().snapshot_fallbacks.is_empty(), "{what}");
    drop(s);
    let v = engine::Reader::new(&RealFs, dir).verify().unwrap();
    assert!(v.integrity.is_clean(), "{what}");
    last
}

#[test]
fn kill9_keyed_soak() {
    let iters = depth::scaled("RUNLOG_KILL9_KEYED_ITERS", 10, 100);
    let entries = env_u64("RUNLOG_KILL9_ENTRIES", 100_000);
    let seed = kill9::seed();
    let mut rng = kill9::Rng(seed);
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("keyed");
    // Prefill: `entries` keys in a table (refused multiples of 1000 skipped).
    {
        let s = WStore::open(&dir, opts(Codec::Binary, 0)).unwrap();
        let mut v = 1u64;
        let mut n = 0;
        while n < entries {
            let batch: Vec<Put> = (0..1000.min(entries - n))
                .map(|_| {
                    if v.is_multiple_of(1000) {
                        v += 1;
                    }
                    v += 1;
                    Put { value: v - 1 }
                })
                .collect();
            n += batch.len() as u64;
            for r in s.append_batch(&batch) {
                r.unwrap();
            }
        }
        s.compact().unwrap();
        assert_eq!(s.read(|st| st.len()), entries);
    }
    let (mut total_acked, mut killed_compacting, mut compactions) = (0, 0, 0);
    for iter in 0..iters {
        let delay = Duration::from_micros(rng.next() % 150_001);
        let what = format!("seed {seed} iteration {iter} (kill {delay:?} after the open)");
        let killed = kill9::Kill {
            module: module_path!(),
            child: "kill9_keyed_child",
            dir: &dir,
            iter,
            after_open: Some(Duration::from_secs(60)),
            delay,
            stderr: &t.path().join("child.stderr"),
            what: &what,
        }
        .run();
        let (acked, compacting) = (killed.acked, killed.compacting);
        compactions += killed.compactions;
        killed_compacting += u64::from(compacting);
        total_acked += acked.len();
        check(&dir, iter, &acked, entries, &what);
    }
    depth::explored(
        "kill9_keyed_soak",
        format_args!(
            "RUNLOG_KILL9_SEED={seed}, {entries} entries, {iters} kills, {total_acked} acked \
             appends checked, {compactions} compactions finished, {killed_compacting} kills during a compaction"
        ),
    );
    assert!(total_acked > 0, "no child ever acknowledged an append");
}
