//! Proves that flipping any one bit (and, separately, any one byte) of a ≥16 KiB
//! log, in both codecs, is never silent: with the durability mark its writer
//! left (FORMAT.md §5.7), damage in **any** record (or in the segment header)
//! is `Corrupt` naming the segment and the damaged record's offset, and a
//! refused open changes no byte. Without the mark (a crash lost it), damage in
//! a record with a valid successor is still `Corrupt`, and damage in the last
//! record is a dropped torn tail. Every flip goes through the pure scan and
//! decision in both cases; every 97th bit is opened end to end in memory, every
//! 1999th on disk, with and without the mark. At the quick depth (tests/depth)
//! the pure sweeps sample: one bit of each byte, and every other byte's flip,
//! from the printed seed.
use crate::common;
use crate::depth;
use common::*;
use runlog::engine::frame::encode_segment_header;
use runlog::engine::recovery::{Corruption, FileRef, TornTail, Verdict, classify_proven};
use runlog::engine::scan::scan_segment;
use runlog::engine::{Codec, Error, Integrity, Options, Reader, RealFs, Store, Vfs};
use std::path::Path;
use std::sync::Arc;

const LOG_BYTES: u64 = 16 << 10;
const SEG: &str = ONLY_SEGMENT;

type Log = BuiltLog;

fn build(codec: Codec) -> Log {
    built_log(codec, LOG_BYTES)
}

/// The record holding byte `p` (None: the segment header).
fn record_at(log: &Log, p: u64) -> Option<usize> {
    (p >= log.bounds[0]).then(|| log.bounds.partition_point(|&b| b <= p) - 1)
}

/// What damage at byte `p` must be classified as.
fn expected(log: &Log, p: u64) -> Verdict {
    let records = log.bounds.len() - 1;
    match record_at(log, p) {
        None => Verdict::Corrupt(Corruption {
            file: FileRef::Segment(0),
            offset: Some(0),
            seq: None,
            reason: String::new(),
        }),
        Some(i) if i + 1 < records => Verdict::Corrupt(Corruption {
            file: FileRef::Segment(0),
            offset: Some(log.bounds[i]),
            seq: Some(i as u64 + 1),
            reason: String::new(),
        }),
        Some(i) => Verdict::TornTail(TornTail {
            segment: 0,
            offset: log.bounds[i],
            bytes: log.seg.len() as u64 - log.bounds[i],
            whole_file: false,
            reason: String::new(),
        }),
    }
}

/// What damage at byte `p` must be classified as when the durability mark
/// proves every record durable: the last record's damage is corruption too.
fn expected_marked(log: &Log, p: u64) -> Verdict {
    match expected(log, p) {
        Verdict::TornTail(t) => Verdict::Corrupt(Corruption {
            file: FileRef::Segment(0),
            offset: Some(t.offset),
            seq: Some(log.bounds.len() as u64 - 1),
            reason: String::new(),
        }),
        v => v,
    }
}

/// The expectation under the mark or without it.
fn expected_as(log: &Log, p: u64, marked: bool) -> Verdict {
    if marked {
        expected_marked(log, p)
    } else {
        expected(log, p)
    }
}

fn normalize(v: Verdict) -> Verdict {
    match v {
        Verdict::TornTail(t) => Verdict::TornTail(TornTail {
            reason: String::new(),
            ..t
        }),
        // The seq of header damage is whatever resync found; only record damage names one.
        Verdict::Corrupt(c) => Verdict::Corrupt(Corruption {
            reason: String::new(),
            seq: if c.offset == Some(0) { None } else { c.seq },
            ..c
        }),
        v => v,
    }
}

