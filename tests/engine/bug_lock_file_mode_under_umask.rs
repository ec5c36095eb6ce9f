//! Regression: the LOCK file was created with mode 0600 filtered by the umask, so
//! a umask such as 0277 left it 0400 (and 0777 left it 0000, which a non-root
//! writer could not reopen), unlike every other store file. It must be 0600.
use runlog::engine::{Codec, CompactionPolicy, Options, Store};
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::common;

#[test]
#[ignore = "child side of lock_file_is_0600_whatever_the_umask"]
fn lock_umask_child() {
    let Ok(dir) = std::env::var("RUNLOG_LOCK_UMASK_DIR") else {
        return;
    };
    // SAFETY: umask(2) only sets this child process's file mode creation mask.
    unsafe { libc::umask(0o277) };
    let o = Options {
        create: true,
        codec: Codec::Binary,
        compaction: CompactionPolicy::Manual,
        ..Options::default()
    };
    Store::<common::Ledger>::open(&dir, o).unwrap();
}

#[test]
fn lock_file_is_0600_whatever_the_umask() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("s");
    // The child's libtest report stays in its pipe (shown only if it fails), so
    // the log holds one "test result" line for this file, not two.
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            common::test_name(module_path!(), "lock_umask_child").as_str(),
            "--test-threads=1",
        ])
        .env("RUNLOG_LOCK_UMASK_DIR", &dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "child: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mode = std::fs::metadata(dir.join("LOCK"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o600);
}
