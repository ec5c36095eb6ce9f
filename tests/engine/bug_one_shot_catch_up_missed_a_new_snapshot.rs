//! A one-shot writer's lock-free listing can fall between a compaction's two
//! steps: the log rotated (its new segment listed) but the snapshot not yet
//! renamed into place (not listed). Its catch-up under the writer lock used to
//! read that new segment as the last one and accept the state, whose snapshot
//! chain was then older than the store's; a compaction by that writer chose its
//! delta's parent and the files it deleted from the stale chain. Found by 32
//! concurrent one-shot `runlog unit` writers: one wrote a delta over an older
//! table, a later one deleted a table a newer delta stood on, and no open
//! could read the run again. The catch-up now lists the store under the lock
//! and replays again when the newest snapshot is not the one it loaded over
//! (FORMAT.md §5.8 step 1).
use crate::common::hooked::{HookedFs, Hooks};
use crate::common::sum::Sum;
use runlog::engine::format::snapshot_name;
use runlog::engine::{Codec, CompactionPolicy, Options, RealFs, Store, Vfs};
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// RealFs whose next listing leaves out one name.
#[derive(Debug, Clone, Default)]
struct HideOnce(Arc<Mutex<Option<String>>>);

impl Hooks for HideOnce {
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = RealFs.list(dir)?;
        if let Some(hidden) = self.0.lock().unwrap().take() {
            names.retain(|n| *n != hidden);
        }
        Ok(names)
    }
}

#[test]
fn a_one_shot_writer_whose_listing_missed_the_newest_snapshot_replays_under_the_lock() {
    for codec in [Codec::Jsonl, Codec::Binary] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("s");
        let opts = Options {
            create: true,
            codec,
            compaction: CompactionPolicy::Manual,
            ..Options::default()
        };
        let s = Store::<Sum>::open(&dir, opts.clone()).unwrap();
        s.append(&1).unwrap();
        let older = s.compact().unwrap().snapshot_seq;
        s.append(&2).unwrap();
        // The newest snapshot; the log goes on in a segment named for the next seq.
        let newest = s.compact().unwrap().snapshot_seq;
        s.append(&3).unwrap();
        drop(s);

        // The writer's lock-free listing misses the newest snapshot, as one
        // taken between that compaction's rotation and its rename does; the
        // older snapshot and the log from it are still there (a compaction
        // keeps both, FORMAT.md §14.5), so that replay alone looks clean.
        let fs = HideOnce::default();
        *fs.0.lock().unwrap() = Some(snapshot_name(newest));
        let w = Store::<Sum>::open(
            &dir,
            Options {
                one_shot: true,
                vfs: Arc::new(HookedFs(fs.clone())),
                ..opts.clone()
            },
        )
        .unwrap();
        assert!(
            fs.0.lock().unwrap().is_none(),
            "{codec:?}: the hiding listing ran"
        );
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
        let s = Store::<Sum>::open(&dir, opts).unwrap();
        assert_eq!(s.read(|v| *v), 10, "{codec:?}");
    }
}
