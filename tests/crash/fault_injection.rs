//! Proves that an I/O error at any single operation of a workload, once or from
//! then on, is handled: EINTR and short writes are retried invisibly; EIO and
//! ENOSPC fail the calls they hit, a failed write or fsync poisons the store (no
//! further write, fsync or acknowledgement until reopened), a failed compaction
//! deletes nothing; and after reopening on the filesystem as crashed the
//! recovered history is a prefix of the issued one holding every acknowledged
//! transition.
//!
//! The keyed store (format v2: its state in a table snapshot, tests/common/
//! keyed.rs) runs the fixed workload under every fault too, so EIO, ENOSPC and
//! short writes land inside every table write of its compactions; and a full
//! disk at any operation of a compaction leaves the previous table snapshot in
//! force, with the store still appending.
use crate::common;
use crate::depth;
use common::crash::*;
use common::keyed::{Tab, tab_model, tab_observe};
use common::*;
use runlog::engine::sim::{Fault, FaultKind, Op, Persistence, SimFs};
use runlog::engine::{Codec, Error, Keyed, Store};
use std::time::Instant;

fn workload() -> Vec<Step> {
    vec![
        Step::Append(1),
        Step::Append(4097),
        Step::Batch(vec![Some(511), None, Some(512), Some(1)]),
        Step::Append(4095),
        Step::Compact,
        Step::Append(64 << 10),
        Step::Flush,
        Step::Append(512),
        Step::Reopen,
        Step::Batch(vec![Some(1), Some(4097)]),
        Step::Flush,
        Step::Append(7),
        Step::Compact,
        Step::Append(511),
    ]
}

fn mutating(log: &[Op]) -> Option<Op> {
    log.iter().copied().find(|o| {
        matches!(
            o,
            Op::Write | Op::Fsync | Op::SetLen | Op::CreateNew | Op::Rename | Op::Remove
        )
    })
}

struct Run {
    fs: SimFs,
    h: Vec<(u64, usize)>,
    acked: u64,
    errors: usize,
}

