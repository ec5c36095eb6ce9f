//! Proves that an I/O error at any single operation of a workload, once or from
//! then on, is handled: EINTR and short writes are retried invisibly; EIO and
//! ENOSPC fail the calls they hit, a failed write or fsync poisons the store (no
//! further write, fsync or acknowledgement until reopened), a failed compaction
//! deletes nothing; and after reopening on the filesystem as crashed the
//! recovered history is a prefix of the issued one holding every acknowledged
//! transition.
mod common;
use common::crash::*;
use common::*;
use runlog::engine::sim::{Fault, FaultKind, Op, Persistence, SimFs};
use runlog::engine::{Codec, Error, Store};
use std::time::Instant;

fn workload() -> Vec<Step> {
    vec![
        Step::Append(1),
        Step::Append(4097),
        Step::Batch(vec![Some(511), None, Some(512), Some(1)]),
        Step::Append(4095),
        Step::Compact,
        Step::Append(64 << 10),
        Step::Append(512),
        Step::Reopen,
        Step::Batch(vec![Some(1), Some(4097)]),
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
fn run(codec: Codec, steps: &[Step], fault: Option<Fault>) -> Result<Run, String> {
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
    let mut store = Store::<Ledger>::open(dir(), o.clone()).ok();
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
            Step::Compact => {
                let segs = segments(&fs);
                if s.compact().is_err() {
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
            Step::Reopen => {
                drop(store.take());
                poisoned = false;
                match Store::<Ledger>::open(dir(), o.clone()) {
                    Ok(s) => {
                        // Rebase H on what survived (unacknowledged staged records may not).
                        let st = s.read(|st| st.clone());
                        let k = check_prefix(&h, acked, &st).map_err(|e| format!("reopen: {e}"))?;
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
fn check_after(r: &Run, codec: Codec, seed: u64) -> Result<(), String> {
    for model in [Persistence::Ordered, Persistence::WeakDirs] {
        let outcomes = r.fs.with_state(|s| s.outcomes(model, 3, seed));
        for o in outcomes {
            let img = r.fs.crash(&o);
            let (st, _) = recover(&img, codec, None)?;
            check_prefix(&r.h, r.acked, &st)?;
        }
    }
    Ok(())
}

/// Injects every applicable fault at every operation of `steps`; returns (runs, faults).
fn sweep(steps: &[Step], codecs: &[Codec]) -> (u64, u64) {
    let mut injected = 0u64;
    let mut runs = 0u64;
    for &codec in codecs {
        let clean = run(codec, steps, None).unwrap();
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
                    let r = run(codec, steps, Some(fault)).map_err(ctx).unwrap();
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
                    check_after(&r, codec, at as u64).map_err(ctx).unwrap();
                }
            }
        }
    }
    (runs, injected)
}

#[test]
fn every_fault_at_every_operation_of_the_fixed_workload() {
    let started = Instant::now();
    let (runs, injected) = sweep(&workload(), &codecs());
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

/// Random single-threaded workloads of 30 steps (RUNLOG_FAULT_SEEDS, default 6).
#[test]
fn every_fault_at_every_operation_of_random_workloads() {
    let started = Instant::now();
    let n: u64 = std::env::var("RUNLOG_FAULT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
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
        let r = std::panic::catch_unwind(|| sweep(&steps, &[codec]));
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
    eprintln!(
        "fault injection, {n} random workloads: {runs} runs, {injected} faults injected, {:?}",
        started.elapsed()
    );
}
