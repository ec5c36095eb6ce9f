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
//! the log's record at its seq, and the store must accept writes after.
use crate::common;
use common::crash::*;
use common::*;
use runlog::engine::sim::{FailedFsync, FaultKind, Op, Persistence, SimFs};
use runlog::engine::{Codec, Options, Store, SyncPolicy};
use std::sync::{Arc, Mutex};

fn one_shot(fs: &SimFs, codec: Codec) -> Options {
    Options {
        one_shot: true,
        // The append is written and the writer lock let go; `sync` is §5.8's
        // step 3, so the test holds each writer between the two.
        sync: SyncPolicy::Never,
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

#[derive(Debug, Clone, Copy)]
enum Step {
    /// Open as a one-shot writer and append one record (writer lock let go).
    Write(usize),
    /// The shared fsync (§5.8 step 3).
    Sync(usize),
    /// The same, with the next fsync of the log failing.
    FailSync(usize),
    /// Killed after its write, before its sync.
    Kill(usize),
}

/// Every order of each writer's write before its end.
fn orders(ends: &[Step]) -> Vec<Vec<Step>> {
    fn go(ends: &[Step], next: &mut [usize], prefix: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
        let mut any = false;
        for w in 0..ends.len() {
            let step = match next[w] {
                0 => Step::Write(w),
                1 => ends[w],
                _ => continue,
            };
            any = true;
            next[w] += 1;
            prefix.push(step);
            go(ends, next, prefix, out);
            prefix.pop();
            next[w] -= 1;
        }
        if !any {
            out.push(prefix.clone());
        }
    }
    let mut out = vec![];
    go(ends, &mut vec![0; ends.len()], &mut vec![], &mut out);
    out
}

/// Acknowledged (value, seq) pairs.
type Acked = Vec<(u64, u64)>;
type Images = Vec<(SimFs, Acked)>;

struct Outcome {
    images: Images,
    acked: Acked,
    fs: SimFs,
}

fn run(codec: Codec, how: FailedFsync, order: &[Step], model: Persistence, seed: u64) -> Outcome {
    let fs = SimFs::new();
    fs.on_failed_fsync(how);
    two_records(&fs, codec);
    let images: Arc<Mutex<Images>> = Arc::default();
    let acked: Arc<Mutex<Acked>> = Arc::new(Mutex::new(vec![(1, 1), (2, 2)]));
    {
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
    let mut writers: Vec<Option<(Store<Ledger>, u64, u64)>> = (0..3).map(|_| None).collect();
    // Whether a failure came after each writer's write (then its sync may be refused).
    let mut failed_since = [false; 3];
    for step in order {
        match *step {
            Step::Write(w) => {
                let st = Store::<Ledger>::open(dir(), one_shot(&fs, codec))
                    .unwrap_or_else(|e| panic!("{order:?} {how:?}: writer {w} opens: {e}"));
                let value = 10 + w as u64;
                let seq = st
                    .append(&entry(value, 10))
                    .unwrap_or_else(|e| panic!("{order:?} {how:?}: writer {w} writes: {e}"));
                writers[w] = Some((st, value, seq));
            }
            Step::Sync(w) | Step::FailSync(w) => {
                let (st, value, seq) = writers[w].take().unwrap();
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
                            fail || failed_since[w],
                            "{codec:?} {how:?} {order:?}: writer {w}'s sync refused with no \
                             failure since its write: {e}"
                        );
                        if fail {
                            for (v, f) in failed_since.iter_mut().enumerate() {
                                *f |= writers[v].is_some();
                            }
                        }
                    }
                }
                drop(st);
            }
            Step::Kill(w) => std::mem::forget(writers[w].take().unwrap()),
        }
    }
    let last = Store::<Ledger>::open(dir(), one_shot(&fs, codec)).unwrap_or_else(|e| {
        panic!("{codec:?} {how:?} {order:?}: the writer after them opens: {e}")
    });
    let seq = last
        .append(&entry(99, 10))
        .unwrap_or_else(|e| panic!("{codec:?} {how:?} {order:?}: the writer after them: {e}"));
    last.sync().unwrap_or_else(|e| {
        panic!("{codec:?} {how:?} {order:?}: the writer after them syncs: {e}")
    });
    acked.lock().unwrap().push((99, seq));
    drop(last);
    fs.observe(None);
    let images = std::mem::take(&mut *images.lock().unwrap());
    let acked = acked.lock().unwrap().clone();
    Outcome { images, acked, fs }
}

#[test]
fn every_order_of_three_writers_with_a_failed_fsync_keeps_every_acknowledged_record() {
    // Each writer's end: synced, its fsync failing, or killed; at least one fails.
    let ends_of = |k: usize| {
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
    };
    let end_sets: Vec<[Step; 3]> = (0..27)
        .map(ends_of)
        .filter(|e| e.iter().any(|s| matches!(s, Step::FailSync(_))))
        .collect();
    let (mut runs, mut states, mut refused) = (0usize, 0usize, 0usize);
    for codec in codecs() {
        for (e, ends) in end_sets.iter().enumerate() {
            for (i, order) in orders(ends).into_iter().enumerate() {
                let how = [FailedFsync::DropPages, FailedFsync::KeepClean][(i + e) % 2];
                let model = [Persistence::Ordered, Persistence::Weak][(i / 2) % 2];
                let out = run(codec, how, &order, model, (e * 1000 + i) as u64);
                let ctx = format!("{codec:?} {how:?} {model:?} {order:?}");
                // Every acknowledged record is the log's at its seq, once.
                let live = values(&out.fs, codec);
                for (v, s) in &out.acked {
                    assert_eq!(
                        live.get(*s as usize - 1),
                        Some(v),
                        "{ctx}: acknowledged {v} at seq {s}; the log: {live:?}"
                    );
                }
                refused += 6 - out.acked.len();
                let (st, _) = recover(&out.fs.crash(&[]), codec, None)
                    .unwrap_or_else(|e| panic!("{ctx}: the power-loss image at the end: {e}"));
                for (v, _) in &out.acked {
                    assert!(
                        st.values.contains(v),
                        "{ctx}: {v} lost at the end: {:?}",
                        st.values
                    );
                }
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
                    states += 1;
                }
                runs += 1;
            }
        }
    }
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
