//! Proves that a one-shot `Runs::change` on a run whose last session ended
//! cleanly replays the run once and fsyncs once (one fdatasync, no directory
//! fsync), that a refused change fsyncs nothing and writes no segment or
//! snapshot, and documents the one case that needs one more: a last segment
//! without records (after a compaction) gets a directory fsync.
use crate::common::{run_spec, unit_done};
use crate::open_counting_vfs;
use open_counting_vfs::CountingFs;
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
            "{codec:?}: one fdatasync, covering the rewritten tail and the new record"
        );
        // One pwrite: the bytes not known durable (the last record) and the new one.
        let seg_writes: Vec<_> = c
            .writes
            .iter()
            .filter(|(p, _)| p.ends_with("seg-00000000000000000001.log"))
            .collect();
        if codec == Codec::Jsonl {
            assert_eq!(seg_writes.len(), 1, "{codec:?}: {seg_writes:?}");
        }
        // Binary: the same one write of records, after the zeros of the next
        // preallocation step (the open cut the old ones, FORMAT.md §5.5).
        assert!(c.creates.is_empty() && c.removes.is_empty(), "{codec:?}");
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
fn after_a_compaction_the_first_one_shot_change_also_fsyncs_the_directory() {
    let (_tmp, runs, fs) = setup(Codec::Jsonl);
    let run = runs.open("r").unwrap();
    run.store().compact().unwrap();
    drop(run);
    fs.reset();
    runs.change("r", unit_done("u2")).unwrap();
    let c = fs.counts();
    // The last segment holds no record yet: nothing proves its creator's
    // directory fsync happened, so its name is made durable before a record in
    // it is acknowledged. The header is rewritten with the record.
    assert_eq!((c.sync_data, c.sync_all, c.sync_dir), (1, 0, 1), "{c:?}");
    assert!(c.reads_of("snap-").len() == 1, "{c:?}");
    fs.reset();
    runs.change("r", unit_done("u3")).unwrap();
    let c = fs.counts();
    assert_eq!((c.sync_data, c.sync_all, c.sync_dir), (1, 0, 0), "{c:?}");
    // The segments the snapshot covers are not read.
    assert_eq!(c.reads_of("seg-").len(), 1, "{c:?}");
}

#[test]
fn the_rewrite_of_one_shot_changes_stays_bounded() {
    // Each one-shot record carries the watermark its open could prove, so the
    // part not known durable grows by one record per open until a bound (32
    // records), where an open makes it durable on its own: one fdatasync more,
    // once per 32 opens, and never more than 33 records rewritten.
    let (_tmp, runs, fs) = setup(Codec::Jsonl);
    let (mut syncs, mut two, mut widest) = (0, 0, 0);
    for i in 2..100 {
        fs.reset();
        runs.change("r", unit_done(&format!("u{i}"))).unwrap();
        let c = fs.counts();
        assert_eq!((c.sync_all, c.sync_dir), (0, 0), "{c:?}");
        syncs += c.sync_data;
        two += u64::from(c.sync_data == 2);
        let written: usize = c
            .writes
            .iter()
            .filter(|(p, _)| p.extension().is_some_and(|e| e == "log"))
            .map(|(_, n)| n)
            .sum();
        widest = widest.max(written);
    }
    // Every change acknowledged is there (a watermark raised past the new
    // record would have skipped its write).
    assert!(runs.read("r").unwrap().open_units().is_empty());
    assert!(
        (1..=4).contains(&two),
        "{two} opens of 98 needed a second fdatasync"
    );
    assert_eq!(syncs, 98 + two);
    let record = 200; // a JSONL `unit` record is under 200 bytes
    assert!(widest <= 34 * record, "a one-shot wrote {widest} bytes");
}
