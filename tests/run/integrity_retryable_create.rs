//! Proves that retryable failures can be retried (issue 11, item 3) through
//! the Vfs seam, each a fault at a named call: an `init` whose record's
//! fdatasync fails leaves nothing that blocks `init` again; a store directory
//! created by someone else between the check and the `mkdir` (the concurrent
//! init) is not an I/O error but a refusal ("created meanwhile", exit 2);
//! `EINTR` on `mkdir` and on `rename` is retried, so `init` and `compact`
//! succeed. The concurrent init is also run with the real binary.
use crate::cli_support;
use crate::common::hooked::{HookedFs, Hooks};
use runlog::engine::RealFs;
use runlog::engine::vfs::{Vfs, VfsFile};
use runlog::run::*;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// RealFs with faults at chosen calls, each fired once.
#[derive(Debug, Default)]
struct FaultFs {
    /// Fail the n-th `sync_data` of a segment (1-based; 0: never) with EIO.
    fail_seg_sync_data: AtomicU32,
    seg_sync_datas: AtomicU32,
    /// `EINTR` from the next `mkdir` / `rename`, before it does anything.
    eintr_mkdir: AtomicBool,
    eintr_rename: AtomicBool,
    /// Before the next `mkdir` of a path ending in this name, another process
    /// creates that directory (the check before it saw none).
    race_mkdir_of: std::sync::Mutex<Option<String>>,
    fired: AtomicU32,
}

#[derive(Debug, Clone, Default)]
struct Shared(Arc<FaultFs>);

impl Hooks for Shared {
    fn sync_data(&self, path: &Path, f: &dyn VfsFile) -> io::Result<()> {
        let seg = path.to_string_lossy().contains("seg-");
        if seg {
            let n = self.0.seg_sync_datas.fetch_add(1, Ordering::SeqCst) + 1;
            if n == self.0.fail_seg_sync_data.load(Ordering::SeqCst) {
                self.0.fired.fetch_add(1, Ordering::SeqCst);
                return Err(io::Error::from_raw_os_error(5));
            }
        }
        f.sync_data()
    }
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        let race = self.0.race_mkdir_of.lock().unwrap().clone();
        if race.is_some_and(|n| path.ends_with(&n)) {
            *self.0.race_mkdir_of.lock().unwrap() = None;
            self.0.fired.fetch_add(1, Ordering::SeqCst);
            RealFs.create_dir(path)?;
        }
        if self.0.eintr_mkdir.swap(false, Ordering::SeqCst) {
            self.0.fired.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(4));
        }
        RealFs.create_dir(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        if self.0.eintr_rename.swap(false, Ordering::SeqCst) {
            self.0.fired.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(4));
        }
        RealFs.rename(from, to)
    }
}

fn spec(id: &str) -> InitSpec {
    InitSpec {
        id: id.into(),
        task: "t".into(),
        units: vec!["a".into(), "b".into()],
        ..InitSpec::default()
    }
}

fn runs(root: &Path, fs: &Shared) -> Runs {
    Runs::new(root).with_vfs(Arc::new(HookedFs(fs.clone())))
}

/// The probe: `init`'s fdatasync fails (exit 1), then `init || init`.
#[test]
fn init_whose_fsync_failed_can_be_retried() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = Shared::default();
    // 1: the new segment's header; 2: the init record's fdatasync.
    fs.0.fail_seg_sync_data.store(2, Ordering::SeqCst);
    let r = runs(tmp.path(), &fs);
    let e = r.init(spec("g")).expect_err("the fsync failed");
    assert_eq!(fs.0.fired.load(Ordering::SeqCst), 1);
    assert_eq!(e.exit_code(), 1, "{e}");
    // Nothing blocks the retry, which creates the run.
    let run = r.init(spec("g")).expect("init again after a failed init");
    assert_eq!(run.last_seq(), 1);
    drop(run);
    let doc = r.read("g").unwrap();
    assert_eq!(doc.units.len(), 2);
    // A live run is still refused.
    let e = r.init(spec("g")).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
}

/// The concurrent init, at the gate where it lost: the directory appears
/// between the check and the `mkdir`.
#[test]
fn init_racing_another_creator_is_refused_not_an_io_error() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = Shared::default();
    let r = runs(tmp.path(), &fs);
    // The other creator makes the directory and initializes the run first.
    let other = Runs::new(tmp.path());
    *fs.0.race_mkdir_of.lock().unwrap() = Some("g".into());
    // Our check sees no run; the other's directory appears at our mkdir; the
    // lock then shows us an empty store, which we initialize.
    let run = r
        .init(spec("g"))
        .expect("an empty directory made meanwhile is ours to fill");
    assert_eq!(fs.0.fired.load(Ordering::SeqCst), 1);
    drop(run);
    // And once the other has initialized it, we are refused, exit 2.
    let e = other.init(spec("g")).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    assert!(
        runlog::engine::ErrorChain(&e)
            .to_string()
            .contains("already"),
        "{}",
        runlog::engine::ErrorChain(&e)
    );
}

#[test]
fn eintr_on_mkdir_and_rename_is_retried() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = Shared::default();
    let r = runs(&tmp.path().join("new-root"), &fs);
    fs.0.eintr_mkdir.store(true, Ordering::SeqCst);
    let run = r.init(spec("g")).expect("init retries EINTR on mkdir");
    assert_eq!(fs.0.fired.load(Ordering::SeqCst), 1);
    run.apply(Change::Unit {
        unit: "a".into(),
        status: UnitStatus::Done,
        note: None,
        deps: None,
    })
    .unwrap();
    fs.0.eintr_rename.store(true, Ordering::SeqCst);
    let c = run.compact().expect("compact retries EINTR on rename");
    assert_eq!(fs.0.fired.load(Ordering::SeqCst), 2);
    assert_eq!(c.snapshot_seq, 2);
}

/// Two real `runlog init` processes for one id: one creates it, the other is
/// refused (exit 2), never an I/O error (exit 1).
#[test]
fn concurrent_cli_inits_one_wins_the_other_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    for round in 0..12 {
        let id = format!("c{round}");
        let args = ["init", "--id", id.as_str(), "--task", "t", "--units", "a"];
        let kids: Vec<_> = (0..2)
            .map(|_| {
                cli_support::cmd(root)
                    .args(args)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut codes: Vec<_> = kids
            .into_iter()
            .map(|k| {
                let o = k.wait_with_output().unwrap();
                (
                    o.status.code(),
                    String::from_utf8_lossy(&o.stderr).into_owned(),
                )
            })
            .collect();
        codes.sort();
        assert_eq!(codes[0].0, Some(0), "round {round}: {codes:?}");
        assert_eq!(codes[1].0, Some(2), "round {round}: {codes:?}");
    }
}
