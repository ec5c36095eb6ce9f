//! Preallocated segments (FORMAT.md §3.2, §5.2, §5.3): the writer extends the
//! active binary segment with zeros ahead of its records, recovery reads the
//! zeros as the end of the log, a reopened writer cuts them and preallocates
//! again, rotation trims them, and damage in them is never mistaken for records nor lets an
//! acknowledged record go.
use crate::common;
use common::*;
use runlog::engine::scan::{ScanEnd, scan_segment};
use runlog::engine::{Codec, Error, Store};
use std::path::Path;

fn scan_end(bytes: &[u8]) -> (ScanEnd, u64, u64) {
    let s = scan_segment::<()>(bytes, |_, _, _| Ok(())).unwrap();
    (s.end, s.count, s.valid_len)
}

fn segments(dir: &Path) -> Vec<(String, Vec<u8>)> {
    dir_bytes(dir)
        .into_iter()
        .filter(|(n, _)| n.starts_with("seg-") && n.ends_with(".log"))
        .collect()
}

#[test]
fn appends_overwrite_the_preallocated_tail_and_a_reopened_writer_preallocates_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let mut o = opts(Codec::Binary);
    o.preallocate = 64 << 10;
    let s = Store::<Ledger>::open(&dir, o.clone()).unwrap();
    for v in 1..=10 {
        s.append(&entry(v, 50)).unwrap();
    }
    drop(s);
    let segs = segments(&dir);
    assert_eq!(segs.len(), 1);
    let (end, count, valid) = scan_end(&segs[0].1);
    assert_eq!(segs[0].1.len() as u64, 64 << 10, "extended by one step");
    assert_eq!((end, count), (ScanEnd::Preallocated { offset: valid }, 10));

    o.create = false;
    let s = Store::<Ledger>::open(&dir, o.clone()).unwrap();
    assert!(
        s.recovery().torn_tail.is_none(),
        "zeros are not a torn tail"
    );
    assert_eq!(s.read(|st| st.values.clone()), (1..=10).collect::<Vec<_>>());
    assert_eq!(
        segments(&dir)[0].1.len() as u64,
        64 << 10,
        "open keeps the zeros (FORMAT.md §5.5)"
    );
    for v in 11..=20 {
        s.append(&entry(v, 50)).unwrap();
    }
    drop(s);
    let segs = segments(&dir);
    assert_eq!(
        segs[0].1.len() as u64,
        64 << 10,
        "written over the zeros, not extended"
    );
    assert_eq!(scan_end(&segs[0].1).1, 20);
    let s = Store::<Ledger>::open(&dir, o).unwrap();
    assert_eq!(s.read(|st| st.values.clone()), (1..=20).collect::<Vec<_>>());
}

#[test]
fn rotation_trims_each_closed_segment_to_its_last_record() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let mut o = opts(Codec::Binary);
    o.segment_bytes = 16 << 10;
    o.preallocate = 4 << 10;
    let s = Store::<Ledger>::open(&dir, o.clone()).unwrap();
    for v in 1..=400 {
        s.append(&entry(v, 60)).unwrap();
    }
    drop(s);
    let segs = segments(&dir);
    assert!(segs.len() >= 3, "{} segments", segs.len());
    let (last, closed) = segs.split_last().unwrap();
    for (name, bytes) in closed {
        let (end, _, valid) = scan_end(bytes);
        assert_eq!(end, ScanEnd::Clean, "{name} keeps zeros");
        assert_eq!(valid, bytes.len() as u64);
        assert!(bytes.len() as u64 <= o.segment_bytes + 200, "{name}");
    }
    assert!(matches!(scan_end(&last.1).0, ScanEnd::Preallocated { .. }));
    o.create = false;
    let s = Store::<Ledger>::open(&dir, o).unwrap();
    assert_eq!(s.read(|st| st.values.len()), 400);
}

#[test]
fn jsonl_segments_are_never_preallocated() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let s = Store::<Ledger>::open(&dir, opts(Codec::Jsonl)).unwrap();
    for v in 1..=10 {
        s.append(&entry(v, 5)).unwrap();
    }
    drop(s);
    let segs = segments(&dir);
    assert_eq!(scan_end(&segs[0].1).0, ScanEnd::Clean);
    assert!(!segs[0].1.contains(&0), "a JSONL segment is plain text");
}

/// A store of 8 acknowledged records in one segment with a 4 KiB preallocated tail.
fn preallocated_store() -> (Vec<(String, Vec<u8>)>, u64) {
    let fs = mem_fs();
    let mut o = mem_opts(Codec::Binary, &fs);
    o.preallocate = 4 << 10;
    let s = Store::<Ledger>::open(MEM_DIR, o).unwrap();
    for v in 1..=8 {
        s.append(&entry(v, 20)).unwrap();
    }
    drop(s);
    let files = fs.files(Path::new(MEM_DIR));
    let seg = &files.iter().find(|f| f.0 == ONLY_SEGMENT).unwrap().1;
    let (end, count, valid) = scan_end(seg);
    assert_eq!((end, count), (ScanEnd::Preallocated { offset: valid }, 8));
    (files, valid)
}