/// Runs the workload with `fault`, checking the poisoning rules as it goes.
fn run<S: Subject>(codec: Codec, steps: &[Step], fault: Option<Fault>) -> Result<Run, String> {
    let fs = SimFs::new();
    fs.inject(fault);
    let o = sim_opts(&fs, codec);
    let mut h: Vec<(u64, usize)> = vec![];
    let mut acked = 0u64;
    let mut errors = 0;
    let mut next = 0u64;
    let mut value = || {
        next += 1;
        if next.is_multiple_of(1000) {
            next += 1;
        }
        next
    };
    let mut poisoned = false;
    let mut store = Store::<S::M>::open(dir(), o.clone()).ok();
    for (i, step) in steps.iter().enumerate() {
        let Some(s) = store.as_ref() else { break };
        let before = fs.ops();
        let mut failed = false;
        match step {
            Step::Append(pad) => {
                let v = value();
                match s.append(&entry(v, *pad)) {
                    Ok(seq) => {
                        if poisoned {
                            return Err(format!("step {i}: acknowledged on a poisoned store"));
                        }
                        h.push((v, *pad));
                        if seq != h.len() as u64 {
                            return Err(format!("step {i}: seq {seq}, expected {}", h.len()));
                        }
                        acked = seq;
                    }
                    Err(e) => {
                        failed = true;
                        if !poisoned {
                            h.push((v, *pad)); // staged before the failure
                        }
                        if !matches!(e, Error::Poisoned { .. }) {
                            return Err(format!("step {i}: append failed with {e}, not Poisoned"));
                        }
                    }
                }
            }
            Step::Batch(items) => {
                let ts: Vec<(Entry, Option<usize>)> = items
                    .iter()
                    .map(|p| match p {
                        Some(pad) => (entry(value(), *pad), Some(*pad)),
                        None => (entry(5000, 0), None),
                    })
                    .collect();
                let batch: Vec<Entry> = ts.iter().map(|t| t.0.clone()).collect();
                let was = poisoned;
                for ((t, pad), r) in ts.iter().zip(s.append_batch(&batch)) {
                    match (pad, r) {
                        (Some(pad), Ok(seq)) => {
                            if was {
                                return Err(format!("step {i}: acknowledged on a poisoned store"));
                            }
                            h.push((t.value, *pad));
                            if seq != h.len() as u64 {
                                return Err(format!("step {i}: seq {seq}, expected {}", h.len()));
                            }
                            acked = seq;
                        }
                        (None, Err(e)) if e.is_refused() && !was => {}
                        (pad, Err(e)) => {
                            failed = true;
                            if let (Some(pad), false) = (pad, was) {
                                h.push((t.value, *pad));
                            }
                            if !matches!(e, Error::Poisoned { .. }) {
                                return Err(format!("step {i}: batch item failed with {e}"));
                            }
                        }
                        (None, Ok(_)) => return Err(format!("step {i}: refused item accepted")),
                    }
                }
            }
            Step::Compact | Step::Flush => {
                let segs = segments(&fs);
                let r = if matches!(step, Step::Flush) {
                    s.flush()
                } else {
                    s.compact()
                };
                if r.is_err() {
                    failed = true;
                    let after = segments(&fs);
                    if let Some(p) = segs.iter().find(|p| !after.contains(p)) {
                        return Err(format!(
                            "step {i}: a failed compaction deleted {}",
                            p.display()
                        ));
                    }
                }
            }
            Step::OneShot(_) => {
                return Err("fault injection's workloads have no one-shot step".into());
            }
            Step::Reopen => {
                drop(store.take());
                poisoned = false;
                match Store::<S::M>::open(dir(), o.clone()) {
                    Ok(s) => {
                        // Rebase H on what survived (unacknowledged staged records may not).
                        let st = s.read(|st| S::observe(st))?;
                        let k = check_prefix_as::<S>(&h, acked, &st)
                            .map_err(|e| format!("reopen: {e}"))?;
                        h.truncate(k as usize);
                        acked = k;
                        store = Some(s);
                    }
                    Err(_) => {
                        errors += 1;
                        break;
                    }
                }
                continue;
            }
            Step::Threads(_) => unreachable!("fault workloads are single-threaded"),
        }
        if poisoned {
            let log = fs.op_log();
            if let Some(op) = mutating(&log[before as usize..]) {
                return Err(format!("step {i}: a poisoned store issued {op:?}"));
            }
        }
        if failed {
            errors += 1;
            // A probe: a poisoned store refuses sync without any I/O.
            let before = fs.ops();
            if s.sync().is_err() {
                poisoned = true;
                if let Some(op) = mutating(&fs.op_log()[before as usize..]) {
                    return Err(format!("step {i}: sync on a poisoned store issued {op:?}"));
                }
            }
        }
    }
    drop(store);
    Ok(Run {
        fs,
        h,
        acked,
        errors,
    })
}

/// Reopens on the filesystem as crashed (several crash outcomes) and checks the invariant.
fn check_after<S: Subject>(r: &Run, codec: Codec, seed: u64) -> Result<(), String> {
    for model in [Persistence::Ordered, Persistence::WeakDirs] {
        let outcomes = r.fs.with_state(|s| s.outcomes(model, 3, seed));
        for o in outcomes {
            let img = r.fs.crash(&o);
            let (st, _) = recover_as::<S>(&img, codec, None, true)?;
            check_prefix_as::<S>(&r.h, r.acked, &st)?;
        }
    }
    Ok(())
}

