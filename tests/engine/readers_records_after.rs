//! Proves `engine::Reader::records_after`, the lock-free tail reader
//! `runlog ui` follows a log with: it gives exactly the records above the seq
//! asked for, in order, with the codec to decode them; it reads only the
//! segments that hold them (none below, counted on the Vfs); and past a
//! compaction that deleted the segment holding the next record, the first
//! seq it gives is above it, which is how a follower knows it lost the tail.
use crate::common;
use crate::open_counting_vfs;
use common::*;
use open_counting_vfs::CountingFs;
use runlog::engine::format::parse_segment_name;
use runlog::engine::{Codec, Reader, Store};
use std::path::Path;
use std::sync::Arc;

/// Segment names, by first seq.
fn segments(dir: &Path) -> Vec<(u64, String)> {
    let mut segs: Vec<(u64, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter_map(|n| parse_segment_name(&n).map(|s| (s, n)))
        .collect();
    segs.sort();
    segs
}

fn store(codec: Codec, fs: &CountingFs, dir: &Path) -> Store<Ledger> {
    let mut o = opts(codec);
    o.segment_bytes = 4 << 10;
    o.preallocate = 0;
    o.vfs = Arc::new(fs.clone());
    Store::<Ledger>::open(dir, o).unwrap()
}

#[test]
fn records_after_a_seq_come_in_order_from_the_segments_holding_them_only() {
    for codec in codecs() {
        let fs = CountingFs::new();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        let s = store(codec, &fs, &dir);
        for v in 1..=120 {
            s.append(&entry(v, 100)).unwrap();
        }
        drop(s);
        let segs = segments(&dir);
        assert!(segs.len() >= 3, "{codec:?}: several segments: {segs:?}");
        // From inside the last-but-one segment.
        let after = segs[segs.len() - 2].0 + 1;
        fs.reset();
        let mut got = vec![];
        let c = Reader::new(&fs, &dir)
            .records_after(after, |seq, c, payload| {
                let e: Entry = c.decode(payload).unwrap();
                got.push((seq, e.value));
            })
            .unwrap();
        assert_eq!(c, Some(codec));
        let want: Vec<(u64, u64)> = (after + 1..=120).map(|s| (s, s)).collect();
        assert_eq!(got, want, "{codec:?}");
        let mut read = fs.counts().reads_of("seg-");
        read.sort();
        let holding: Vec<String> = segs[segs.len() - 2..].iter().map(|s| s.1.clone()).collect();
        assert_eq!(read, holding, "{codec:?}: only the segments holding them");
        // Nothing after the last.
        let mut n = 0;
        Reader::new(&fs, &dir)
            .records_after(120, |_, _, _| n += 1)
            .unwrap();
        assert_eq!(n, 0, "{codec:?}");
    }
}

#[test]
fn a_compacted_away_tail_starts_above_the_seq_asked_for() {
    let fs = CountingFs::new();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let s = store(Codec::Binary, &fs, &dir);
    for v in 1..=10 {
        s.append(&entry(v, 100)).unwrap();
    }
    let follower_at = 5;
    s.compact().unwrap();
    for v in 11..=20 {
        s.append(&entry(v, 100)).unwrap();
    }
    s.compact().unwrap();
    s.append(&entry(21, 100)).unwrap();
    drop(s);
    let mut first = None;
    Reader::new(&fs, &dir)
        .records_after(follower_at, |seq, _, _| {
            first.get_or_insert(seq);
        })
        .unwrap();
    let first = first.expect("records are left");
    assert!(
        first > follower_at + 1,
        "seq 6 was compacted away, yet came: {first}"
    );
}
