//! Regression: the LOCK file was created with mode 0600 filtered by the umask, so
//! a umask such as 0277 left it 0400 (and 0777 left it 0000, which a non-root
//! writer could not reopen), unlike every other store file. It must be 0600, as
//! every file of the store (segments, snapshots, quarantined tails), and the
//! directory 0700, whatever the umask (FORMAT.md §2): checked in child processes,
//! as the umask is process-wide, for umasks 0, 022, 077, 277 and 777.
use crate::common;
use common::*;
use runlog::engine::Store;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const CHILD_DIR: &str = "RUNLOG_PERM_CHILD_DIR";
const CHILD_UMASK: &str = "RUNLOG_PERM_CHILD_UMASK";

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
#[ignore = "child side of lock_and_every_store_file_are_0600_whatever_the_umask"]
fn umask_child_process() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        crate::common::child_run_bare("umask_child_process", CHILD_DIR);
    };
    let umask: u32 = std::env::var(CHILD_UMASK).unwrap().parse().unwrap();
    // SAFETY: umask(2) only sets the process's file mode creation mask; this child
    // process exists to run with it.
    unsafe { libc::umask(umask as libc::mode_t) };
    let dir = Path::new(&dir);
    for codec in codecs() {
        let d = dir.join(codec.name());
        let s = Store::<Ledger>::open(&d, opts(codec)).unwrap();
        for v in 1..=5 {
            s.append(&entry(v, 3)).unwrap();
        }
        s.compact().unwrap();
        s.append(&entry(6, 3)).unwrap();
        drop(s);
        // A torn tail, so the next open writes a quarantine file.
        let seg = d.join("seg-00000000000000000006.log");
        let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
        std::io::Write::write_all(&mut f, b"\x01torn").unwrap();
        drop(f);
        let s = Store::<Ledger>::open(&d, opts(codec)).unwrap();
        assert!(s.recovery().torn_tail.is_some());
        s.append(&entry(7, 3)).unwrap();
        s.compact().unwrap();
    }
}

#[test]
fn lock_and_every_store_file_are_0600_whatever_the_umask() {
    for umask in [0, 0o022, 0o077, 0o277, 0o777] {
        let t = tempfile::tempdir().unwrap();
        // The child's libtest report stays in its pipe (shown only if it fails),
        // so the log holds one "test result" line for this file, not one a umask.
        let out = child_test(module_path!(), "umask_child_process")
            .env(CHILD_DIR, t.path())
            .env(CHILD_UMASK, umask.to_string())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "umask {umask:o}: child: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for codec in codecs() {
            let d = t.path().join(codec.name());
            assert_eq!(mode(&d), 0o700, "umask {umask:o}: {}", d.display());
            let names: Vec<_> = std::fs::read_dir(&d)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            assert!(names.iter().any(|p| p.ends_with("LOCK")), "{names:?}");
            assert!(
                names
                    .iter()
                    .any(|p| p.to_string_lossy().contains(".broken-"))
            );
            assert!(names.iter().any(|p| p.to_string_lossy().ends_with(".snap")));
            for p in names {
                assert_eq!(mode(&p), 0o600, "umask {umask:o}: {}", p.display());
            }
        }
    }
}
