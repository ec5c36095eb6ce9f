//! A one-shot writer's lock-free load reads the durability mark first, then
//! lists the store. A compaction that rotated the log in between (its fsync
//! covering every record before the cut, then the mark raised to prove the new
//! segment's header) left that load with an older mark and a last segment
//! without records that the older mark does not prove. The open took the
//! segment for unproven and copied it, and the copy refused every writer whose
//! fdatasync was still to come ("another writer's open copied the active
//! segment"), though the rotation had made their records durable: a legal
//! checkpoint failed with no fault anywhere (32 concurrent one-shot `runlog
//! unit` writers, about one call in 18,000). The catch-up now replays under the
//! lock in that case, reading the mark as it is (FORMAT.md §5.8 step 1).
use crate::common::hooked::{HookedFs, Hooks};
use crate::common::sum::Sum;
use runlog::engine::vfs::FileBytes;
use runlog::engine::{Codec, CompactionPolicy, Options, RealFs, Store, SyncPolicy, Vfs};
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// RealFs whose next read of `DURABLE` returns the bytes it holds.
#[derive(Debug, Clone, Default)]
struct OlderMarkOnce(Arc<Mutex<Option<Vec<u8>>>>);

impl Hooks for OlderMarkOnce {
    fn read(&self, path: &Path) -> io::Result<FileBytes> {
        if path.ends_with("DURABLE")
            && let Some(older) = self.0.lock().unwrap().take()
        {
            return Ok(Box::new(older));
        }
        RealFs.read(path)
    }
}

#[test]
fn a_one_shot_open_over_a_rotation_it_half_saw_copies_nothing_and_refuses_no_waiting_writer() {
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
        drop(s);

        // A one-shot writer that has written its record and let the writer
        // lock go; its fdatasync is still to come.
        let waiting = Store::<Sum>::open(
            &dir,
            Options {
                one_shot: true,
                sync: SyncPolicy::Never,
                ..opts.clone()
            },
        )
        .unwrap();
        waiting.append(&2).unwrap();
        let older_mark = std::fs::read(dir.join("DURABLE")).unwrap();

        // A writer appends and compacts: the rotation fsyncs every record
        // before the cut (the waiting writer's too) and the mark proves the
        // new, empty segment.
        let c = Store::<Sum>::open(&dir, opts.clone()).unwrap();
        c.append(&3).unwrap();
        c.compact().unwrap();
        drop(c);

        // A one-shot writer whose load read the mark from before that
        // rotation, and listed the store after it.
        let fs = OlderMarkOnce::default();
        *fs.0.lock().unwrap() = Some(older_mark);
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
            "{codec:?}: the older mark was read"
        );
        w.append(&4).unwrap();
        drop(w);

        // The waiting writer's record was made durable by the rotation: its
        // fdatasync (the shared one) acknowledges it.
        waiting
            .sync()
            .unwrap_or_else(|e| panic!("{codec:?}: the waiting writer was refused: {e}"));
        drop(waiting);
        let s = Store::<Sum>::open(&dir, opts).unwrap();
        assert_eq!(s.read(|v| *v), 10, "{codec:?}");
    }
}
