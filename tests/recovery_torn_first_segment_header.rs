//! Proves (regression: "torn first segment header reported as corruption") that a
//! crash while a store is being created, leaving its only segment's name durable
//! but its header empty, torn or garbage, is a torn tail: readers see an empty
//! store, verify says TornTail, and a writer drops the file and starts afresh
//! with the codec asked for.
mod common;
use common::crash::*;
use common::*;
use runlog::engine::sim::{Fate, SectorFate, SimFs};
use runlog::engine::{self, Integrity, Store, Vfs};

/// Creates a store and returns crash images taken just before the new segment's
/// fsync, with the directory entry durable and the header in every torn form.
fn torn_creations(codec: runlog::engine::Codec) -> Vec<SimFs> {
    let fs = SimFs::new();
    fs.create_dir(&dir()).unwrap();
    fs.sync_dir(std::path::Path::new("/")).unwrap();
    let f = fs
        .create_new(&dir().join("seg-00000000000000000001.log"))
        .unwrap();
    fs.sync_dir(&dir()).unwrap();
    // The header a real create_segment writes, taken from a real store.
    let real = SimFs::new();
    drop(Store::<Ledger>::open(dir(), sim_opts(&real, codec)).unwrap());
    let files = real.with_state(|s| s.durable_files());
    let header = files.values().next().unwrap().clone();
    f.write_at(&header, 0).unwrap();
    let mut out = vec![fs.crash(&[Fate::Absent])];
    for s in [SectorFate::Zero, SectorFate::Garbage(7)] {
        out.push(fs.crash(&[Fate::Sectors(vec![s])]));
    }
    // A header cut short (a short write that was never completed).
    let cut = SimFs::new();
    cut.create_dir(&dir()).unwrap();
    cut.sync_dir(std::path::Path::new("/")).unwrap();
    let g = cut
        .create_new(&dir().join("seg-00000000000000000001.log"))
        .unwrap();
    g.write_at(&header[..header.len() / 2], 0).unwrap();
    g.sync_data().unwrap();
    cut.sync_dir(&dir()).unwrap();
    out.push(cut.crash(&[]));
    out
}

#[test]
fn torn_first_segment_header_is_a_torn_tail_not_corruption() {
    for codec in codecs() {
        for img in torn_creations(codec) {
            let (st, rep) = engine::read_state::<Ledger>(&img, &dir()).expect("read_state");
            assert_eq!(st, LedgerState::default());
            assert_eq!(rep.last_seq, 0);
            let v = engine::verify(&img, &dir()).unwrap();
            assert!(
                matches!(v.integrity, Integrity::TornTail { offset: 0, .. }),
                "{:?}",
                v.integrity
            );
            let s = Store::<Ledger>::open(dir(), sim_opts(&img, codec)).expect("open");
            assert_eq!(s.codec(), codec, "the codec asked for, not a guess");
            assert!(s.recovery().torn_tail.as_ref().unwrap().whole_file);
            assert_eq!(s.append(&entry(1, 3)).unwrap(), 1);
            drop(s);
            let s = Store::<Ledger>::open(dir(), sim_opts(&img.crash(&[]), codec)).unwrap();
            assert_eq!(s.read(|st| st.values.clone()), vec![1]);
        }
    }
}
