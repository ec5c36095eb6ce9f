//! Proves that a lock-free reader tells an append in progress from a torn tail
//! (issue 48, item 5; FORMAT.md §5.6). A `pwrite` is not atomic against a
//! concurrent read: `verify` beside one-shot writers now and then read a
//! prefix of a record still being written, and reported it as a torn tail.
//!
//! Here the reader meets exactly that, deterministically: the store's
//! writer lock (`LOCK`, the real one) is held, the segment ends in a prefix
//! of the next record, and the test completes the write and lets the lock go
//! at a chosen look of the reader at the lock (`Vfs::lock_busy`, hooked).
//! `verify` waits and finds the record whole; the read-only open reports an
//! append in progress, never a torn tail; and bytes that stay the same once
//! the lock is free are still a torn tail.
use crate::common::hooked::{HookedFs, Hooks};
use crate::common::sum::Sum;
use runlog::engine::vfs::{LockAttempt, Vfs};
use runlog::engine::{Codec, Integrity, Options, Reader, RealFs, Store};
use std::fmt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The writer the test plays: it holds the writer lock with a record half
/// written, and finishes its `pwrite` (then lets the lock go, as every
/// writer does, §5.8 step 2) when the reader looks at the lock for the
/// `complete_at`-th time; never, when `None`.
#[derive(Default)]
struct Flight {
    looks: usize,
    complete_at: Option<usize>,
    lock: Option<Box<dyn Send + Sync>>,
    /// The segment, where the rest of the record goes, and the rest.
    rest: Option<(PathBuf, u64, Vec<u8>)>,
}

impl fmt::Debug for Flight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Flight")
            .field("looks", &self.looks)
            .field("complete_at", &self.complete_at)
            .field("lock_held", &self.lock.is_some())
            .finish()
    }
}

#[derive(Debug, Clone, Default)]
struct Midway(Arc<Mutex<Flight>>);

impl Hooks for Midway {
    fn lock_busy(&self, path: &Path) -> bool {
        let mut f = self.0.lock().unwrap();
        f.looks += 1;
        if f.complete_at == Some(f.looks) {
            if let Some((seg, at, rest)) = f.rest.take() {
                let file = std::fs::OpenOptions::new().write(true).open(seg).unwrap();
                file.write_all_at(&rest, at).unwrap();
            }
            // The pwrite returned; only now is the lock let go.
            f.lock = None;
        }
        drop(f);
        RealFs.lock_busy(path)
    }
}

impl Midway {
    fn looks(&self) -> usize {
        self.0.lock().unwrap().looks
    }
}

fn opts(codec: Codec) -> Options {
    // No preallocation: the half record is then the end of the file, as the
    // reader in the report saw it ("incomplete frame (K of K+1 bytes
    // present)"). Zeros after it would read as a checksum mismatch instead,
    // which settles the same way.
    Options {
        codec,
        preallocate: 0,
        ..Options::default()
    }
}

/// A store of records 1..=3, its segment, and the bytes of record 4 as a
/// writer appends it (taken from a copy of the store that appended it).
fn store_and_next_record(codec: Codec) -> (tempfile::TempDir, PathBuf, PathBuf, Vec<u8>) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let s = Store::<Sum>::open(
        &dir,
        Options {
            create: true,
            ..opts(codec)
        },
    )
    .unwrap();
    for v in 1..=3 {
        s.append(&v).unwrap();
    }
    drop(s);
    let copy = tmp.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    for e in std::fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
    }
    let seg_name = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.starts_with("seg-"))
        .unwrap();
    let seg = dir.join(&seg_name);
    let before = std::fs::read(&seg).unwrap();
    let s = Store::<Sum>::open(&copy, opts(codec)).unwrap();
    s.append(&4).unwrap();
    drop(s);
    let after = std::fs::read(copy.join(&seg_name)).unwrap();
    assert_eq!(
        after[..before.len()],
        before[..],
        "the copy appended after the same bytes"
    );
    let record = after[before.len()..].to_vec();
    assert!(record.len() > 2, "{codec:?}");
    (tmp, dir, seg, record)
}

/// Holds `dir`'s writer lock and writes the first `cut` bytes of `record` at
/// the end of `seg`: a writer in the middle of its `pwrite`. Returns the
/// hook that finishes it, and the offset the record starts at.
fn mid_append(dir: &Path, seg: &Path, record: &[u8], cut: usize) -> (Midway, u64) {
    let lock = match RealFs
        .try_lock(&dir.join("LOCK"), "the test's writer")
        .unwrap()
    {
        LockAttempt::Acquired(g) => g,
        LockAttempt::Busy(h) => panic!("lock held by {h:?}"),
    };
    let at = std::fs::metadata(seg).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(seg).unwrap();
    file.write_all_at(&record[..cut], at).unwrap();
    let hook = Midway::default();
    {
        let mut f = hook.0.lock().unwrap();
        f.lock = Some(lock);
        f.rest = Some((seg.to_path_buf(), at + cut as u64, record[cut..].to_vec()));
    }
    (hook, at)
}