/// Pure: scan + classify the log with byte `p` xor `mask`.
///
/// Scanning 16 KiB per flip for 131 072 flips is slow, so the records wholly before
/// the damaged one (but one) are replaced by a header starting at the next seq:
/// decoding a record depends only on its own bytes, so this is exact.
fn check_flip(log: &Log, p: u64, mask: u8, marked: bool) {
    // The mark of the store as its writer left it: every record durable.
    let proven = if marked {
        log.bounds.len() as u64 - 1
    } else {
        0
    };
    let skip = record_at(log, p).unwrap_or(0).saturating_sub(1);
    let (mut bytes, shift) = if skip == 0 {
        (log.seg.clone(), 0i64)
    } else {
        let mut b = encode_segment_header(log.codec, skip as u64 + 1);
        let shift = log.bounds[skip] as i64 - b.len() as i64;
        b.extend_from_slice(&log.seg[log.bounds[skip] as usize..]);
        (b, shift)
    };
    bytes[(p as i64 - shift) as usize] ^= mask;
    let scan = scan_segment::<()>(&bytes, |_, _, _| Ok(())).unwrap();
    let first = skip as u64 + 1;
    let unshift = |o: u64| if o == 0 { 0 } else { (o as i64 + shift) as u64 };
    let v = match classify_proven(&[scan], &[first], first - 1, proven) {
        Verdict::Corrupt(c) => Verdict::Corrupt(Corruption {
            offset: c.offset.map(unshift),
            ..c
        }),
        Verdict::TornTail(t) => Verdict::TornTail(TornTail {
            offset: unshift(t.offset),
            ..t
        }),
        v => v,
    };
    assert_eq!(
        normalize(v),
        expected_as(log, p, marked),
        "{:?}: byte {p} ^ {mask:#04x} (record {:?}, marked {marked})",
        log.codec,
        record_at(log, p)
    );
}

/// Every bit at the full depth; at the quick one (tests/depth), 1 bit of
/// each byte (`RUNLOG_FLIP_BITS_PER_BYTE`), which bit turning with the byte
/// and the printed seed, so every byte and every bit position is still met.
#[test]
fn every_bit_flip_is_corruption_or_a_torn_last_record() {
    let per_byte = depth::scaled("RUNLOG_FLIP_BITS_PER_BYTE", 1, 8).clamp(1, 8);
    let seed = depth::sample_seed();
    let mut flips = 0u64;
    for codec in codecs() {
        let log = build(codec);
        assert!(log.seg.len() as u64 >= LOG_BYTES);
        for p in 0..log.seg.len() as u64 {
            for k in 0..per_byte {
                let bit = if per_byte == 8 {
                    k
                } else {
                    (p + seed + k * 4) % 8
                };
                check_flip(&log, p, 1 << bit, true);
                check_flip(&log, p, 1 << bit, false);
                flips += 1;
            }
        }
    }
    depth::explored(
        "damage_flip_every_bit",
        format_args!(
            "{flips} bit flips over 2 codecs, {per_byte} of each byte's 8 bits (RUNLOG_SAMPLE_SEED={seed}), each with and without the mark"
        ),
    );
    assert!(flips >= 2 * LOG_BYTES * per_byte, "{flips} flips");
}

/// Every byte at the full depth; at the quick one (tests/depth), 1 byte in
/// `RUNLOG_BYTE_FLIP_ONE_IN` (2), which ones from the printed seed.
#[test]
fn every_byte_flip_is_corruption_or_a_torn_last_record() {
    let one_in = depth::scaled("RUNLOG_BYTE_FLIP_ONE_IN", 2, 1).max(1);
    let seed = depth::sample_seed();
    let mut flips = 0u64;
    for codec in codecs() {
        let log = build(codec);
        assert!(log.seg.len() as u64 >= LOG_BYTES);
        for p in 0..log.seg.len() as u64 {
            if !(p + seed).is_multiple_of(one_in) {
                continue;
            }
            check_flip(&log, p, 0xff, true);
            check_flip(&log, p, 0xff, false);
            flips += 1;
        }
    }
    depth::explored(
        "damage_flip_every_byte",
        format_args!(
            "{flips} byte flips over 2 codecs, 1 byte in {one_in} (RUNLOG_SAMPLE_SEED={seed}), each with and without the mark"
        ),
    );
    assert!(flips >= 2 * LOG_BYTES / one_in, "{flips} flips");
}

