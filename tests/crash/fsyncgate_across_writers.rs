//! A failed fsync across writer processes (FORMAT.md §5.8, §7; issue 48).
//!
//! When one process's fdatasync of a segment fails, the kernel may drop the
//! file's unsynced pages (reads return the old bytes) or keep them marked
//! clean (a later fsync never writes them), for every process that wrote
//! them. Each "process" here is a one-shot writer's own open of one simulated
//! filesystem, whose page cache they share as processes on one machine do;
//! both ways of failing are run ([`FailedFsync`]).
//!
//! First the schedule an outside test found losing an acknowledged record
//! every time: A appends and waits before the sync lock; B appends and its
//! fsync fails, dropping A's record; C opens, appends at A's seq and syncs;
//! A must not acknowledge. Then every order of three writers, each writing
//! one record and then syncing, failing its fsync, or being killed, followed
//! by a fourth: crash images at every mutating operation must open and hold
//! every record acknowledged before them, every acknowledged record must be
//! the log's record at its seq, and the store must accept writes after. The
//! same with the third writer long-lived (it holds the writer lock from its
//! open to its close, and syncs alone once its fsync covered its own). Then
//! an I/O error at every operation of every step (each open, catch-up,
//! append, `SHARED` write, fsync, mark) of sampled orders
//! (`RUNLOG_CRASH_FSYNCGATE_ORDERS`: 8 at the quick depth, 24 at the full one;
//! seeded by `RUNLOG_CRASH_SEED`).
use crate::common;
use crate::depth;
use common::crash::*;
use common::*;
use runlog::engine::sim::{FailedFsync, Fault, FaultKind, Op, Persistence, SimFs, SimRng};
use runlog::engine::{Codec, Error, Options, Store, SyncPolicy};
use std::sync::{Arc, Mutex};

fn one_shot(fs: &SimFs, codec: Codec) -> Options {
    Options {
        one_shot: true,
        // The append is written and the writer lock let go; `sync` is §5.8's
        // step 3, so the test holds each writer between the two.
        sync: SyncPolicy::Never,
        // A writer lock held (by a long-lived writer) refuses at once.
        lock_wait: None,
        ..sim_opts(fs, codec)
    }
}

/// A store holding values 1 and 2, fsynced and marked.
fn two_records(fs: &SimFs, codec: Codec) {
    let s = Store::<Ledger>::open(dir(), sim_opts(fs, codec)).unwrap();
    s.append(&entry(1, 10)).unwrap();
    s.append(&entry(2, 10)).unwrap();
    s.close().unwrap();
}

/// The values of the store as a writer opens it now.
fn values(fs: &SimFs, codec: Codec) -> Vec<u64> {
    let (st, _) = recover(&fs.crash(&[]), codec, None).unwrap();
    st.values
}

#[test]
fn a_writer_whose_record_another_writers_failed_fsync_lost_is_refused_not_acknowledged() {
    for codec in codecs() {
        for how in [FailedFsync::DropPages, FailedFsync::KeepClean] {
            let fs = SimFs::new();
            fs.on_failed_fsync(how);
            two_records(&fs, codec);
            // A appends seq 3 and is held before the sync lock.
            let a = Store::<Ledger>::open(dir(), one_shot(&fs, codec)).unwrap();
            assert_eq!(a.append(&entry(10, 10)).unwrap(), 3);
            // B appends seq 4; its fsync fails.
            let b = Store::<Ledger>::open(dir(), one_shot(&fs, codec)).unwrap();
            assert_eq!(b.append(&entry(11, 10)).unwrap(), 4);
            fs.fail_next(Some((Op::Fsync, FaultKind::Eio)));
            assert!(
                b.sync().is_err(),
                "{codec:?} {how:?}: B's fsync was made to fail"
            );
            drop(b);
            // C opens after it: the run opens and accepts C's record.
            let c = Store::<Ledger>::open(dir(), one_shot(&fs, codec))
                .unwrap_or_else(|e| panic!("{codec:?} {how:?}: C opens after the failure: {e}"));
            let c_seq = c.append(&entry(12, 10)).unwrap();
            c.sync()
                .unwrap_or_else(|e| panic!("{codec:?} {how:?}: C syncs its own record: {e}"));
            drop(c);
            // A resumes: whatever holds its seq now, A's record was never
            // proven durable by an fsync that covered its bytes.
            let r = a.sync();
            let log = values(&fs, codec);
            match r {
                Ok(()) => {
                    assert_eq!(
                        log.get(2),
                        Some(&10),
                        "{codec:?} {how:?}: A acknowledged seq 3, which holds {:?} \
                         (C's record is at seq {c_seq}); the log: {log:?}",
                        log.get(2)
                    );
                }
                Err(e) => {
                    let msg = e.to_string();
                    assert!(
                        msg.contains("fsync") || msg.contains("sync"),
                        "{codec:?} {how:?}: A's refusal says why: {msg}"
                    );
                }
            }
            // C's acknowledged record is the log's at its seq, in the live
            // store and after a power loss.
            assert_eq!(
                log.get(c_seq as usize - 1),
                Some(&12),
                "{codec:?} {how:?}: {log:?}"
            );
            let (after_crash, _) = recover(&fs.crash(&[]), codec, None).unwrap();
            assert!(after_crash.values.contains(&12), "{codec:?} {how:?}");
            assert_eq!(&after_crash.values[..2], &[1, 2]);
        }
    }
}

