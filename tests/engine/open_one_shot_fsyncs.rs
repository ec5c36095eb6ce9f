//! Proves that a one-shot `Runs::change` on a run whose last session ended
//! cleanly replays the run once, opens its segment once under the lock and
//! fsyncs once (one fdatasync, no directory fsync) and never writes over a
//! record, that a refused change fsyncs nothing
//! and writes no segment or snapshot, and documents the one case that needs
//! more: a last segment without records whose durability mark was lost is
//! copied to a new file first.
use crate::common::{run_spec, unit_done};
use crate::open_counting_vfs;
use open_counting_vfs::CountingFs;
use runlog::engine::frame::{Frame, decode_record, decode_segment_header};
use runlog::engine::mark::decode_mark;
use runlog::engine::{Codec, ErrorChain};
use runlog::run::*;
use std::path::Path;
use std::sync::Arc;

/// Every file of the run but `LOCK`, with its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| (e.file_name().into_string().unwrap(), e.path()))
        .filter(|(n, _)| n != "LOCK")
        .map(|(n, p)| (n, std::fs::read(p).unwrap()))
        .collect();
    v.sort();
    v
}

fn setup(codec: Codec) -> (tempfile::TempDir, Runs, CountingFs) {
    let tmp = tempfile::tempdir().unwrap();
    let fs = CountingFs::new();
    let runs = Runs::new(tmp.path())
        .with_codec(codec)
        .with_vfs(Arc::new(fs.clone()));
    let run = runs.init(run_spec("r", 100)).unwrap();
    run.apply(unit_done("u0")).unwrap();
    drop(run);
    // A one-shot session that ended cleanly.
    runs.change("r", unit_done("u1")).unwrap();
    (tmp, runs, fs)
}

#[test]
fn an_accepted_one_shot_change_replays_once_and_fsyncs_once() {
    for codec in [Codec::Jsonl, Codec::Binary] {
        let (_tmp, runs, fs) = setup(codec);
        fs.reset();
        runs.change("r", unit_done("u2")).unwrap();
        let c = fs.counts();
        assert_eq!(
            c.reads_of("seg-"),
            ["seg-00000000000000000001.log"],
            "{codec:?}: one replay"
        );
        assert!(c.reads_of("snap-").is_empty(), "{codec:?}");
        assert_eq!(
            (c.sync_data, c.sync_all, c.sync_dir),
            (1, 0, 0),
            "{codec:?}: one fdatasync, covering the new record"
        );
        // One pwrite of the new record (and one of the durability mark).
        let seg_writes: Vec<_> = c
            .writes
            .iter()
            .filter(|(p, _)| p.ends_with("seg-00000000000000000001.log"))
            .collect();
        if codec == Codec::Jsonl {
            assert_eq!(seg_writes.len(), 1, "{codec:?}: {seg_writes:?}");
        }
        // Binary: the same one write, over the zeros the last writer preallocated
        // (an open keeps them, FORMAT.md §5.5).
        if codec == Codec::Binary {
            assert_eq!(seg_writes.len(), 1, "{codec:?}: {seg_writes:?}");
        }
        assert!(c.creates.is_empty() && c.removes.is_empty(), "{codec:?}");
        // Under the lock the segment is opened once: the catch-up reads what
        // was appended since the replay through the descriptor the append
        // then writes through (FORMAT.md §5.8 step 1).
        let seg = |v: &[std::path::PathBuf]| {
            v.iter()
                .filter(|p| p.to_string_lossy().contains("seg-"))
                .count()
        };
        let caught: Vec<_> = c.tails_for_write.iter().map(|(p, _)| p.clone()).collect();
        assert_eq!(
            (seg(&caught), c.tails.len(), seg(&c.write_opens)),
            (1, 0, 0),
            "{codec:?}: one open of the segment for the catch-up and the append: {c:?}"
        );
        let doc = runs.read("r").unwrap();
        assert_eq!(doc.open_units().len(), 97, "{codec:?}");
    }
}

#[test]
fn a_refused_one_shot_change_fsyncs_nothing_and_writes_no_segment() {
    for codec in [Codec::Jsonl, Codec::Binary] {
        let (tmp, runs, fs) = setup(codec);
        let dir = tmp.path().join("runs").join("r");
        let before = files(&dir);
        fs.reset();
        let refused = Change::Resolve {
            id: "item-404".into(),
            note: None,
        };
        let err = runs.change("r", refused).unwrap_err();
        assert!(
            ErrorChain(&err).to_string().contains("item-404"),
            "{codec:?}: {err}"
        );
        let c = fs.counts();
        assert_eq!(c.syncs(), 0, "{codec:?}: {c:?}");
        assert_eq!(c.changed("seg-"), Vec::<String>::new(), "{codec:?}");
        assert_eq!(c.changed("snap-"), Vec::<String>::new(), "{codec:?}");
        assert!(c.creates.is_empty() && c.removes.is_empty(), "{codec:?}");
        assert_eq!(c.reads_of("seg-").len(), 1, "{codec:?}: one replay");
        assert_eq!(files(&dir), before, "{codec:?}");
    }
}