/// Opens the log with bit `bit` flipped, through `vfs`, and checks the outcome.
fn open_flipped(
    log: &Log,
    vfs: Arc<dyn Vfs>,
    dir: &Path,
    p: u64,
    mask: u8,
    snapshot: &dyn Fn() -> Vec<(String, Vec<u8>)>,
) {
    let codec = log.codec;
    let o = Options { vfs, ..opts(codec) };
    let before = snapshot();
    let marked = snapshot().iter().any(|(n, _)| n == MARK_FILE);
    let what = format!("{codec:?}: byte {p} ^ {mask:#04x}, marked {marked}");
    match expected_as(log, p, marked) {
        Verdict::Corrupt(c) => {
            match Store::<Ledger>::open(dir, o.clone()) {
                Err(Error::Corrupt { path, offset, .. }) => {
                    assert_eq!(path, dir.join(SEG), "{what}");
                    assert_eq!(offset, c.offset, "{what}");
                }
                Err(e) => panic!("{what}: {e}"),
                Ok(_) => panic!("{what}: opened a corrupt log"),
            }
            assert_eq!(
                snapshot(),
                before,
                "{what}: a refused open modified the store"
            );
            let v = Reader::new(o.vfs.as_ref(), dir).verify().unwrap();
            assert!(
                matches!(&v.integrity, Integrity::Damaged(Error::Corrupt { offset, .. }) if *offset == c.offset),
                "{what}: {:?}",
                v.integrity
            );
        }
        Verdict::TornTail(t) => {
            let n = log.bounds.len() - 2;
            let s = Store::<Ledger>::open(dir, o).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(s.read(|st| st.clone()), log_model(n), "{what}");
            let torn = s.recovery().torn_tail.clone().expect("torn tail reported");
            assert_eq!(torn.offset, t.offset, "{what}");
            assert_eq!(s.append(&entry(1, 1)).unwrap(), n as u64 + 1, "{what}");
        }
        Verdict::Clean => unreachable!(),
    }
}

#[test]
fn sampled_bit_flips_open_end_to_end_in_memory() {
    for codec in codecs() {
        let log = build(codec);
        let dir = Path::new(MEM_DIR);
        for b in (0..log.seg.len() as u64 * 8).step_by(97) {
            let (p, mask) = (b / 8, 1u8 << (b % 8));
            for marked in [true, false] {
                let fs = mem_fs();
                let mut files = log.files_marked(marked);
                files.iter_mut().find(|f| f.0 == SEG).unwrap().1[p as usize] ^= mask;
                fs.set_files(dir, &files);
                let snap = || fs.files(dir);
                open_flipped(&log, Arc::new(fs.clone()), dir, p, mask, &snap);
            }
        }
    }
}

#[test]
fn sampled_bit_flips_open_end_to_end_on_the_real_filesystem() {
    for codec in codecs() {
        let log = build(codec);
        let t = tempfile::tempdir().unwrap();
        let last = log.seg.len() as u64 * 8 - 1;
        let flips = (0..=last).step_by(1999).chain([last]);
        for (i, (b, marked)) in flips.flat_map(|b| [(b, true), (b, false)]).enumerate() {
            let (p, mask) = (b / 8, 1u8 << (b % 8));
            let dir = t.path().join(format!("s{i}"));
            std::fs::create_dir(&dir).unwrap();
            std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
                .unwrap();
            for (name, bytes) in &log.files_marked(marked) {
                let mut bytes = bytes.clone();
                if name == SEG {
                    bytes[p as usize] ^= mask;
                }
                std::fs::write(dir.join(name), bytes).unwrap();
            }
            // The LOCK its first writer left, as in every store on disk (the
            // simulated filesystem the log was built on keeps locks in memory):
            // a refused open rewrites it with the same holder, changing nothing.
            std::fs::write(dir.join("LOCK"), format!("pid {}", std::process::id())).unwrap();
            let snap = || dir_bytes(&dir);
            open_flipped(&log, Arc::new(RealFs), &dir, p, mask, &snap);
        }
    }
}
