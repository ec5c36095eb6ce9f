//! Proves that the engine's errors are not swallowed (issue 11, item 8),
//! through the Vfs seam: a final sync that fails when a store under `Never`
//! is closed is returned by `Store::close` (a drop counts it in
//! `Stats::close_sync_failures`); failed unlinks and directory fsyncs after a compaction are
//! counted in `Stats::cleanup_failures` (failed unlinks here), and `verify`
//! names the files left.
use runlog::engine::vfs::{Vfs, VfsFile};
use runlog::engine::{CompactionPolicy, Options, Reader, RealFs, Store, SyncPolicy};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common::hooked::{HookedFs, Hooks};
use crate::common::sum;
use sum::Sum;

/// RealFs whose file fsyncs and unlinks fail on demand.
#[derive(Debug, Default, Clone)]
struct FailFs {
    fail_fsync: Arc<AtomicBool>,
    fail_remove: Arc<AtomicBool>,
}

fn eio() -> io::Error {
    io::Error::from_raw_os_error(5)
}

impl Hooks for FailFs {
    fn sync_data(&self, _: &Path, f: &dyn VfsFile) -> io::Result<()> {
        if self.fail_fsync.load(Ordering::SeqCst) {
            return Err(eio());
        }
        f.sync_data()
    }
    fn sync_all(&self, _: &Path, f: &dyn VfsFile) -> io::Result<()> {
        if self.fail_fsync.load(Ordering::SeqCst) {
            return Err(eio());
        }
        f.sync_all()
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        if self.fail_remove.load(Ordering::SeqCst) {
            return Err(eio());
        }
        RealFs.remove(path)
    }
}

fn opts(fs: &FailFs, sync: SyncPolicy) -> Options {
    Options {
        create: true,
        sync,
        compaction: CompactionPolicy::Manual,
        vfs: Arc::new(HookedFs(fs.clone())),
        ..Options::default()
    }
}

#[test]
fn a_failed_final_sync_is_returned_by_close_and_counted_by_drop() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let fs = FailFs::default();
    // Closed: the error comes back.
    let s = Store::<Sum>::open(&dir, opts(&fs, SyncPolicy::Never)).unwrap();
    s.append(&1).unwrap();
    fs.fail_fsync.store(true, Ordering::SeqCst);
    let e = s.close().expect_err("the final fsync failed");
    assert!(
        runlog::engine::ErrorChain(&e).to_string().contains("fsync"),
        "{}",
        runlog::engine::ErrorChain(&e)
    );
    fs.fail_fsync.store(false, Ordering::SeqCst);
    // A clean close is Ok.
    let s = Store::<Sum>::open(&dir, opts(&fs, SyncPolicy::Never)).unwrap();
    s.append(&2).unwrap();
    s.close().unwrap();
    // Under Always every acknowledged append is durable already: nothing to return.
    let s = Store::<Sum>::open(&dir, opts(&fs, SyncPolicy::Always)).unwrap();
    s.append(&3).unwrap();
    fs.fail_fsync.store(true, Ordering::SeqCst);
    s.close().unwrap();
}

#[test]
fn failed_cleanups_after_a_compaction_are_counted_and_verify_names_the_leftovers() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let fs = FailFs::default();
    let s = Store::<Sum>::open(&dir, opts(&fs, SyncPolicy::Always)).unwrap();
    for round in 0..3u64 {
        s.append(&(round + 1)).unwrap();
        if round == 2 {
            fs.fail_remove.store(true, Ordering::SeqCst);
        }
        // The third compaction's unlinks (segments and the oldest snapshot) fail.
        let _ = s.compact();
    }
    let failed = s.stats().cleanup_failures.load(Ordering::Relaxed);
    assert!(failed >= 2, "each failed unlink counted: {failed}");
    fs.fail_remove.store(false, Ordering::SeqCst);
    drop(s);
    let r = Reader::new(&RealFs, &dir).verify().unwrap();
    let names: Vec<String> = r
        .leftovers
        .iter()
        .map(|p: &PathBuf| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n.starts_with("snap-")), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("seg-")), "{names:?}");
    // The next compaction removes them, and verify has nothing to name.
    let s = Store::<Sum>::open(&dir, opts(&fs, SyncPolicy::Always)).unwrap();
    s.append(&9).unwrap();
    s.compact().unwrap();
    s.append(&9).unwrap();
    s.compact().unwrap();
    drop(s);
    assert_eq!(
        Reader::new(&RealFs, &dir).verify().unwrap().leftovers,
        Vec::<PathBuf>::new()
    );
}
