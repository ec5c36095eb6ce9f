//! Proves (regression: "seq gap below the snapshot after a crash during log
//! trimming") that when a crash persists only some of compaction's unlinks of
//! old segments, leaving a gap among segments the snapshot covers, recovery,
//! a reader's state and verify accept the store and recover every transition.
use crate::common;
use common::crash::*;
use common::*;
use runlog::engine::sim::{Fate, Op, Pending, SimFs, SimState};
use runlog::engine::{self, Integrity, Store};
use std::sync::{Arc, Mutex};

#[test]
fn gap_below_snapshot_from_partial_unlinks_is_not_corruption() {
    for codec in codecs() {
        let fs = SimFs::new();
        let o = sim_opts(&fs, codec);
        // At the directory fsync that ends the second trim, crash with only the
        // second of its unlinks persisted (every other pending op absent).
        let img = Arc::new(Mutex::new(None));
        let img2 = img.clone();
        fs.observe(Some(Box::new(move |st: &SimState, _, op| {
            let unlinks: Vec<usize> = st
                .pending()
                .iter()
                .enumerate()
                .filter(|(_, p)| matches!(p, Pending::Dir { .. }))
                .map(|(i, _)| i)
                .collect();
            if op == Op::SyncDir && unlinks.len() >= 3 {
                let mut choice = vec![Fate::Absent; unlinks[1] + 1];
                choice[unlinks[1]] = Fate::Whole;
                *img2.lock().unwrap() = Some(st.image(&choice));
            }
        })));
        let s = Store::<Ledger>::open(dir(), o.clone()).unwrap();
        let mut values = vec![];
        for round in 0..2u64 {
            for v in 1..=30 {
                let v = round * 100 + v;
                s.append(&entry(v, 300)).unwrap();
                values.push(v);
            }
            s.compact().unwrap();
        }
        drop(s);
        let img = img
            .lock()
            .unwrap()
            .take()
            .expect("a trim of several segments");
        let v = engine::Reader::new(&img, &dir()).verify().unwrap();
        assert!(matches!(v.integrity, Integrity::Clean), "{:?}", v.integrity);
        let (st, _) = engine::Reader::new(&img, &dir()).state::<Ledger>().unwrap();
        assert_eq!(st, model(&values, 300));
        let s = Store::<Ledger>::open(dir(), sim_opts(&img, codec)).unwrap();
        assert_eq!(s.read(|st| st.clone()), model(&values, 300));
    }
}
