//! Proves that the writer lock follows the directory it protects (issue 11,
//! item 6): a waiter that opened `LOCK` before the run directory was renamed
//! (as `start`, `init` and `gc` do while holding the lock) and got the lock
//! after it does not go on to write the new directory under the renamed one's
//! lock; it checks the locked file is still the one at the path (device and
//! inode) and waits for the real one. Deterministic: the rename happens once
//! the kernel lists the waiter as blocked on that lock (/proc/locks), a gate
//! on the filesystem's own state, not a sleep.
use runlog::engine::{Error, Options, Store};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use crate::common::sum;
use sum::Sum;

fn opts(create: bool, wait: Option<Duration>) -> Options {
    Options {
        create,
        lock_wait: wait,
        ..Options::default()
    }
}

/// Whether the kernel lists a process blocked waiting for a lock on inode `ino`.
fn waiter_blocked_on(ino: u64) -> bool {
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    locks.lines().any(|l| {
        l.contains("->")
            && l.split_whitespace().any(|f| {
                let parts: Vec<_> = f.split(':').collect();
                parts.len() == 3 && parts[2].parse::<u64>() == Ok(ino)
            })
    })
}

#[test]
fn a_waiter_whose_lock_file_was_renamed_away_locks_the_new_directory() {
    if !Path::new("/proc/locks").exists() {
        eprintln!("SKIPPED: no /proc/locks to gate on");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let archive = tmp.path().join("archive");
    std::fs::create_dir_all(&runs).unwrap();
    std::fs::create_dir_all(&archive).unwrap();
    let dir = runs.join("g");
    let holder = Store::<Sum>::open(&dir, opts(true, None)).unwrap();
    holder.append(&1).unwrap();
    let old_ino = std::fs::metadata(dir.join("LOCK")).unwrap().ino();

    let waiter = {
        let dir = dir.clone();
        std::thread::spawn(move || {
            let s = Store::<Sum>::open(&dir, opts(false, Some(Duration::from_secs(600))))?;
            let v = s.read(|v| *v);
            Ok::<_, Error>((s, v))
        })
    };
    // The gate: the waiter is blocked in the kernel on the old LOCK.
    while !waiter_blocked_on(old_ino) {
        assert!(!waiter.is_finished(), "the waiter ended before blocking");
        std::thread::yield_now();
    }
    // The holder archives the run and a fresh one is created at the same path
    // (what `start` does with a changed fingerprint), then both locks go.
    std::fs::rename(&dir, archive.join("g.1")).unwrap();
    let fresh = Store::<Sum>::open(&dir, opts(true, None)).unwrap();
    fresh.append(&100).unwrap();
    drop(holder);
    drop(fresh);
    let (w, seen) = waiter
        .join()
        .unwrap()
        .expect("the waiter opens the new run");
    // It read the run at the path, not the archived one...
    assert_eq!(seen, 100);
    // ...and holds the lock of the directory it writes: nobody else gets it.
    match Store::<Sum>::open(&dir, opts(false, None)) {
        Err(Error::Locked { .. }) => {}
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("a second writer got the lock of the waiter's directory"),
    }
    w.append(&5).unwrap();
    drop(w);
    let s = Store::<Sum>::open(&dir, opts(false, None)).unwrap();
    assert_eq!(s.read(|v| *v), 105);
}
