//! Proves that a log cut at ANY byte offset (both codecs, a ≥256 KiB segment)
//! recovers exactly the records complete before the cut when no durability
//! mark survived (a crash that cut the log lost the mark's write too): the pure
//! scan and decision are checked at every offset; a sample of offsets is opened
//! end to end (in memory every 97th, on the real filesystem every 16411th),
//! checking the state, the quarantined bytes and that the writer continues with
//! the next seq. With the mark its writer left (FORMAT.md §5.7), every cut
//! loses acknowledged records, and every one is `Corrupt`, nothing modified.
use crate::common;
use common::*;
use runlog::engine::frame::encode_segment_header;
use runlog::engine::recovery::{TornTail, Verdict, classify, classify_proven};
use runlog::engine::scan::scan_segment;
use runlog::engine::{Codec, Options, RealFs, Store, Vfs};
use std::path::Path;
use std::sync::Arc;

const LOG_BYTES: u64 = 256 << 10;
const SEG: &str = ONLY_SEGMENT;

type Log = BuiltLog;

fn build(codec: Codec) -> Log {
    built_log(codec, LOG_BYTES)
}

/// Records complete in the first `cut` bytes, and the offset where the valid prefix ends.
fn complete_before(log: &Log, cut: u64) -> (usize, u64) {
    // bounds[i + 1] is the end of record i.
    let n = log.bounds[1..].partition_point(|&end| end <= cut);
    (n, log.bounds[n])
}

fn expected_verdict(log: &Log, cut: u64) -> Verdict {
    let header = log.bounds[0];
    if cut < header {
        return Verdict::TornTail(TornTail {
            segment: 0,
            offset: 0,
            bytes: cut,
            whole_file: true,
            reason: String::new(),
        });
    }
    let (_, valid) = complete_before(log, cut);
    if valid == cut {
        Verdict::Clean
    } else {
        Verdict::TornTail(TornTail {
            segment: 0,
            offset: valid,
            bytes: cut - valid,
            whole_file: false,
            reason: String::new(),
        })
    }
}

fn without_reason(v: Verdict) -> Verdict {
    match v {
        Verdict::TornTail(t) => Verdict::TornTail(TornTail {
            reason: String::new(),
            ..t
        }),
        v => v,
    }
}

/// Pure: scan + classify the segment cut at each of `cuts`.
///
/// A full scan of a 256 KiB prefix per offset would take minutes, so the scan
/// runs over a window: the records complete before the cut, except the last one,
/// are replaced by a segment header that starts at the next seq. That is exact,
/// because decoding a record that lies wholly inside the bytes depends only on
/// its own bytes (checked by the full scans of `every_97th_prefix_scans_in_full`).
fn sweep_pure(log: &Log, codec: Codec, cuts: impl Iterator<Item = u64>) {
    for cut in cuts {
        let (n, _) = complete_before(log, cut);
        let skip = n.saturating_sub(1);
        let (bytes, shift) = if skip == 0 {
            (log.seg[..cut as usize].to_vec(), 0i64)
        } else {
            let mut b = encode_segment_header(codec, skip as u64 + 1);
            let from = log.bounds[skip];
            let shift = from as i64 - b.len() as i64;
            b.extend_from_slice(&log.seg[from as usize..cut as usize]);
            (b, shift)
        };
        let mut seen = skip as u64;
        let scan = scan_segment::<()>(&bytes, |seq, _, _| {
            seen += 1;
            assert_eq!(seq, seen, "cut {cut}: records out of order");
            Ok(())
        })
        .unwrap();
        if cut >= log.bounds[0] {
            assert_eq!(seen, n as u64, "cut {cut}");
        }
        let first = skip as u64 + 1;
        // Under the mark its writer left (every record proven), every cut that
        // loses a byte of a record is corruption.
        let records = log.bounds.len() as u64 - 1;
        let marked = classify_proven(std::slice::from_ref(&scan), &[first], first - 1, records);
        let whole = cut == log.seg.len() as u64;
        assert_eq!(
            matches!(marked, Verdict::Corrupt(_)),
            !whole,
            "cut {cut} under the mark: {marked:?}"
        );
        let v = match classify(&[scan], &[first], first - 1) {
            Verdict::TornTail(t) if !t.whole_file => Verdict::TornTail(TornTail {
                offset: (t.offset as i64 + shift) as u64,
                ..t
            }),
            v => v,
        };
        assert_eq!(without_reason(v), expected_verdict(log, cut), "cut {cut}");
    }
}