/// Found by the multi-process fault soak (tests/cli/cli_fault_soak.rs) on
/// the generation rule alone: writer C replays without the writer lock and
/// reads W's record at seq 3; before C takes the lock, W's fsync fails and
/// drops it, and (in one variant) writer D writes a shorter record of its own
/// as seq 3 and syncs it. C's catch-up read on from where its replay ended,
/// past the hole, and appended seq 4 after it, or its open copied the zeros
/// into a durable segment; either was acknowledged and lost. C must replay
/// again once the failure is recorded.
#[test]
fn a_replay_that_read_a_record_a_failed_fsync_then_dropped_is_not_built_on() {
    for codec in codecs() {
        for how in [FailedFsync::DropPages, FailedFsync::KeepClean] {
            for d_writes in [false, true] {
                let ctx = format!("{codec:?} {how:?} D writes: {d_writes}");
                let fs = SimFs::new();
                fs.on_failed_fsync(how);
                two_records(&fs, codec);
                let w = Store::<Ledger>::open(dir(), one_shot(&fs, codec)).unwrap();
                assert_eq!(w.append(&entry(10, 40)).unwrap(), 3);
                let acked: Arc<Mutex<Acked>> = Arc::new(Mutex::new(vec![(1, 1), (2, 2)]));
                let held = Arc::new(Mutex::new(Some(w)));
                {
                    let (fs2, held, acked) = (fs.clone(), held.clone(), acked.clone());
                    fs.on_try_lock(Some(Box::new(move |path| {
                        // C, its replay done, is about to take the writer lock.
                        if !path.ends_with("LOCK") {
                            return;
                        }
                        let Some(w) = held.lock().unwrap().take() else {
                            return;
                        };
                        fs2.fail_next(Some((Op::Fsync, FaultKind::Eio)));
                        assert!(w.sync().is_err(), "W's fsync was made to fail");
                        drop(w);
                        if d_writes {
                            let d = Store::<Ledger>::open(dir(), one_shot(&fs2, codec)).unwrap();
                            let seq = d.append(&entry(12, 1)).unwrap();
                            d.sync().unwrap();
                            acked.lock().unwrap().push((12, seq));
                        }
                    })));
                }
                let c = Store::<Ledger>::open(dir(), one_shot(&fs, codec))
                    .unwrap_or_else(|e| panic!("{ctx}: C opens: {e}"));
                fs.on_try_lock(None);
                assert!(held.lock().unwrap().is_none(), "{ctx}: the hook ran");
                let seq = c.append(&entry(11, 10)).unwrap();
                if c.sync().is_ok() {
                    acked.lock().unwrap().push((11, seq));
                }
                drop(c);
                let last = Store::<Ledger>::open(dir(), one_shot(&fs, codec))
                    .unwrap_or_else(|e| panic!("{ctx}: the writer after them opens: {e}"));
                let seq = last.append(&entry(99, 10)).unwrap();
                last.sync()
                    .unwrap_or_else(|e| panic!("{ctx}: the writer after them syncs: {e}"));
                acked.lock().unwrap().push((99, seq));
                drop(last);
                let out = Outcome {
                    images: vec![],
                    acked: acked.lock().unwrap().clone(),
                    fs,
                    ops: 0..0,
                };
                assert!(
                    out.acked.iter().any(|a| a.0 == 11),
                    "{ctx}: C is acknowledged"
                );
                check(out, codec, &ctx);
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Open and append one record (a one-shot writer lets the writer lock go).
    Write(usize),
    /// The shared fsync (§5.8 step 3; a long-lived writer's own).
    Sync(usize),
    /// The same, with the next fsync of the log failing.
    FailSync(usize),
    /// Killed after its write, before its sync.
    Kill(usize),
}

/// Every order of each writer's write before its end.
fn orders(ends: &[Step]) -> Vec<Vec<Step>> {
    interleavings(ends, Step::Write)
}

/// The ends of three writers numbered `k` in base 3 (sync, fail, kill).
fn ends_of(k: usize) -> [Step; 3] {
    let mut e = [Step::Sync(0); 3];
    let mut k = k;
    for (w, end) in e.iter_mut().enumerate() {
        *end = match k % 3 {
            0 => Step::Sync(w),
            1 => Step::FailSync(w),
            _ => Step::Kill(w),
        };
        k /= 3;
    }
    e
}

/// Acknowledged (value, seq) pairs.
type Acked = Vec<(u64, u64)>;
type Images = Vec<(SimFs, Acked)>;

/// One run: the order, how a failed fsync goes, which writer (if any) is
/// long-lived, crash images (under a model) or none, and an injected I/O
/// error at one operation (then every step may fail, and is let fail).
#[derive(Debug, Clone, Copy)]
struct Plan<'a> {
    codec: Codec,
    how: FailedFsync,
    order: &'a [Step],
    long_lived: Option<usize>,
    images: Option<(Persistence, u64)>,
    fault_at: Option<u64>,
}

struct Outcome {
    images: Images,
    acked: Acked,
    fs: SimFs,
    /// Operations the run made after the store was set up.
    ops: std::ops::Range<u64>,
}

fn run(p: Plan<'_>) -> Outcome {
    let (codec, how, order) = (p.codec, p.how, p.order);
    let ctx = format!(
        "{codec:?} {how:?} {order:?} long-lived {:?} fault at {:?}",
        p.long_lived, p.fault_at
    );
    let fs = SimFs::new();
    fs.on_failed_fsync(how);
    two_records(&fs, codec);
    let start = fs.ops();
    let images: Arc<Mutex<Images>> = Arc::default();
    let acked: Arc<Mutex<Acked>> = Arc::new(Mutex::new(vec![(1, 1), (2, 2)]));
    if let Some((model, seed)) = p.images {
        let (images, acked) = (images.clone(), acked.clone());
        let mut n = seed;
        fs.observe(Some(Box::new(move |s, _, _| {
            n += 1;
            let a = acked.lock().unwrap().clone();
            for choice in s.outcomes(model, 2, n) {
                images.lock().unwrap().push((s.image(&choice), a.clone()));
            }
        })));
    }
    fs.inject(p.fault_at.map(|at| Fault {
        at,
        kind: FaultKind::Eio,
        persistent: false,
    }));
    let faulted = p.fault_at.is_some();
    let mut writers: Vec<Option<(Store<Ledger>, u64, u64)>> = (0..3).map(|_| None).collect();
    // Whether a failure came after each writer's write (then its sync may be refused).
    let mut failed_since = [false; 3];
    let mut long_lived_open = false;
    for step in order {
        match *step {
            Step::Write(w) => {
                let long = p.long_lived == Some(w);
                let o = match long {
                    true => Options {
                        sync: SyncPolicy::Never,
                        ..sim_opts(&fs, codec)
                    },
                    false => one_shot(&fs, codec),
                };
                let st = match Store::<Ledger>::open(dir(), o) {
                    Ok(st) => st,
                    Err(Error::Locked { .. }) if long_lived_open => continue,
                    Err(_) if faulted => continue,
                    Err(e) => panic!("{ctx}: writer {w} opens: {e}"),
                };
                let value = 10 + w as u64;
                let seq = match st.append(&entry(value, 10)) {
                    Ok(seq) => seq,
                    Err(_) if faulted => continue,
                    Err(e) => panic!("{ctx}: writer {w} writes: {e}"),
                };
                long_lived_open |= long;
                writers[w] = Some((st, value, seq));
            }
            Step::Sync(w) | Step::FailSync(w) => {
                let Some((st, value, seq)) = writers[w].take() else {
                    continue;
                };
                let fail = matches!(step, Step::FailSync(_));
                if fail {
                    fs.fail_next(Some((Op::Fsync, FaultKind::Eio)));
                }
                let r = st.sync();
                // A sync the mark covered ran no fsync: the fault is not spent.
                fs.fail_next(None);
                match r {
                    Ok(()) => acked.lock().unwrap().push((value, seq)),
                    Err(e) => {
                        assert!(
                            fail || faulted || failed_since[w],
                            "{ctx}: writer {w}'s sync refused with no failure since its write: {e}"
                        );
                        if fail {
                            for (v, f) in failed_since.iter_mut().enumerate() {
                                *f |= writers[v].is_some();
                            }
                        }
                    }
                }
                if p.long_lived == Some(w) {
                    // Its close may meet the injected fault; what it acknowledged stands.
                    let _ = st.close();
                    long_lived_open = false;
                } else {
                    drop(st);
                }
            }
            Step::Kill(w) => {
                if let Some(st) = writers[w].take() {
                    std::mem::forget(st);
                }
            }
        }
    }
    let ops = start..fs.ops();
    fs.inject(None);
    let last = Store::<Ledger>::open(dir(), one_shot(&fs, codec))
        .unwrap_or_else(|e| panic!("{ctx}: the writer after them opens: {e}"));
    let seq = last
        .append(&entry(99, 10))
        .unwrap_or_else(|e| panic!("{ctx}: the writer after them: {e}"));
    last.sync()
        .unwrap_or_else(|e| panic!("{ctx}: the writer after them syncs: {e}"));
    acked.lock().unwrap().push((99, seq));
    drop(last);
    fs.observe(None);
    let images = std::mem::take(&mut *images.lock().unwrap());
    let acked = acked.lock().unwrap().clone();
    Outcome {
        images,
        acked,
        fs,
        ops,
    }
}

/// Every acknowledged record is the log's at its seq, in the store as the
/// next writer opens it and after a power loss now, and every crash image
/// opens and holds what had been acknowledged when it was taken. Returns the
/// number of images checked.
fn check(out: Outcome, codec: Codec, ctx: &str) -> usize {
    let live = values(&out.fs, codec);
    for (v, s) in &out.acked {
        assert_eq!(
            live.get(*s as usize - 1),
            Some(v),
            "{ctx}: acknowledged {v} at seq {s}; the log: {live:?}"
        );
    }
    let (st, _) = recover(&out.fs.crash(&[]), codec, None)
        .unwrap_or_else(|e| panic!("{ctx}: the power-loss image at the end: {e}"));
    for (v, s) in &out.acked {
        assert_eq!(
            st.values.get(*s as usize - 1),
            Some(v),
            "{ctx}: acknowledged {v} at seq {s} lost at a power loss: {:?}",
            st.values
        );
    }
    let n = out.images.len();
    for (img, acked) in out.images {
        let (st, _) = recover(&img, codec, None)
            .unwrap_or_else(|e| panic!("{ctx}: a crash image does not open: {e}"));
        for (v, s) in &acked {
            assert_eq!(
                st.values.get(*s as usize - 1),
                Some(v),
                "{ctx}: acknowledged {v} at seq {s} lost: {:?}",
                st.values
            );
        }
    }
    n
}

/// Every order of the end sets (those with at least one failed fsync), both
/// ways a failed fsync goes, crash images at every mutating operation.
fn enumerate(long_lived: Option<usize>) -> (usize, usize, usize) {
    let (mut runs, mut states, mut refused) = (0usize, 0usize, 0usize);
    for codec in codecs() {
        for e in 0..27 {
            let ends = ends_of(e);
            if !ends.iter().any(|s| matches!(s, Step::FailSync(_))) {
                continue;
            }
            if long_lived.is_some_and(|l| matches!(ends[l], Step::Kill(_))) {
                // A killed long-lived writer's lock outlives it here: the
                // kill -9 soaks and the copy's rows (§5.8) cover it.
                continue;
            }
            for (i, order) in orders(&ends).into_iter().enumerate() {
                let how = [FailedFsync::DropPages, FailedFsync::KeepClean][(i + e) % 2];
                let model = [Persistence::Ordered, Persistence::Weak][(i / 2) % 2];
                let plan = Plan {
                    codec,
                    how,
                    order: &order,
                    long_lived,
                    images: Some((model, (e * 1000 + i) as u64)),
                    fault_at: None,
                };
                let ctx =
                    format!("{codec:?} {how:?} {model:?} {order:?} long-lived {long_lived:?}");
                let out = run(plan);
                refused += 6 - out.acked.len();
                states += check(out, codec, &ctx);
                runs += 1;
            }
        }
    }
    (runs, states, refused)
}

#[test]
fn every_order_of_three_writers_with_a_failed_fsync_keeps_every_acknowledged_record() {
    let (runs, states, refused) = enumerate(None);
    eprintln!(
        "fsyncgate_across_writers: {runs} orders, {states} crash images recovered, \
         {refused} writes refused or killed"
    );
    // 19 sets of ends with a failure, 90 orders each, two codecs.
    assert!(runs >= 19 * 90 * 2, "{runs} orders");
    assert!(
        states >= 10 * runs,
        "{states} crash images over {runs} orders"
    );
}

#[test]
fn a_long_lived_writer_among_one_shot_writers_with_a_failed_fsync_keeps_every_acknowledged_record()
{
    let (runs, states, refused) = enumerate(Some(2));
    eprintln!(
        "fsyncgate_across_writers (writer 2 long-lived): {runs} orders, {states} crash images \
         recovered, {refused} writes refused, killed or locked out"
    );
    // 13 sets of ends with a failure and writer 2 not killed, 90 orders each, two codecs.
    assert!(runs >= 13 * 90 * 2, "{runs} orders");
    assert!(
        states >= 10 * runs,
        "{states} crash images over {runs} orders"
    );
}

#[test]
fn an_io_error_at_every_operation_of_interleaved_writers_loses_no_acknowledged_record() {
    let n = depth::scaled("RUNLOG_CRASH_FSYNCGATE_ORDERS", 8, 24) as usize;
    let seed = env_u64("RUNLOG_CRASH_SEED", 0x05ee_df5c);
    let mut rng = SimRng::new(seed);
    // Every set of ends (sync, failed fsync, kill), every order; sampled.
    let mut all = vec![];
    for e in 0..27 {
        for order in orders(&ends_of(e)) {
            all.push(order);
        }
    }
    let (mut runs, mut faults) = (0usize, 0u64);
    for k in 0..n {
        let order = all[rng.below(all.len() as u64) as usize].clone();
        let codec = codecs()[k % 2];
        let how = [FailedFsync::DropPages, FailedFsync::KeepClean][(k / 2) % 2];
        let long_lived = [None, Some(2)][(k / 4) % 2].filter(|&l| {
            !matches!(
                order.iter().rfind(|s| step_writer(s) == l),
                Some(Step::Kill(_))
            )
        });
        let base = Plan {
            codec,
            how,
            order: &order,
            long_lived,
            images: None,
            fault_at: None,
        };
        let ops = run(base).ops;
        for at in ops {
            let ctx = format!(
                "seed {seed:#x} sample {k}: {codec:?} {how:?} {order:?} long-lived {long_lived:?}, \
                 EIO at operation {at}"
            );
            let out = run(Plan {
                fault_at: Some(at),
                ..base
            });
            check(out, codec, &ctx);
            runs += 1;
            faults += 1;
        }
    }
    depth::explored(
        "fsyncgate_across_writers EIO",
        format_args!(
            "{n} sampled orders (RUNLOG_CRASH_SEED={seed}), an I/O error at each of \
             their {faults} operations, {runs} runs checked"
        ),
    );
    assert!(
        faults as usize >= 20 * n,
        "{faults} operations faulted over {n} orders"
    );
}

fn step_writer(s: &Step) -> usize {
    match *s {
        Step::Write(w) | Step::Sync(w) | Step::FailSync(w) | Step::Kill(w) => w,
    }
}
