//! Crash images at every boundary of interleaved one-shot writers (FORMAT.md
//! §5.8). Three writers each open, write one record and release the writer
//! lock, then either run their shared fsync or are killed before it (the
//! lock already gone, the fsync never run); every order of those steps is
//! run, then a fourth writer appends after them. At every mutating operation
//! the crash outcomes the persistence model allows are recovered: each must
//! open without corruption and hold every record whose fsync had returned.
//! Every subset of the three may be killed: 8 × 90 orders per codec.
use crate::common;
use common::crash::*;
use common::*;
use runlog::engine::sim::{Persistence, SimFs};
use runlog::engine::{Codec, Options, Store, SyncPolicy};
use std::sync::{Arc, Mutex};

/// Crash images, each with the values acknowledged when it was taken.
type Images = Vec<(SimFs, Vec<u64>)>;

#[derive(Debug, Clone, Copy)]
enum Step {
    Write(usize),
    Sync(usize),
    Kill(usize),
}

/// Every order of each writer's write before its end.
fn orders(ends: &[Step]) -> Vec<Vec<Step>> {
    interleavings(ends, Step::Write)
}

fn one_shot(fs: &SimFs, codec: Codec, sync: SyncPolicy) -> Options {
    Options {
        one_shot: true,
        sync,
        ..sim_opts(fs, codec)
    }
}

/// Runs `order` over a store holding value 1; returns the crash images
/// taken with the values acknowledged when each was taken.
fn run(codec: Codec, order: &[Step], model: Persistence, seed: u64) -> Images {
    let fs = SimFs::new();
    let s = Store::<Ledger>::open(dir(), sim_opts(&fs, codec)).unwrap();
    s.append(&entry(1, 10)).unwrap();
    drop(s);
    let images: Arc<Mutex<Images>> = Arc::default();
    let acked: Arc<Mutex<Vec<u64>>> = Arc::new(Mutex::new(vec![1]));
    {
        let (images, acked) = (images.clone(), acked.clone());
        let mut n = seed;
        fs.observe(Some(Box::new(move |s, _, _| {
            n += 1;
            let a = acked.lock().unwrap().clone();
            for choice in s.outcomes(model, 3, n) {
                images.lock().unwrap().push((s.image(&choice), a.clone()));
            }
        })));
    }
    let mut writers: Vec<Option<(Store<Ledger>, u64)>> = (0..3).map(|_| None).collect();
    for step in order {
        match *step {
            Step::Write(w) => {
                let st = Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Never))
                    .unwrap_or_else(|e| panic!("{order:?}: writer {w} opens: {e}"));
                let value = 10 + w as u64;
                st.append(&entry(value, 10))
                    .unwrap_or_else(|e| panic!("{order:?}: writer {w} writes: {e}"));
                writers[w] = Some((st, value));
            }
            Step::Sync(w) => {
                let (st, value) = writers[w].take().unwrap();
                // Refused only after a failure, and there is none here.
                st.sync()
                    .unwrap_or_else(|e| panic!("{order:?}: writer {w} syncs: {e}"));
                acked.lock().unwrap().push(value);
                drop(st);
            }
            Step::Kill(w) => std::mem::forget(writers[w].take().unwrap()),
        }
    }
    let last = Store::<Ledger>::open(dir(), one_shot(&fs, codec, SyncPolicy::Always)).unwrap();
    last.append(&entry(99, 10))
        .unwrap_or_else(|e| panic!("{order:?}: the writer after them: {e}"));
    acked.lock().unwrap().push(99);
    drop(last);
    fs.observe(None);
    let mut out = std::mem::take(&mut *images.lock().unwrap());
    out.push((fs.crash(&[]), acked.lock().unwrap().clone()));
    out
}

#[test]
fn every_crash_of_interleaved_one_shot_writers_keeps_every_acknowledged_record() {
    let end_sets: Vec<[Step; 3]> = (0..8)
        .map(|k: usize| {
            let end = |w: usize| match k >> w & 1 {
                1 => Step::Kill(w),
                _ => Step::Sync(w),
            };
            [end(0), end(1), end(2)]
        })
        .collect();
    let (mut runs, mut states) = (0usize, 0usize);
    for codec in codecs() {
        for ends in &end_sets {
            for (i, order) in orders(ends).into_iter().enumerate() {
                let model = [Persistence::Ordered, Persistence::Weak][i % 2];
                for (img, acked) in run(codec, &order, model, i as u64) {
                    let (st, _) = recover(&img, codec, None).unwrap_or_else(|e| {
                        panic!("{codec:?} {order:?} {model:?}: a crash state does not recover: {e}")
                    });
                    for v in &acked {
                        assert!(
                            st.values.contains(v),
                            "{codec:?} {order:?} {model:?}: acknowledged {v} lost: {:?}",
                            st.values
                        );
                    }
                    states += 1;
                }
                runs += 1;
            }
        }
    }
    eprintln!("many_writers_crash: {runs} orders, {states} crash states recovered");
    // 90 orders per set of ends, eight sets, two codecs.
    assert!(runs >= 1440, "{runs} orders");
    assert!(
        states >= 20 * runs,
        "{states} crash states over {runs} orders"
    );
}