/// `files` with the durability mark its writer left, or without it (as a
/// crash that lost the mark's write leaves them).
fn files_marked(files: &[(String, Vec<u8>)], marked: bool) -> Vec<(String, Vec<u8>)> {
    assert!(files.iter().any(|f| f.0 == MARK_FILE));
    files
        .iter()
        .filter(|f| marked || f.0 != MARK_FILE)
        .cloned()
        .collect()
}

fn reopen(files: &[(String, Vec<u8>)]) -> (Result<Vec<u64>, runlog::engine::Error>, SimFs) {
    let fs = mem_fs();
    fs.set_files(Path::new(MEM_DIR), files);
    let mut o = mem_opts(Codec::Binary, &fs);
    o.create = false;
    let r = Store::<Ledger>::open(MEM_DIR, o).map(|s| s.read(|st| st.values.clone()));
    (r, fs)
}

#[test]
fn every_bit_flipped_in_the_preallocated_tail_is_a_torn_tail_and_keeps_every_record() {
    let (files, valid) = preallocated_store();
    let seg_at = files.iter().position(|f| f.0 == ONLY_SEGMENT).unwrap();
    let len = files[seg_at].1.len() as u64;
    let mut flips = 0;
    for p in valid..len {
        for bit in 0..8 {
            let mut damaged = files.clone();
            damaged[seg_at].1[p as usize] ^= 1 << bit;
            let (r, fs) = reopen(&damaged);
            assert_eq!(
                r.unwrap(),
                (1..=8).collect::<Vec<_>>(),
                "flip at {p} bit {bit}"
            );
            // The non-zero byte was quarantined, then cut off with the zeros around it.
            let seg = fs.get(&Path::new(MEM_DIR).join(ONLY_SEGMENT)).unwrap();
            assert_eq!(seg.len() as u64, valid, "flip at {p}");
            let kept = fs.files(Path::new(MEM_DIR));
            let q = kept.iter().find(|f| f.0.contains(".broken-")).unwrap();
            assert_eq!(q.1, damaged[seg_at].1[valid as usize..], "flip at {p}");
            flips += 1;
        }
    }
    assert_eq!(flips, (len - valid) * 8);
}

#[test]
fn every_bit_flipped_in_a_record_before_the_tail_is_corruption_or_the_torn_last_record() {
    let (files, valid) = preallocated_store();
    let seg_at = files.iter().position(|f| f.0 == ONLY_SEGMENT).unwrap();
    let seg = &files[seg_at].1;
    let mut bounds = vec![];
    scan_segment::<()>(seg, |_, _, off| {
        bounds.push(off);
        Ok(())
    })
    .unwrap();
    let last = *bounds.last().unwrap();
    for (p, marked) in (bounds[0]..valid).flat_map(|p| [(p, true), (p, false)]) {
        let files = files_marked(&files, marked);
        let seg_at = files.iter().position(|f| f.0 == ONLY_SEGMENT).unwrap();
        for bit in 0..8 {
            let mut damaged = files.clone();
            damaged[seg_at].1[p as usize] ^= 1 << bit;
            let (r, fs) = reopen(&damaged);
            // Under the durability mark the writer left, the last record too.
            if p < last || marked {
                // A record with a valid successor: never silently dropped, nothing modified.
                let Err(Error::Corrupt { offset, .. }) = r else {
                    panic!("flip at {p} bit {bit}: {r:?}")
                };
                let rec = bounds[bounds.partition_point(|&b| b <= p) - 1];
                assert_eq!(offset, Some(rec), "flip at {p} bit {bit}");
                assert_eq!(
                    fs.files(Path::new(MEM_DIR)),
                    damaged,
                    "flip at {p} bit {bit}"
                );
            } else {
                // The last record: unacknowledged as far as the disk can tell.
                assert_eq!(
                    r.unwrap(),
                    (1..=7).collect::<Vec<_>>(),
                    "flip at {p} bit {bit}"
                );
            }
        }
    }
}

#[test]
fn cutting_a_preallocated_segment_at_every_offset_keeps_every_whole_record() {
    let (files, valid) = preallocated_store();
    let seg_at = files.iter().position(|f| f.0 == ONLY_SEGMENT).unwrap();
    let full = files[seg_at].1.clone();
    let mut bounds = vec![];
    scan_segment::<()>(&full, |_, _, off| {
        bounds.push(off);
        Ok(())
    })
    .unwrap();
    bounds.push(valid);
    for cut in bounds[0]..=full.len() as u64 {
        for marked in [true, false] {
            let mut cut_files = files_marked(&files, marked);
            let seg_at = cut_files.iter().position(|f| f.0 == ONLY_SEGMENT).unwrap();
            cut_files[seg_at].1.truncate(cut as usize);
            let (r, fs) = reopen(&cut_files);
            if marked && cut < valid {
                // The mark proves all 8 records: a cut into them is corruption.
                assert!(
                    matches!(r, Err(Error::Corrupt { .. })),
                    "cut at {cut}: {r:?}"
                );
                assert_eq!(fs.files(Path::new(MEM_DIR)), cut_files, "cut at {cut}");
                continue;
            }
            let whole = bounds.partition_point(|&b| b <= cut) as u64 - 1;
            assert_eq!(
                r.unwrap(),
                (1..=whole).collect::<Vec<_>>(),
                "cut at {cut}, marked {marked}"
            );
        }
    }
}