/// Injects every applicable fault at every operation of `steps`; returns (runs, faults).
fn sweep<S: Subject>(steps: &[Step], codecs: &[Codec]) -> (u64, u64) {
    let mut injected = 0u64;
    let mut runs = 0u64;
    for &codec in codecs {
        let clean = run::<S>(codec, steps, None).unwrap();
        assert_eq!(clean.errors, 0);
        let log = clean.fs.op_log();
        for (at, op) in log.iter().enumerate() {
            for kind in [
                FaultKind::Eio,
                FaultKind::Enospc,
                FaultKind::ShortWrite,
                FaultKind::Eintr,
            ] {
                if !op.accepts(kind) {
                    continue;
                }
                for persistent in [false, true] {
                    let fault = Fault {
                        at: at as u64,
                        kind,
                        persistent,
                    };
                    let ctx = |e: String| format!("{codec:?} {fault:?} (op {op:?}): {e}");
                    let r = run::<S>(codec, steps, Some(fault)).map_err(ctx).unwrap();
                    runs += 1;
                    injected += r.fs.faults_fired();
                    assert!(
                        r.fs.faults_fired() > 0,
                        "{}",
                        ctx("the fault never fired".into())
                    );
                    if matches!(kind, FaultKind::Eintr | FaultKind::ShortWrite) {
                        // Retried internally: the run is indistinguishable from a clean one.
                        assert_eq!(
                            r.errors,
                            0,
                            "{}",
                            ctx("an EINTR or short write surfaced".into())
                        );
                        assert_eq!(
                            r.acked as usize,
                            clean.h.len(),
                            "{}",
                            ctx("acks lost".into())
                        );
                    }
                    check_after::<S>(&r, codec, at as u64).map_err(ctx).unwrap();
                }
            }
        }
    }
    (runs, injected)
}

#[test]
fn every_fault_at_every_operation_of_the_fixed_workload() {
    let started = Instant::now();
    let (runs, injected) = sweep::<Ledger>(&workload(), &codecs());
    eprintln!(
        "fault injection: {runs} runs, {injected} faults injected, {:?}",
        started.elapsed()
    );
}

fn segments(fs: &SimFs) -> Vec<std::path::PathBuf> {
    fs.with_state(|st| st.live_files())
        .into_keys()
        .filter(|p| p.to_string_lossy().contains("seg-"))
        .collect()
}

/// Two rounds of appends and compactions; the second compaction's result and
/// the live segments before and after it.
fn two_compactions(
    codec: Codec,
    fault: Option<Fault>,
) -> (
    SimFs,
    Result<(), Error>,
    Vec<std::path::PathBuf>,
    Vec<std::path::PathBuf>,
) {
    let fs = SimFs::new();
    fs.inject(fault);
    let s = Store::<Ledger>::open(dir(), sim_opts(&fs, codec)).unwrap();
    for v in 1..=80 {
        s.append(&entry(v, 500)).unwrap();
        if v == 40 {
            s.compact().unwrap();
        }
    }
    let before = segments(&fs);
    let r = s.compact().map(|_| ());
    let after = segments(&fs);
    drop(s);
    (fs, r, before, after)
}

#[test]
fn failed_directory_fsync_after_snapshot_rename_fails_the_snapshot_and_deletes_nothing() {
    for codec in codecs() {
        let (clean, r, before, after) = two_compactions(codec, None);
        r.unwrap();
        assert!(
            before.iter().any(|p| !after.contains(p)),
            "a clean trim deletes old segments"
        );
        let log = clean.op_log();
        let at = log
            .windows(2)
            .rposition(|w| w == [Op::Rename, Op::SyncDir])
            .expect("the second snapshot's rename and directory fsync") as u64
            + 1;
        for kind in [FaultKind::Eio, FaultKind::Enospc] {
            for persistent in [false, true] {
                let fault = Fault {
                    at,
                    kind,
                    persistent,
                };
                let (fs, r, before, after) = two_compactions(codec, Some(fault));
                assert!(r.is_err(), "{fault:?}: the snapshot must fail");
                assert!(fs.faults_fired() > 0);
                for p in &before {
                    assert!(after.contains(p), "{fault:?}: {} was deleted", p.display());
                }
                // And every acknowledged transition survives a crash right now.
                let all: Vec<u64> = (1..=80).collect();
                for model in [Persistence::Ordered, Persistence::WeakDirs] {
                    for o in fs.with_state(|st| st.outcomes(model, 8, at)) {
                        let (st, _) = recover(&fs.crash(&o), codec, None).unwrap();
                        assert_eq!(st, model_state(&all));
                    }
                }
            }
        }
    }
}

