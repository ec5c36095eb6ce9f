//! Proves `runlog rebuild` on a damaged run (not a torn tail: bytes in the
//! middle of its log changed) fails (exit 1) without changing a byte and says
//! what to do next: `runlog verify RUN` for where the damage is, then a copy:
//! the run's remote when it ships to one (`runlog restore RUN --remote URL`,
//! after moving the damaged directory out of the runs root), else a backup.
//! The remote advice is followed to the letter and brings the run back.
use crate::cli_support::*;
use std::path::Path;

/// Flips a byte inside the run's first segment, records after it.
fn damage(root: &Path, run: &str) {
    let dir = root.join("runs").join(run);
    let mut segs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("seg-"))
        })
        .collect();
    segs.sort();
    let mut b = std::fs::read(&segs[0]).unwrap();
    assert!(b.len() > 200, "{} bytes", b.len());
    b[100] ^= 0x5a;
    std::fs::write(&segs[0], b).unwrap();
}

fn rebuild_refused_with_next_step(root: &Path, run: &str) -> String {
    let before = tree_bytes_but_locks(root);
    let o = runlog(root, &["rebuild", run]);
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(o.stdout.is_empty());
    assert!(stderr.contains("corruption in"), "{stderr}");
    assert!(
        stderr.contains("rebuild repairs only a torn tail"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("`runlog verify {run}` shows where")),
        "{stderr}"
    );
    assert_eq!(tree_bytes_but_locks(root), before, "rebuild changed bytes");
    // What it points to says where: verify names the damage.
    let v = runlog(root, &["verify", run]);
    assert_eq!(v.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&v.stdout).contains("CORRUPT at"));
    stderr
}

#[test]
fn rebuild_of_a_damaged_run_says_to_verify_then_restore_from_a_backup() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(
        root,
        &["init", "--id", "r1", "--task", "t", "--units", "a,b,c"],
    );
    for u in ["a", "b", "c"] {
        ok(root, &["unit", "r1", u, "done"]);
    }
    damage(root, "r1");
    let stderr = rebuild_refused_with_next_step(root, "r1");
    let dir = root.join("runs/r1");
    assert!(
        stderr.contains(&format!("from a backup of {}", dir.display())),
        "{stderr}"
    );
    assert!(!stderr.contains("runlog restore"), "{stderr}");
}

#[test]
fn rebuild_of_a_damaged_shipped_run_names_its_remote_and_the_restore_works() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    let remote = d.path().join("remote");
    std::fs::create_dir_all(&remote).unwrap();
    let url = format!("file://{}", remote.display());
    ok(
        &root,
        &["init", "--id", "r1", "--task", "t", "--units", "a,b,c"],
    );
    ok(&root, &["remote", "attach", "r1", &url]);
    for u in ["a", "b", "c"] {
        ok(&root, &["unit", "r1", u, "done"]);
    }
    damage(&root, "r1");
    let stderr = rebuild_refused_with_next_step(&root, "r1");
    let dir = root.join("runs/r1");
    let restore = format!("`runlog restore r1 --remote {url}`");
    assert!(stderr.contains(&restore), "{stderr}");
    assert!(
        stderr.contains(&format!("move {} out of the runs root", dir.display())),
        "{stderr}"
    );

    // Followed as said: the run comes back whole.
    std::fs::rename(&dir, d.path().join("r1-damaged")).unwrap();
    ok(&root, &["restore", "r1", "--remote", &url]);
    let v = runlog(&root, &["verify", "r1"]);
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
    let s = ok_json(&root, &["status", "r1"]);
    assert_eq!(s["unitCounts"]["done"], 3, "{s}");
}