#[test]
fn after_a_compaction_the_first_one_shot_change_fsyncs_once_too() {
    let (tmp, runs, fs) = setup(Codec::Jsonl);
    let run = runs.open("r").unwrap();
    run.store().compact().unwrap();
    drop(run);
    fs.reset();
    runs.change("r", unit_done("u2")).unwrap();
    let c = fs.counts();
    // The last segment holds no record yet, but the durability mark the
    // rotation wrote after creating it (FORMAT.md §5.7) proves its header and
    // name durable: no directory fsync, no copy.
    assert_eq!((c.sync_data, c.sync_all, c.sync_dir), (1, 0, 0), "{c:?}");
    assert!(c.reads_of("snap-").len() == 1, "{c:?}");
    fs.reset();
    runs.change("r", unit_done("u3")).unwrap();
    let c = fs.counts();
    assert_eq!((c.sync_data, c.sync_all, c.sync_dir), (1, 0, 0), "{c:?}");
    // The segments the snapshot covers are not read.
    assert_eq!(c.reads_of("seg-").len(), 1, "{c:?}");

    // Without the mark (a crash lost its write), nothing proves the newest
    // segment's header durable after another compaction: its first writer
    // copies it to a new file (fsync, rename, directory fsync) before
    // appending, after an fdatasync of the old file, so that a failure of it
    // no fsync reported yet is met before its bytes are copied (FORMAT.md
    // §5.8, "Read"); then its own record's fdatasync.
    let run = runs.open("r").unwrap();
    run.store().compact().unwrap();
    drop(run);
    std::fs::remove_file(tmp.path().join("runs/r/DURABLE")).unwrap();
    fs.reset();
    runs.change("r", unit_done("u4")).unwrap();
    let c = fs.counts();
    assert_eq!((c.sync_data, c.sync_all, c.sync_dir), (2, 1, 1), "{c:?}");
    assert_eq!(c.renames, 1, "{c:?}");
    assert_eq!(runs.read("r").unwrap().open_units().len(), 95);
}

#[test]
fn one_shot_changes_never_write_over_a_record_and_each_proves_the_last() {
    // Regression (issue 19): one-shot records carried the watermark their open
    // could prove, which lagged ~33 records behind, and each open rewrote up
    // to 32 acknowledged records in place. Now each one-shot change writes its
    // record after the last one and the durability mark, with one fdatasync,
    // and each record's `synced` covers the one before it.
    for codec in [Codec::Jsonl, Codec::Binary] {
        let (tmp, runs, fs) = setup(codec);
        let seg = tmp.path().join("runs/r/seg-00000000000000000001.log");
        for i in 2..60 {
            let end = valid_end(&std::fs::read(&seg).unwrap());
            fs.reset();
            runs.change("r", unit_done(&format!("u{i}"))).unwrap();
            let c = fs.counts();
            assert_eq!(
                (c.sync_data, c.sync_all, c.sync_dir),
                (1, 0, 0),
                "{codec:?} {c:?}"
            );
            // No segment is cut; the tail cache is, to its new length (§15).
            assert!(
                c.set_lens.iter().all(|(p, _)| p.ends_with("TAIL")),
                "{codec:?}: {c:?}"
            );
            for (path, at) in &c.writes_at {
                let name = path.file_name().unwrap().to_string_lossy();
                match name.as_ref() {
                    "DURABLE" => assert_eq!(*at, 0),
                    // The appended position and the sync state (§5.8).
                    "SHARED" => assert!(*at == 0 || *at == 64, "{at}"),
                    "LOCK" | "SYNC" => {}
                    // The tail cache, written in place (§15).
                    "TAIL" => assert_eq!(*at, 0),
                    _ if name.starts_with("seg-") => assert!(
                        *at >= end,
                        "{codec:?} change {i}: wrote at {at}, over records ending at {end}"
                    ),
                    other => panic!("{codec:?}: wrote {other}"),
                }
            }
        }
        assert_eq!(runs.read("r").unwrap().open_units().len(), 40, "{codec:?}");
        // Every record's watermark covers its predecessor: damage to any but
        // the last is provably damage to durable data, and the last is the mark's.
        let bytes = std::fs::read(&seg).unwrap();
        let mut frames = 0;
        let mut at = decode_segment_header(&bytes).unwrap().len;
        while let Frame::Record {
            seq, synced, next, ..
        } = decode_record(codec, &bytes, at)
        {
            if seq > 2 {
                assert_eq!(synced, seq - 1, "{codec:?}");
            }
            frames += 1;
            at = next;
        }
        assert_eq!(frames, 61, "{codec:?}");
        let mark = decode_mark(&std::fs::read(tmp.path().join("runs/r/DURABLE")).unwrap()).unwrap();
        assert_eq!(
            (mark.seq, mark.segment, mark.end),
            (61, 1, at as u64),
            "{codec:?}"
        );
    }
}

/// Where a segment's records end (before any preallocated zeros).
fn valid_end(seg: &[u8]) -> u64 {
    runlog::engine::scan::scan_segment::<()>(seg, |_, _, _| Ok(()))
        .unwrap()
        .valid_len
}
