//! Proves that opening a store (writer or reader) reads the newest snapshot and
//! only the segments holding records above it, not the segments kept below it
//! for the fallback; that those are read when the fallback happens (the newest
//! snapshot is damaged); and that `verify` still reads and checks every segment.
use crate::common;
use crate::open_counting_vfs;
use common::*;
use open_counting_vfs::CountingFs;
use runlog::engine::format::parse_segment_name;
use runlog::engine::{Codec, Reader, Store};
use std::path::Path;
use std::sync::Arc;

/// Segment names whose records are all at or below `seq` (the next one starts at
/// or below `seq + 1`), and the others.
fn split_segments(dir: &Path, seq: u64) -> (Vec<String>, Vec<String>) {
    let mut segs: Vec<(u64, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter_map(|n| parse_segment_name(&n).map(|s| (s, n)))
        .collect();
    segs.sort();
    let below = segs
        .windows(2)
        .take_while(|w| w[1].0 <= seq + 1)
        .map(|w| w[0].1.clone())
        .collect();
    let above = segs
        .iter()
        .skip_while(|(_, n)| segs.windows(2).any(|w| w[0].1 == *n && w[1].0 <= seq + 1))
        .map(|(_, n)| n.clone())
        .collect();
    (below, above)
}

/// A store with two snapshots and segments below and above the newest.
fn build(codec: Codec, fs: &CountingFs) -> (tempfile::TempDir, std::path::PathBuf, u64, u64) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let mut o = opts(codec);
    o.segment_bytes = 4 << 10;
    o.preallocate = 0;
    o.vfs = Arc::new(fs.clone());
    let s = Store::<Ledger>::open(&dir, o).unwrap();
    for v in 1..=60 {
        s.append(&entry(v, 100)).unwrap();
    }
    let older = s.compact().unwrap().snapshot_seq;
    for v in 61..=120 {
        s.append(&entry(v, 100)).unwrap();
    }
    let newest = s.compact().unwrap().snapshot_seq;
    for v in 121..=130 {
        s.append(&entry(v, 100)).unwrap();
    }
    drop(s);
    (tmp, dir, older, newest)
}

fn reopen(dir: &Path, fs: &CountingFs) -> Store<Ledger> {
    let mut o = opts(Codec::Binary);
    o.create = false;
    o.vfs = Arc::new(fs.clone());
    Store::<Ledger>::open(dir, o).unwrap()
}

#[test]
fn opening_reads_no_segment_at_or_below_the_newest_snapshot() {
    for codec in codecs() {
        let fs = CountingFs::new();
        let (_tmp, dir, _, newest) = build(codec, &fs);
        let (below, above) = split_segments(&dir, newest);
        assert!(
            below.len() >= 2,
            "{codec:?}: the scenario keeps log below the snapshot: {below:?}"
        );
        fs.reset();
        let s = reopen(&dir, &fs);
        assert_eq!(s.read(|st| st.values.len()), 130, "{codec:?}");
        assert_eq!(s.recovery().snapshot_seq, Some(newest), "{codec:?}");
        drop(s);
        let mut read = fs.counts().reads_of("seg-");
        read.sort();
        assert_eq!(
            read, above,
            "{codec:?}: only the segments above the snapshot"
        );
        // A lock-free read too.
        fs.reset();
        let (st, _) = Reader::new(&fs, &dir).state::<Ledger>().unwrap();
        assert_eq!(st.values.len(), 130);
        assert!(
            fs.counts()
                .reads_of("seg-")
                .iter()
                .all(|n| !below.contains(n)),
            "{codec:?}"
        );
        // verify reads every segment.
        fs.reset();
        Reader::new(&fs, &dir).verify().unwrap();
        let read = fs.counts().reads_of("seg-");
        for n in below.iter().chain(&above) {
            assert!(read.contains(n), "{codec:?}: verify skipped {n}");
        }
    }
}

#[test]
fn a_damaged_newest_snapshot_falls_back_and_reads_the_older_log() {
    for codec in codecs() {
        let fs = CountingFs::new();
        let (_tmp, dir, older, newest) = build(codec, &fs);
        let snap = dir.join(runlog::engine::format::snapshot_name(newest));
        let mut b = std::fs::read(&snap).unwrap();
        let mid = b.len() / 2;
        b[mid] ^= 0x20;
        std::fs::write(&snap, b).unwrap();
        let (newer_below, _) = split_segments(&dir, newest);
        let (older_below, _) = split_segments(&dir, older);
        fs.reset();
        let s = reopen(&dir, &fs);
        assert_eq!(s.recovery().snapshot_seq, Some(older), "{codec:?}");
        assert_eq!(s.recovery().snapshot_fallbacks.len(), 1, "{codec:?}");
        assert_eq!(
            s.read(|st| st.values.clone()),
            (1..=130).collect::<Vec<_>>()
        );
        let read = fs.counts().reads_of("seg-");
        for n in newer_below.iter().filter(|n| !older_below.contains(n)) {
            assert!(read.contains(n), "{codec:?}: the fallback needs {n}");
        }
    }
}
