//! Regression: under the weak persistence model a crash can persist an unsynced
//! batch with a hole in it (a sector of an earlier record lost, later records
//! whole). No acknowledged record is damaged, yet recovery used to report
//! corruption ("damage followed by a valid record"). Each record now carries the
//! durable watermark it was written under (`synced`, FORMAT.md §3), so recovery
//! sees the later records were written before the damaged one was durable, and
//! drops the unacknowledged tail as torn.
use crate::common;
use common::crash::*;
use common::*;
use runlog::engine::Store;
use runlog::engine::sim::{Fate, SectorFate, SimFs};

#[test]
fn hole_in_unsynced_batch_is_a_torn_tail() {
    for codec in codecs() {
        let fs = SimFs::new();
        let s = Store::<Ledger>::open(dir(), sim_opts(&fs, codec)).unwrap();
        s.append(&entry(1, 10)).unwrap();
        // Crash just after the batch's write, before its fsync: the batch is the
        // only pending write; persist it with its first sector lost.
        let batch: Vec<Entry> = (2..=5).map(|v| entry(v, 600)).collect();
        let img = std::sync::Arc::new(std::sync::Mutex::new(None));
        let img2 = img.clone();
        fs.observe(Some(Box::new(move |st, _, op| {
            if op == runlog::engine::sim::Op::Fsync && img2.lock().unwrap().is_none() {
                let p = st.pending();
                let Some(runlog::engine::sim::Pending::Write { sectors, .. }) = p.last() else {
                    return;
                };
                let mut fates = vec![SectorFate::New; *sectors];
                fates[0] = SectorFate::Old;
                let mut choice = vec![Fate::Absent; p.len()];
                *choice.last_mut().unwrap() = Fate::Sectors(fates);
                *img2.lock().unwrap() = Some(st.image(&choice));
            }
        })));
        for r in s.append_batch(&batch) {
            r.unwrap();
        }
        drop(s);
        let img: SimFs = img.lock().unwrap().take().unwrap();
        let s = Store::<Ledger>::open(dir(), sim_opts(&img, codec)).expect("recovery");
        assert_eq!(s.read(|st| st.values.clone()), vec![1]);
    }
}