#[test]
fn an_append_in_flight_when_verify_reads_it_is_whole_once_the_lock_is_free() {
    for codec in [Codec::Binary, Codec::Jsonl] {
        let (_tmp, dir, seg, record) = store_and_next_record(codec);
        // One byte, half, and all but the last byte of the record written.
        for cut in [1, record.len() / 2, record.len() - 1] {
            let (hook, at) = mid_append(&dir, &seg, &record, cut);
            let fs = HookedFs(hook.clone());
            // The read-only open looks once and does not wait: the record is
            // an append in progress, not counted, never a torn tail.
            let (sum, report) = Reader::new(&fs, &dir).state::<Sum>().unwrap();
            assert_eq!((sum, report.last_seq), (6, 3), "{codec:?} cut {cut}");
            assert_eq!(report.torn_tail, None, "{codec:?} cut {cut}");
            let t = report.append_in_progress.expect("an append in progress");
            assert_eq!((t.offset, t.bytes), (at, cut as u64), "{codec:?} cut {cut}");
            assert_eq!(hook.looks(), 1);
            // verify waits: the writer finishes at its third look.
            hook.0.lock().unwrap().complete_at = Some(3);
            let v = Reader::new(&fs, &dir).verify().unwrap();
            assert!(
                v.integrity.is_clean(),
                "{codec:?} cut {cut}: {:?}",
                v.integrity
            );
            assert_eq!(v.recovery.last_seq, 4, "{codec:?} cut {cut}");
            assert_eq!(v.recovery.append_in_progress, None);
            assert_eq!(hook.looks(), 3, "{codec:?} cut {cut}: looked until free");
            let (sum, report) = Reader::new(&fs, &dir).state::<Sum>().unwrap();
            assert_eq!((sum, report.last_seq), (10, 4));
            assert_eq!((report.torn_tail, report.append_in_progress), (None, None));
            // Back to three records for the next cut (no reader or writer
            // has acknowledged record 4).
            std::fs::OpenOptions::new()
                .write(true)
                .open(&seg)
                .unwrap()
                .set_len(at)
                .unwrap();
        }
    }
}

#[test]
fn a_lock_held_for_all_of_verify_s_wait_is_an_append_in_progress_not_damage() {
    for codec in [Codec::Binary, Codec::Jsonl] {
        let (_tmp, dir, seg, record) = store_and_next_record(codec);
        let cut = record.len() - 1;
        let (hook, at) = mid_append(&dir, &seg, &record, cut);
        let fs = HookedFs(hook.clone());
        let v = Reader::new(&fs, &dir).verify().unwrap();
        match &v.integrity {
            Integrity::AppendInProgress {
                path,
                offset,
                bytes,
                ..
            } => assert_eq!((path, *offset, *bytes), (&seg, at, cut as u64), "{codec:?}"),
            other => panic!("{codec:?}: {other:?}"),
        }
        assert!(v.ok() && v.integrity.is_readable() && !v.integrity.is_clean());
        assert_eq!(v.recovery.last_seq, 3);
        assert_eq!(v.recovery.torn_tail, None);
        assert_eq!(v.recovery.append_in_progress.unwrap().offset, at);
        assert!(hook.looks() > 1, "it waited, looking again");
        // Nothing was written by the reader.
        assert_eq!(std::fs::metadata(&seg).unwrap().len(), at + cut as u64);
    }
}

#[test]
fn bytes_that_read_the_same_once_the_lock_is_free_are_still_a_torn_tail() {
    for codec in [Codec::Binary, Codec::Jsonl] {
        let (_tmp, dir, seg, record) = store_and_next_record(codec);
        let cut = record.len() / 2;
        // A writer killed during its pwrite: the lock is let go (the kernel
        // drops it with the process), the bytes stay as they are. Busy at
        // the first look, free at the second, nothing written.
        let (hook, at) = mid_append(&dir, &seg, &record, cut);
        {
            let mut f = hook.0.lock().unwrap();
            f.rest = None;
            f.complete_at = Some(2);
        }
        let fs = HookedFs(hook.clone());
        let v = Reader::new(&fs, &dir).verify().unwrap();
        match &v.integrity {
            Integrity::TornTail { offset, bytes, .. } => {
                assert_eq!((*offset, *bytes), (at, cut as u64), "{codec:?}")
            }
            other => panic!("{codec:?}: {other:?}"),
        }
        assert_eq!(hook.looks(), 2);
        assert_eq!(v.recovery.append_in_progress, None);
        // No writer at all now: the read-only open looks, finds the lock
        // free, reads again, and reports the torn tail.
        let (sum, report) = Reader::new(&RealFs, &dir).state::<Sum>().unwrap();
        assert_eq!(sum, 6);
        assert_eq!(report.append_in_progress, None);
        assert_eq!(report.torn_tail.unwrap().offset, at, "{codec:?}");
        let v = Reader::new(&RealFs, &dir).verify().unwrap();
        assert!(
            matches!(v.integrity, Integrity::TornTail { .. }),
            "{codec:?}"
        );
    }
}