fn model_state(values: &[u64]) -> LedgerState {
    model(values, 500)
}

/// Random single-threaded workloads of 30 steps (`RUNLOG_FAULT_SEEDS`: 3 at the
/// quick depth, 6 at the full one; tests/depth).
#[test]
fn every_fault_at_every_operation_of_random_workloads() {
    let started = Instant::now();
    let n: u64 = depth::scaled("RUNLOG_FAULT_SEEDS", 3, 6);
    let (mut runs, mut injected) = (0, 0);
    for seed in 0..n {
        let steps: Vec<Step> = random_workload(seed, 30)
            .into_iter()
            .map(|s| match s {
                Step::Threads(pads) => Step::Batch(pads.into_iter().map(Some).collect()),
                s => s,
            })
            .collect();
        let codec = [Codec::Binary, Codec::Jsonl][seed as usize % 2];
        let r = std::panic::catch_unwind(|| sweep::<Ledger>(&steps, &[codec]));
        match r {
            Ok((a, b)) => {
                runs += a;
                injected += b;
            }
            Err(e) => std::panic::resume_unwind(Box::new(format!(
                "fault sweep of random workload seed {seed} failed: {:?}",
                e.downcast_ref::<String>()
            ))),
        }
    }
    depth::explored(
        "fault_injection random",
        format_args!(
            "{n} random workloads: {runs} runs, {injected} faults injected, {:?}",
            started.elapsed()
        ),
    );
}

/// The fixed workload on the keyed store: every fault at every operation,
/// table writes of its two compactions included.
#[test]
fn keyed_every_fault_at_every_operation_of_the_fixed_workload() {
    let started = Instant::now();
    let (runs, injected) = sweep::<KeyedTab>(&workload(), &codecs());
    eprintln!(
        "keyed fault injection: {runs} runs, {injected} faults injected, {:?}",
        started.elapsed()
    );
}

/// A keyed store with one table snapshot and a tail; `fault` from the start.
/// Returns the store and the model so far.
fn keyed_store(fs: &SimFs, codec: Codec) -> (Store<Keyed<Tab>>, Vec<(u64, usize)>) {
    let s = Store::<Keyed<Tab>>::open(dir(), sim_opts(fs, codec)).unwrap();
    let mut h = vec![];
    for v in 1..=80 {
        s.append(&entry(v, 300)).unwrap();
        h.push((v, 300));
        if v == 40 {
            s.compact().unwrap();
        }
    }
    (s, h)
}

fn snapshots(fs: &SimFs) -> Vec<std::path::PathBuf> {
    fs.with_state(|st| st.live_files())
        .into_keys()
        .filter(|p| p.to_string_lossy().ends_with(".snap"))
        .collect()
}

