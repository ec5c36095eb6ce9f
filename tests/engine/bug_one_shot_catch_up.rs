//! Two ways a one-shot writer's lock-free load (FORMAT.md §5.8 step 1) could
//! fall between a compaction's steps, each found by 32 concurrent one-shot
//! `runlog unit` writers; the catch-up under the writer lock now replays again
//! in both.
//!
//! - **A listing that missed the newest snapshot.** A compaction rotates the
//!   log, then renames its snapshot into place. A listing taken between the two
//!   held the new segment but not the snapshot; the catch-up read that segment
//!   as the last one and accepted a state whose chain was older than the
//!   store's, from which the writer's own compaction chose a delta's parent and
//!   the files it deleted. One wrote a delta over an older table, a later one
//!   deleted a table a newer delta stood on, and no open could read the run.
//! - **A mark read before a rotation it then listed.** The load reads the
//!   durability mark first, then lists. A rotation in between (its fsync
//!   covering every record before the cut, then the mark raised to prove the
//!   new segment's header) left an older mark and a last segment without
//!   records that it does not prove. The open took that segment for unproven
//!   and copied it, and the copy refused every writer whose fdatasync was
//!   still to come ("another writer's open copied the active segment"), though
//!   the rotation had made their records durable: about one call in 18,000
//!   failed with no fault anywhere.
use crate::common::hooked::{HookedFs, Hooks};
use crate::common::sum::Sum;
use runlog::engine::format::snapshot_name;
use runlog::engine::vfs::FileBytes;
use runlog::engine::{Codec, CompactionPolicy, Options, RealFs, Store, SyncPolicy, Vfs};
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// RealFs that once leaves one name out of a listing (`hidden`) and once
/// returns older bytes for a read of `DURABLE` (`older_mark`).
#[derive(Debug, Clone, Default)]
struct Stale {
    hidden: Arc<Mutex<Option<String>>>,
    older_mark: Arc<Mutex<Option<Vec<u8>>>>,
}

impl Hooks for Stale {
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = RealFs.list(dir)?;
        if let Some(hidden) = self.hidden.lock().unwrap().take() {
            names.retain(|n| *n != hidden);
        }
        Ok(names)
    }
    fn read(&self, path: &Path) -> io::Result<FileBytes> {
        if path.ends_with("DURABLE")
            && let Some(older) = self.older_mark.lock().unwrap().take()
        {
            return Ok(Box::new(older));
        }
        RealFs.read(path)
    }
}

impl Stale {
    /// Whether every stale answer it was given was handed out.
    fn used(&self) -> bool {
        self.hidden.lock().unwrap().is_none() && self.older_mark.lock().unwrap().is_none()
    }
}

fn opts(codec: Codec) -> Options {
    Options {
        create: true,
        codec,
        compaction: CompactionPolicy::Manual,
        ..Options::default()
    }
}

/// A one-shot writer whose lock-free load goes through `fs`.
fn one_shot_through(dir: &Path, codec: Codec, fs: &Stale) -> Store<Sum> {
    let w = Store::<Sum>::open(
        dir,
        Options {
            one_shot: true,
            vfs: Arc::new(HookedFs(fs.clone())),
            ..opts(codec)
        },
    )
    .unwrap();
    assert!(fs.used(), "{codec:?}: the stale answers were read");
    w
}

fn reopened_sum(dir: &Path, codec: Codec) -> u64 {
    Store::<Sum>::open(dir, opts(codec)).unwrap().read(|v| *v)
}

#[test]
fn a_one_shot_writer_whose_listing_missed_the_newest_snapshot_replays_under_the_lock() {
    for codec in [Codec::Jsonl, Codec::Binary] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        let s = Store::<Sum>::open(&dir, opts(codec)).unwrap();
        s.append(&1).unwrap();
        let older = s.compact().unwrap().snapshot_seq;
        s.append(&2).unwrap();
        // The newest snapshot; the log goes on in a segment named for the next seq.
        let newest = s.compact().unwrap().snapshot_seq;
        s.append(&3).unwrap();
        drop(s);

        // The listing misses the newest snapshot; the older one and the log
        // from it are still there (a compaction keeps both, FORMAT.md §14.5),
        // so that replay alone looks clean.
        let fs = Stale::default();
        *fs.hidden.lock().unwrap() = Some(snapshot_name(newest));
        let w = one_shot_through(&dir, codec, &fs);
        let r = w.recovery();
        assert_eq!(
            r.snapshot_seq,
            Some(newest),
            "{codec:?}: the writer's state stands on the store's newest snapshot ({newest}), not on {older:?}"
        );
        assert_eq!(
            r.records_caught_up, 0,
            "{codec:?}: replayed again under the lock"
        );
        w.append(&4).unwrap();
        assert_eq!(w.read(|v| *v), 10, "{codec:?}");
        drop(w);
        assert_eq!(reopened_sum(&dir, codec), 10, "{codec:?}");
    }
}

#[test]
fn a_one_shot_open_over_a_rotation_it_half_saw_copies_nothing_and_refuses_no_waiting_writer() {
    for codec in [Codec::Jsonl, Codec::Binary] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        let s = Store::<Sum>::open(&dir, opts(codec)).unwrap();
        s.append(&1).unwrap();
        drop(s);

        // A one-shot writer that has written its record and let the writer
        // lock go; its fdatasync is still to come.
        let waiting = Store::<Sum>::open(
            &dir,
            Options {
                one_shot: true,
                sync: SyncPolicy::Never,
                ..opts(codec)
            },
        )
        .unwrap();
        waiting.append(&2).unwrap();
        let older_mark = std::fs::read(dir.join("DURABLE")).unwrap();

        // A writer appends and compacts: the rotation fsyncs every record
        // before the cut (the waiting writer's too) and the mark proves the
        // new, empty segment.
        let c = Store::<Sum>::open(&dir, opts(codec)).unwrap();
        c.append(&3).unwrap();
        c.compact().unwrap();
        drop(c);

        // The load read the mark from before that rotation, and listed after it.
        let fs = Stale::default();
        *fs.older_mark.lock().unwrap() = Some(older_mark);
        let w = one_shot_through(&dir, codec, &fs);
        w.append(&4).unwrap();
        drop(w);

        // The waiting writer's record was made durable by the rotation: its
        // fdatasync (the shared one) acknowledges it.
        waiting
            .sync()
            .unwrap_or_else(|e| panic!("{codec:?}: the waiting writer was refused: {e}"));
        drop(waiting);
        assert_eq!(reopened_sum(&dir, codec), 10, "{codec:?}");
    }
}