fn both_threads(
    len: u64,
    step: usize,
    f: impl Fn(std::iter::StepBy<std::ops::RangeInclusive<u64>>) + Sync,
) {
    std::thread::scope(|s| {
        let f = &f;
        let hs: Vec<_> = (0..2u64)
            .map(|t| s.spawn(move || f((t * step as u64..=len).step_by(2 * step))))
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
}

#[test]
fn every_prefix_scans_to_exactly_the_complete_records() {
    for codec in codecs() {
        let log = build(codec);
        assert!(log.seg.len() as u64 >= LOG_BYTES);
        both_threads(log.seg.len() as u64, 1, |cuts| {
            sweep_pure(&log, codec, cuts)
        });
    }
}

#[test]
fn every_97th_prefix_scans_in_full() {
    for codec in codecs() {
        let log = build(codec);
        both_threads(log.seg.len() as u64, 97, |cuts| {
            for cut in cuts {
                let scan = scan_segment::<()>(&log.seg[..cut as usize], |_, _, _| Ok(())).unwrap();
                let v = without_reason(classify(&[scan], &[1], 0));
                assert_eq!(v, expected_verdict(&log, cut), "{codec:?} cut {cut}");
            }
        });
    }
}

/// Opens the store with its segment cut at `cut` and checks everything.
fn open_cut(
    log: &Log,
    vfs: Arc<dyn Vfs>,
    dir: &Path,
    codec: Codec,
    cut: u64,
    read: &dyn Fn(&str) -> Option<Vec<u8>>,
    reopen: bool,
) {
    let o = Options { vfs, ..opts(codec) };
    let (n, valid) = complete_before(log, cut);
    let header = log.bounds[0];
    let s = Store::<Ledger>::open(dir, o.clone())
        .unwrap_or_else(|e| panic!("{codec:?} cut {cut}: open failed: {e}"));
    assert_eq!(s.read(|st| st.clone()), log_model(n), "{codec:?} cut {cut}");
    assert_eq!(s.last_seq(), n as u64, "{codec:?} cut {cut}");
    let torn = s.recovery().torn_tail.clone();
    if cut == valid && cut >= header {
        assert!(torn.is_none(), "{codec:?} cut {cut}: {torn:?}");
    } else {
        let t = torn.unwrap_or_else(|| panic!("{codec:?} cut {cut}: no torn tail reported"));
        let from = if cut < header { 0 } else { valid };
        assert_eq!(
            (t.offset, t.bytes),
            (from, cut - from),
            "{codec:?} cut {cut}"
        );
        // An empty segment has no torn bytes to keep: no empty quarantine file.
        match t.quarantined_to {
            None => assert_eq!(cut, 0, "{codec:?} cut {cut}: not quarantined"),
            Some(q) => {
                let kept = read(q.file_name().unwrap().to_str().unwrap()).expect("quarantine file");
                assert_eq!(
                    kept,
                    &log.seg[from as usize..cut as usize],
                    "{codec:?} cut {cut}"
                );
            }
        }
    }
    let v = value(n as u64);
    assert_eq!(s.append(&entry(v, pad_of(v))).unwrap(), n as u64 + 1);
    if !reopen {
        return;
    }
    drop(s);
    let s = Store::<Ledger>::open(dir, o).unwrap();
    assert_eq!(
        s.read(|st| st.clone()),
        log_model(n + 1),
        "{codec:?} cut {cut}"
    );
    assert!(s.recovery().torn_tail.is_none());
}

#[test]
fn sampled_cuts_open_end_to_end_in_memory() {
    for codec in codecs() {
        let log = build(codec);
        let dir = Path::new(MEM_DIR);
        let len = log.seg.len() as u64;
        // Every 97th offset, plus every offset inside the header and around the end.
        let cuts: Vec<u64> = (0..=len)
            .step_by(97)
            .chain(0..log.bounds[0] + 2)
            .chain(len.saturating_sub(200)..=len)
            .collect();
        std::thread::scope(|sc| {
            for half in cuts.chunks(cuts.len().div_ceil(2)) {
                let log = &log;
                sc.spawn(move || {
                    let fs = mem_fs();
                    for (i, &cut) in half.iter().enumerate() {
                        let mut files = log.files_marked(false);
                        let seg = files.iter_mut().find(|f| f.0 == SEG).unwrap();
                        seg.1.truncate(cut as usize);
                        fs.set_files(dir, &files);
                        let read = |name: &str| fs.get(&dir.join(name));
                        // Reopening after the append is checked for one cut in 8.
                        open_cut(
                            log,
                            Arc::new(fs.clone()),
                            dir,
                            codec,
                            cut,
                            &read,
                            i % 8 == 0,
                        );
                    }
                });
            }
        });
    }
}

#[test]
fn sampled_cuts_open_end_to_end_on_the_real_filesystem() {
    for codec in codecs() {
        let log = build(codec);
        let len = log.seg.len() as u64;
        let t = tempfile::tempdir().unwrap();
        for (i, cut) in (0..=len).step_by(16411).chain([5, len - 1]).enumerate() {
            let dir = t.path().join(format!("s{i}"));
            std::fs::create_dir(&dir).unwrap();
            std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
                .unwrap();
            for (name, bytes) in &log.files_marked(false) {
                let b = if name == SEG {
                    &bytes[..cut as usize]
                } else {
                    &bytes[..]
                };
                std::fs::write(dir.join(name), b).unwrap();
            }
            let read = |name: &str| std::fs::read(dir.join(name)).ok();
            open_cut(&log, Arc::new(RealFs), &dir, codec, cut, &read, true);
        }
    }
}

#[test]
fn a_cut_below_the_durability_mark_is_corruption_and_changes_nothing() {
    for codec in codecs() {
        let log = build(codec);
        let dir = Path::new(MEM_DIR);
        let len = log.seg.len() as u64;
        for cut in (0..len).step_by(389).chain([len - 1]) {
            let fs = mem_fs();
            let mut files = log.files_marked(true);
            files
                .iter_mut()
                .find(|f| f.0 == SEG)
                .unwrap()
                .1
                .truncate(cut as usize);
            fs.set_files(dir, &files);
            let before = fs.files(dir);
            let o = Options {
                vfs: Arc::new(fs.clone()),
                ..opts(codec)
            };
            match Store::<Ledger>::open(dir, o.clone()) {
                Err(runlog::engine::Error::Corrupt { path, .. }) => {
                    assert_eq!(path, dir.join(SEG), "{codec:?} cut {cut}")
                }
                Err(e) => panic!("{codec:?} cut {cut}: {e}"),
                Ok(_) => panic!("{codec:?} cut {cut}: opened a log missing acknowledged records"),
            }
            assert_eq!(
                fs.files(dir),
                before,
                "{codec:?} cut {cut}: a refused open wrote"
            );
            let v = runlog::engine::Reader::new(o.vfs.as_ref(), dir)
                .verify()
                .unwrap();
            assert!(
                matches!(
                    v.integrity.damage(),
                    Some(runlog::engine::Error::Corrupt { .. })
                ),
                "{codec:?} cut {cut}: {:?}",
                v.integrity
            );
        }
    }
}