/// ENOSPC (once, or from then on) at every operation of a keyed compaction:
/// the compaction fails, the live state still reads through the previous
/// table, no new snapshot appears (unless the fault hit the directory fsync
/// after its rename), nothing is deleted, the store keeps appending (once the
/// disk has room), and a reopen holds every acknowledged transition. A fault
/// after the new table is durable (deleting old files) may be absorbed.
#[test]
fn keyed_full_disk_at_any_operation_of_a_compaction_leaves_the_previous_table_in_force() {
    for codec in codecs() {
        // Where the second compaction's operations are, on a clean run.
        let clean = SimFs::new();
        let (s, _) = keyed_store(&clean, codec);
        let (from, to) = (clean.ops(), {
            s.compact().unwrap();
            clean.ops()
        });
        drop(s);
        let clean_log = clean.op_log();
        let (mut failed, mut absorbed) = (0, 0);
        for at in from..to {
            for persistent in [false, true] {
                let fs = SimFs::new();
                let (s, mut h) = keyed_store(&fs, codec);
                assert_eq!(fs.ops(), from, "the run is deterministic");
                let (snaps, segs) = (snapshots(&fs), segments(&fs));
                fs.inject(Some(Fault {
                    at,
                    kind: FaultKind::Enospc,
                    persistent,
                }));
                let what = format!("{codec:?} ENOSPC at op {at} persistent {persistent}");
                let r = s.compact();
                if fs.faults_fired() == 0 {
                    continue; // this operation does not take ENOSPC
                }
                let e = match r {
                    Err(e) => e,
                    Ok(_) => {
                        // Only a fault after the new table was durable (a
                        // failed deletion of what it made redundant) is
                        // absorbed, or one on the durability mark's write right
                        // after an fsync (FORMAT.md §5.7: its failure fails no
                        // append; the records are durable, the proof is lost),
                        // or on the sync state's write after it (FORMAT.md §5.8:
                        // a hint; the next fsync finds it and refuses): a write
                        // reached from an fsync through the sync lock, the
                        // hint files' reads and writes only.
                        let log = &clean_log[from as usize..at as usize];
                        let hint_ops = [Op::Write, Op::Read, Op::TryLock, Op::OpenWrite];
                        let mark_write = clean_log[at as usize] == Op::Write
                            && clean_log[..at as usize]
                                .iter()
                                .rev()
                                .find(|o| !hint_ops.contains(o))
                                .is_some_and(|o| matches!(o, Op::Fsync | Op::SyncDir));
                        assert!(
                            mark_write || log.windows(2).any(|w| w == [Op::Rename, Op::SyncDir]),
                            "{what}: the compaction succeeded on a full disk"
                        );
                        absorbed += 1;
                        drop(s);
                        fs.inject(None);
                        let s = Store::<Keyed<Tab>>::open(dir(), sim_opts(&fs, codec)).unwrap();
                        assert_eq!(s.read(tab_observe).unwrap(), tab_model(&h), "{what}");
                        continue;
                    }
                };
                failed += 1;
                // The live state still reads through the previous table.
                assert_eq!(s.read(tab_observe).unwrap(), tab_model(&h), "{what}");
                // A new table appears only if the fault came after its rename
                // (the directory fsync failed): then it is complete and valid.
                let now = snapshots(&fs);
                let renamed = now != snaps;
                if renamed {
                    assert_eq!(
                        fs.op_log()[at as usize],
                        Op::SyncDir,
                        "{what}: {e}: {now:?}"
                    );
                    assert!(snaps.iter().all(|p| now.contains(p)), "{what}: {now:?}");
                }
                for p in &segs {
                    assert!(segments(&fs).contains(p), "{what}: deleted {}", p.display());
                }
                fs.inject(None);
                // Usable once the disk has room (or poisoned by the rules: reopen).
                let s = match s.append(&entry(81, 300)) {
                    Ok(_) => {
                        h.push((81, 300));
                        s
                    }
                    Err(Error::Poisoned { .. }) => {
                        drop(s);
                        Store::<Keyed<Tab>>::open(dir(), sim_opts(&fs, codec)).unwrap()
                    }
                    Err(e) => panic!("{what}: append after the failed compaction: {e}"),
                };
                drop(s);
                let s = Store::<Keyed<Tab>>::open(dir(), sim_opts(&fs, codec)).unwrap();
                if !renamed {
                    assert_eq!(s.recovery().snapshot_seq, Some(40), "{what}");
                }
                assert!(s.recovery().snapshot_fallbacks.is_empty(), "{what}");
                assert_eq!(s.read(tab_observe).unwrap(), tab_model(&h), "{what}");
            }
        }
        assert!(failed > 0, "no operation of the compaction failed");
        eprintln!(
            "{codec:?}: {failed} failed compactions, {absorbed} faults after the table was durable, over {} operations",
            to - from
        );
    }
}
