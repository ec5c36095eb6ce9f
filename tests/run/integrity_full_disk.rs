//! Proves that a nearly full disk does not stop a writer (issue 11, item 2;
//! issue 19, item 4): through the Vfs seam (a disk with a byte budget, writes
//! past it partial then ENOSPC, as a real filesystem does), on a real 4 MiB
//! tmpfs and on a real 16 MiB ext4 on a loop device, with the real binary (as
//! root; skipped with a printed reason otherwise, and failing instead when
//! RUNLOG_REQUIRE_ROOT_FS=1). A binary-codec append with less
//! free space than one preallocation step succeeds: the failed zero-fill is
//! given back and appends go on plain. A writer open that meets a torn tail on
//! a full disk leaves no empty `.broken-…` file behind, however often retried.
//!
//! Issue 48, item 5: a long-lived writer whose automatic compaction is due on
//! a nearly full disk keeps appending (the compaction is deferred, counted
//! and reported, FORMAT.md §5.4, and runs once there is room), and a disk
//! that fills and frees again and again leaves no quarantine file and none of
//! the failed records (a failed write is cut back, §5.2 step 3): through the
//! seam, and with `runlog apply` on a real 8 MiB tmpfs and 16 MiB ext4.
use crate::cli_support;
use crate::common::hooked::{HookedFs, Hooks};
use crate::common::{run_spec, unit_done};
use runlog::engine::vfs::{Vfs, VfsFile};
use runlog::engine::{Codec, RealFs};
use runlog::run::*;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

/// RealFs whose disk has `free` bytes left (unlimited while negative).
#[derive(Debug, Clone)]
struct SmallDisk {
    free: Arc<AtomicI64>,
    /// Serializes the budget check with the write it admits.
    gate: Arc<Mutex<()>>,
}

fn enospc() -> io::Error {
    io::Error::from_raw_os_error(28)
}

impl Hooks for SmallDisk {
    fn write_at(&self, path: &Path, f: &dyn VfsFile, buf: &[u8], offset: u64) -> io::Result<usize> {
        let _g = self.gate.lock().unwrap();
        let len = std::fs::metadata(path)?.len();
        let grow = (offset + buf.len() as u64).saturating_sub(len) as i64;
        let free = self.free.load(Ordering::SeqCst);
        if free < 0 || grow == 0 {
            return f.write_at(buf, offset);
        }
        if free == 0 {
            return Err(enospc());
        }
        // What fits is written, as a real filesystem does; the rest fails next call.
        let fits = if grow <= free {
            buf.len()
        } else {
            buf.len() - (grow - free) as usize
        };
        let n = f.write_at(&buf[..fits], offset)?;
        let grown = (offset + n as u64).saturating_sub(len) as i64;
        self.free.fetch_sub(grown, Ordering::SeqCst);
        Ok(n)
    }
    fn set_len(&self, path: &Path, f: &dyn VfsFile, new: u64) -> io::Result<()> {
        let _g = self.gate.lock().unwrap();
        let len = std::fs::metadata(path)?.len();
        f.set_len(new)?;
        if self.free.load(Ordering::SeqCst) >= 0 {
            self.free
                .fetch_add(len as i64 - new as i64, Ordering::SeqCst);
        }
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        RealFs.remove(path)?;
        if self.free.load(Ordering::SeqCst) >= 0 {
            self.free.fetch_add(len as i64, Ordering::SeqCst);
        }
        Ok(())
    }
    /// What is left, as `statvfs` says it (unlimited: cannot tell).
    fn free_space(&self, _dir: &Path) -> Option<u64> {
        u64::try_from(self.free.load(Ordering::SeqCst)).ok()
    }
}

fn files(dir: &Path, part: &str) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(part))
        .collect();
    v.sort();
    v
}

/// Binary-codec runs under `root` on a disk with no limit yet (`free` < 0).
fn small_disk(root: &Path) -> (SmallDisk, Runs) {
    let disk = SmallDisk {
        free: Arc::new(AtomicI64::new(-1)),
        gate: Arc::default(),
    };
    let runs = Runs::new(root)
        .with_codec(Codec::Binary)
        .with_vfs(Arc::new(HookedFs(disk.clone())));
    (disk, runs)
}

#[test]
fn appends_go_on_with_less_free_space_than_one_preallocation_step() {
    let tmp = tempfile::tempdir().unwrap();
    let (disk, runs) = small_disk(tmp.path());
    drop(runs.init(run_spec("g", 20)).unwrap());
    let seg = files(&tmp.path().join("runs/g"), "seg-").remove(0);
    // Cut the preallocated zeros (as a reopen does) and leave 40 KiB free:
    // less than one 1 MiB step.
    let records_end = {
        let run = runs.open("g").unwrap();
        run.store().sync().unwrap();
        drop(run);
        std::fs::metadata(&seg).unwrap().len()
    };
    disk.free.store(40 << 10, Ordering::SeqCst);
    for i in 0..20 {
        runs.change("g", unit_done(&format!("u{i}")))
            .unwrap_or_else(|e| panic!("append {i} with 40 KiB free: {e}"));
    }
    // The failed fills were given back: the space left is what the records took.
    let len = std::fs::metadata(&seg).unwrap().len();
    assert!(len - records_end < 40 << 10, "{len} {records_end}");
    assert!(
        disk.free.load(Ordering::SeqCst) > 0,
        "the fill ate the disk"
    );
    let doc = runs.read("g").unwrap();
    assert!(doc.units.values().all(|u| u.status == UnitStatus::Done));
}

#[test]
fn a_full_disk_leaves_no_pile_of_empty_quarantine_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (disk, runs) = small_disk(tmp.path());
    drop(runs.init(run_spec("g", 20)).unwrap());
    runs.change("g", unit_done("u0")).unwrap();
    let dir = tmp.path().join("runs/g");
    let seg = files(&dir, "seg-").remove(0);
    // A torn tail: half a record's worth of junk after the last record.
    let run = runs.open("g").unwrap();
    run.store().sync().unwrap();
    drop(run);
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes.extend_from_slice(&[0x5a; 17]);
    std::fs::write(&seg, &bytes).unwrap();
    disk.free.store(0, Ordering::SeqCst);
    for _ in 0..10 {
        let e = runs
            .change("g", unit_done("u1"))
            .expect_err("no space to quarantine");
        assert!(
            runlog::engine::ErrorChain(&e)
                .to_string()
                .contains("quarantine"),
            "{}",
            runlog::engine::ErrorChain(&e)
        );
    }
    assert_eq!(files(&dir, ".broken-"), Vec::<PathBuf>::new());
    // With space again the same open quarantines once and goes on.
    disk.free.store(-1, Ordering::SeqCst);
    runs.change("g", unit_done("u1")).unwrap();
    assert_eq!(files(&dir, ".broken-").len(), 1);
}

/// A change that marks unit `u<i % keys>` done with a note of `note` bytes:
/// a run whose state stays `keys` units however long its log grows.
fn noted(i: usize, keys: usize, note: usize) -> Change {
    Change::Unit {
        unit: format!("u{}", i % keys),
        status: UnitStatus::Done,
        note: Some(format!("{i}:{}", "n".repeat(note))),
        deps: None,
    }
}

/// [`SmallDisk`], and the compaction's temp file holding the disk: the first
/// write to a `.tmp-` file that leaves the disk full (or finds it full) says
/// so on `full` and waits for `go` before it returns, so that the test
/// appends while the temp file holds the room, as a long-lived writer's
/// appends did in the report (issue 48, item 5).
#[derive(Debug, Clone)]
struct TempHoldsTheDisk {
    disk: SmallDisk,
    full: Arc<Mutex<Option<std::sync::mpsc::Sender<()>>>>,
    go: Arc<Mutex<std::sync::mpsc::Receiver<()>>>,
}

impl Hooks for TempHoldsTheDisk {
    fn write_at(&self, path: &Path, f: &dyn VfsFile, buf: &[u8], offset: u64) -> io::Result<usize> {
        let r = self.disk.write_at(path, f, buf, offset);
        let temp = path.to_string_lossy().contains(".tmp-");
        if temp && self.disk.free.load(Ordering::SeqCst) == 0 {
            let said = self.full.lock().unwrap().take();
            if let Some(full) = said {
                let _ = full.send(());
                let _ = self.go.lock().unwrap().recv();
            }
        }
        r
    }
    fn set_len(&self, path: &Path, f: &dyn VfsFile, new: u64) -> io::Result<()> {
        self.disk.set_len(path, f, new)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.disk.remove(path)
    }
    fn free_space(&self, dir: &Path) -> Option<u64> {
        self.disk.free_space(dir)
    }
}

#[test]
fn a_long_lived_writer_with_compaction_due_on_a_nearly_full_disk_keeps_appending() {
    let tmp = tempfile::tempdir().unwrap();
    let disk = SmallDisk {
        free: Arc::new(AtomicI64::new(-1)),
        gate: Arc::default(),
    };
    let (full_tx, full_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel();
    let hooks = TempHoldsTheDisk {
        disk: disk.clone(),
        full: Arc::new(Mutex::new(Some(full_tx))),
        go: Arc::new(Mutex::new(go_rx)),
    };
    let vfs: Arc<dyn Vfs> = Arc::new(HookedFs(hooks));
    // The runs' own compaction policy, unless one is given.
    let runs = |policy: Option<runlog::engine::CompactionPolicy>| {
        let r = Runs::new(tmp.path())
            .with_codec(Codec::Binary)
            .with_vfs(vfs.clone());
        match policy {
            Some(p) => r.with_compaction(p),
            None => r,
        }
    };
    // 400 units of ~1 KiB each, all in the log: the first compaction
    // writes a table of about 400 KiB.
    let manual = runs(Some(runlog::engine::CompactionPolicy::Manual));
    drop(manual.init(run_spec("g", 0)).unwrap());
    let run = manual.open("g").unwrap();
    for i in 0..400 {
        run.apply(noted(i, 400, 1000)).unwrap();
    }
    drop(run);
    let dir = tmp.path().join("runs/g");
    let snapshots = files(&dir, "snap-");
    // A long-lived writer under the runs' own policy, on a disk with 300
    // KiB left: enough for the log for a long while, not for the table.
    let run = runs(None).open("g").unwrap();
    disk.free.store(300 << 10, Ordering::SeqCst);
    let mut acked = 0;
    let mut window = false;
    for i in 0..200 {
        if full_rx.try_recv().is_ok() {
            // The temp file holds the disk: this append is the one that
            // failed in the report.
            window = true;
        }
        let r = run.apply(noted(1000 + i, 400, 100));
        if window {
            let _ = go_tx.send(());
        }
        r.unwrap_or_else(|e| {
            panic!(
                "append {i} (temp holding the disk: {window}): {}",
                runlog::engine::ErrorChain(&e)
            )
        });
        acked += 1;
    }
    let _ = go_tx.send(());
    assert!(
        !window,
        "a compaction wrote its temp file on a nearly full disk"
    );
    // Deferred, counted, and said.
    assert!(run.stats().compactions_deferred.load(Ordering::Relaxed) >= 1);
    let why = run.compaction_deferred().expect("the deferral is reported");
    assert!(
        why.contains("defer an automatic compaction of")
            && why.contains(&dir.display().to_string()),
        "{why}"
    );
    assert_eq!(run.last_compaction_error().as_deref(), Some(why.as_str()));
    assert_eq!(files(&dir, "snap-"), snapshots, "no snapshot written");
    assert_eq!(files(&dir, ".tmp-"), Vec::<PathBuf>::new());
    assert!(disk.free.load(Ordering::SeqCst) > 0);
    // Space again: the same writer compacts at its next append, and the
    // deferral is over.
    disk.free.store(-1, Ordering::SeqCst);
    run.apply(noted(5000, 400, 100)).unwrap();
    acked += 1;
    drop(run);
    assert!(
        files(&dir, "snap-").len() > snapshots.len(),
        "compacted once there was room"
    );
    let v = runs(None).verify("g").unwrap();
    assert!(v.integrity.is_clean(), "{:?}", v.integrity);
    assert_eq!(v.recovery.last_seq, 1 + 400 + acked);
}

#[test]
fn fill_free_continue_cycles_leave_no_quarantine_files_and_lose_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (disk, runs) = small_disk(tmp.path());
    drop(runs.init(run_spec("g", 0)).unwrap());
    let dir = tmp.path().join("runs/g");
    let mut acked = 1; // the init record
    let mut i = 0;
    for cycle in 0..6 {
        // Fill: a long-lived writer appends until the disk is full. Its
        // failed write is cut back, so it leaves no torn tail behind.
        let run = runs.open("g").unwrap();
        disk.free.store(8 << 10, Ordering::SeqCst);
        let failed = loop {
            i += 1;
            match run.apply(noted(i, 50, 300)) {
                Ok(_) => acked += 1,
                Err(e) => break e,
            }
            assert!(i < 1_000_000, "the disk never filled");
        };
        let chain = runlog::engine::ErrorChain(&failed).to_string();
        assert!(chain.contains("No space left on device"), "{chain}");
        drop(run);
        assert_eq!(
            files(&dir, ".broken-"),
            Vec::<PathBuf>::new(),
            "cycle {cycle}: a quarantine file"
        );
        assert_eq!(files(&dir, ".tmp-"), Vec::<PathBuf>::new());
        // Free, and continue: the next writer finds every acknowledged
        // change and nothing to quarantine.
        disk.free.store(-1, Ordering::SeqCst);
        let run = runs.open("g").unwrap();
        assert_eq!(run.recovery().torn_tail, None, "cycle {cycle}");
        assert_eq!(run.last_seq(), acked, "cycle {cycle}");
        for _ in 0..20 {
            i += 1;
            run.apply(noted(i, 50, 300)).unwrap();
            acked += 1;
        }
        drop(run);
    }
    assert_eq!(files(&dir, ".broken-"), Vec::<PathBuf>::new());
    let v = runs.verify("g").unwrap();
    assert!(v.integrity.is_clean(), "{:?}", v.integrity);
    assert_eq!(v.recovery.last_seq, acked);
}

// ---- a real small filesystem --------------------------------------------

/// A mounted filesystem, unmounted on drop.
struct Tmpfs(PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

fn is_root() -> bool {
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        });
    uid.as_deref() == Some("0")
}

/// Mounts a tmpfs of `mib` MiB, or says why not (not root, no mount).
fn small_tmpfs(at: &Path, mib: u64) -> Result<Tmpfs, String> {
    if !is_root() {
        return Err("not root: cannot mount a tmpfs".into());
    }
    std::fs::create_dir_all(at).map_err(|e| e.to_string())?;
    let st = std::process::Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            &format!("size={mib}m,mode=0700"),
            "tmpfs",
        ])
        .arg(at)
        .status()
        .map_err(|e| format!("mount: {e}"))?;
    if !st.success() {
        return Err(format!("mount -t tmpfs failed: {st}"));
    }
    Ok(Tmpfs(at.to_path_buf()))
}

/// Bytes free for an unprivileged writer at `p` (statvfs; no `df` process
/// per call: the fill loops ask thousands of times, and every fork while
/// another test drops a store can hold its lock for an instant).
fn free_bytes(p: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a writable statvfs.
    let r = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    assert_eq!(
        r,
        0,
        "statvfs {}: {}",
        p.display(),
        std::io::Error::last_os_error()
    );
    st.f_bavail as u64 * st.f_frsize as u64
}

/// Fills the filesystem at `p` until `leave` bytes are free (or fewer).
fn fill(p: &Path, name: &str, leave: u64) {
    use std::io::Write;
    let mut f = std::fs::File::create(p.join(name)).unwrap();
    let chunk = vec![0xa5u8; 4096];
    while free_bytes(p) > leave {
        if f.write_all(&chunk).is_err() {
            break;
        }
        f.flush().unwrap();
    }
}

#[test]
fn real_small_tmpfs_appends_with_little_space_and_no_quarantine_pile_when_full() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    match small_tmpfs(&mnt, 4) {
        Ok(_fs) => nearly_full_disk(&mnt),
        Err(why) => skipped(
            "real_small_tmpfs_appends_with_little_space_and_no_quarantine_pile_when_full",
            &why,
        ),
    }
}

#[test]
fn real_small_ext4_on_a_loop_device_appends_with_little_space_and_no_quarantine_pile_when_full() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    match small_ext4(tmp.path(), &mnt) {
        Ok(_fs) => nearly_full_disk(&mnt),
        Err(why) => skipped(
            "real_small_ext4_on_a_loop_device_appends_with_little_space_and_no_quarantine_pile_when_full",
            &why,
        ),
    }
}

#[test]
fn real_small_tmpfs_a_long_lived_writer_defers_compaction_and_goes_on_after_each_fill_and_free() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    match small_tmpfs(&mnt, 8) {
        Ok(_fs) => fill_free_cycles(&mnt),
        Err(why) => skipped(
            "real_small_tmpfs_a_long_lived_writer_defers_compaction_and_goes_on_after_each_fill_and_free",
            &why,
        ),
    }
}

#[test]
fn real_small_ext4_a_long_lived_writer_defers_compaction_and_goes_on_after_each_fill_and_free() {
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("mnt");
    match small_ext4(tmp.path(), &mnt) {
        Ok(_fs) => fill_free_cycles(&mnt),
        Err(why) => skipped(
            "real_small_ext4_a_long_lived_writer_defers_compaction_and_goes_on_after_each_fill_and_free",
            &why,
        ),
    }
}

/// `runlog apply RUN` fed the changes `noted(from..)` (300 units, notes of
/// 900 bytes) until it stops, or `max` of them: its exit code, the acks it
/// wrote, and its stderr.
fn apply_from(root: &Path, from: usize, max: usize) -> (Option<i32>, usize, String) {
    use std::io::{BufRead, Read, Write};
    let mut child = cli_support::cmd(root)
        .args(["apply", "g"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feed = std::thread::spawn(move || {
        let note = "n".repeat(900);
        for i in from..from + max {
            let line = format!(
                "{{\"op\":\"unit\",\"unit\":\"u{}\",\"status\":\"done\",\"note\":\"{i}:{note}\"}}\n",
                i % 300
            );
            // Broken pipe: apply stopped (a full disk).
            if stdin.write_all(line.as_bytes()).is_err() {
                return;
            }
        }
    });
    let mut err = child.stderr.take().unwrap();
    let errs = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).unwrap();
        s
    });
    let acks = std::io::BufReader::new(child.stdout.take().unwrap())
        .lines()
        .filter(|l| l.as_ref().unwrap().starts_with("{\"seq\""))
        .count();
    let code = child.wait().unwrap().code();
    feed.join().unwrap();
    (code, acks, errs.join().unwrap())
}

/// On a small filesystem mounted at `mnt`, six times: the disk filled but
/// for 1 MiB, a long-lived `runlog apply` appending until the disk is full,
/// then the filler removed and `apply` run again. The automatic compaction
/// that would take the log's room is deferred and said on stderr; an
/// explicit `compact` on the disk filled to the last byte fails cleanly; each
/// `apply` after the free acknowledges all 20 changes; no quarantine file
/// and no temp file is ever left; `verify` is clean with every
/// acknowledged change.
fn fill_free_cycles(mnt: &Path) {
    let root = mnt.join("root");
    cli_support::ok(&root, &["init", "--id", "g", "--task", "t"]);
    let (code, acks, err) = apply_from(&root, 0, 3000);
    assert_eq!((code, acks), (Some(0), 3000), "{err}");
    let dir = root.join("runs/g");
    let mut total = 1 + acks;
    let mut said = 0;
    for cycle in 0..6 {
        fill(mnt, "filler", 1 << 20);
        let (code, filled, err) = apply_from(&root, 100_000 * (cycle + 1), 200_000);
        total += filled;
        said += err
            .matches("runlog: warning COMPACTION_DEFERRED: run g: ")
            .count();
        if code != Some(0) {
            assert!(
                err.contains("No space left on device"),
                "cycle {cycle}: {err}"
            );
        }
        assert_eq!(
            files(&dir, ".broken-"),
            Vec::<PathBuf>::new(),
            "cycle {cycle}"
        );
        assert_eq!(files(&dir, ".tmp-"), Vec::<PathBuf>::new(), "cycle {cycle}");
        std::fs::remove_file(mnt.join("filler")).unwrap();
        // An explicit compaction is not deferred: on the disk filled to the
        // last byte it runs and fails cleanly, naming what it was writing,
        // its temp file removed, nothing lost. (Two changes first: the first
        // makes the compaction deferred meanwhile, now that there is room;
        // the second is a record above the newest snapshot to write.)
        for u in ["u0", "u1"] {
            cli_support::ok(&root, &["unit", "g", u, "done"]);
            total += 1;
        }
        fill(mnt, "filler-2", 0);
        let o = cli_support::runlog(&root, &["compact", "g"]);
        let said_why = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(1), "cycle {cycle}: {said_why}");
        assert!(
            said_why.contains(&format!("{}/", dir.display()))
                && said_why.contains("No space left on device"),
            "cycle {cycle}: {said_why}"
        );
        assert_eq!(files(&dir, ".tmp-"), Vec::<PathBuf>::new(), "cycle {cycle}");
        std::fs::remove_file(mnt.join("filler-2")).unwrap();
        let (after, acks, err) = apply_from(&root, 100_000 * (cycle + 1) + 50_000, 20);
        assert_eq!(
            (after, acks),
            (Some(0), 20),
            "cycle {cycle}, after the free: {err}"
        );
        total += acks;
        let v = cli_support::ok(&root, &["verify", "g"]);
        assert_eq!(
            v.trim(),
            format!("g: clean, {total} records"),
            "cycle {cycle}"
        );
        eprintln!(
            "fill-free cycle {cycle} at {}: {filled} acknowledged until it stopped ({code:?}), {total} records, {said} deferrals said",
            mnt.display()
        );
    }
    assert!(said >= 1, "no deferred compaction was said");
}

/// A real filesystem test that cannot run here: says so where a person sees
/// it, and fails under RUNLOG_REQUIRE_ROOT_FS=1 (CI).
fn skipped(test: &str, why: &str) {
    crate::skip_support::skip(test, "RUNLOG_REQUIRE_ROOT_FS", why);
}

/// Mounts a 16 MiB ext4 (no reserved blocks) from an image on a loop device,
/// or says why not.
fn small_ext4(tmp: &Path, at: &Path) -> Result<Tmpfs, String> {
    if !is_root() {
        return Err("not root: cannot mount a loop device".into());
    }
    let img = tmp.join("ext4.img");
    std::fs::File::create(&img)
        .and_then(|f| f.set_len(16 << 20))
        .map_err(|e| format!("image: {e}"))?;
    let mkfs = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F", "-m", "0"])
        .arg(&img)
        .output()
        .map_err(|e| format!("mkfs.ext4: {e}"))?;
    if !mkfs.status.success() {
        return Err(format!(
            "mkfs.ext4: {}",
            String::from_utf8_lossy(&mkfs.stderr)
        ));
    }
    std::fs::create_dir_all(at).map_err(|e| e.to_string())?;
    let mount = std::process::Command::new("mount")
        .args(["-o", "loop"])
        .arg(&img)
        .arg(at)
        .output()
        .map_err(|e| format!("mount: {e}"))?;
    if !mount.status.success() {
        return Err(format!(
            "mount -o loop: {}",
            String::from_utf8_lossy(&mount.stderr)
        ));
    }
    let m = Tmpfs(at.to_path_buf());
    std::fs::set_permissions(at, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .map_err(|e| e.to_string())?;
    Ok(m)
}

/// On a small filesystem mounted at `mnt`: appends with less free space than
/// one preallocation step, use almost none of it, and a torn tail met on a
/// full disk leaves no empty quarantine files, however often retried.
fn nearly_full_disk(mnt: &Path) {
    let root = mnt.join("root");
    let ok = |args: &[&str]| cli_support::ok(&root, args);
    ok(&[
        "init", "--id", "g", "--task", "t", "--units", "a,b,c,d", "--codec", "binary",
    ]);
    // Less free than one 1 MiB preallocation step.
    fill(mnt, "filler-1", 512 << 10);
    let before = free_bytes(mnt);
    assert!(before < 1 << 20, "{before}");
    for u in ["a", "b", "c"] {
        ok(&["unit", "g", u, "done"]);
    }
    let after = free_bytes(mnt);
    assert!(
        after > 0 && before - after < 64 << 10,
        "free {before} -> {after}"
    );
    assert!(ok(&["verify", "g"]).contains("clean, 4 records"));

    // A torn tail, then a full disk: retried writer opens leave no empty files.
    let dir = root.join("runs/g");
    let seg = files(&dir, "seg-").remove(0);
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
        f.write_all(&[0x5a; 17]).unwrap();
    }
    fill(mnt, "filler-2", 0);
    let full = free_bytes(mnt);
    for _ in 0..10 {
        let o = cli_support::runlog(&root, &["unit", "g", "d", "done"]);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert!(
        free_bytes(mnt) >= full,
        "the failed opens left the disk fuller: {full} -> {}",
        free_bytes(mnt)
    );
    let empty: Vec<_> = files(&dir, ".broken-")
        .into_iter()
        .filter(|p| std::fs::metadata(p).unwrap().len() == 0)
        .collect();
    assert_eq!(empty, Vec::<PathBuf>::new(), "empty quarantine files left");
    assert!(files(&dir, ".broken-").len() <= 1);
    // Space again (the quarantine copies the torn tail, preallocated zeros
    // included): the writer goes on.
    std::fs::remove_file(mnt.join("filler-2")).unwrap();
    std::fs::remove_file(mnt.join("filler-1")).unwrap();
    ok(&["unit", "g", "d", "done"]);
    assert!(ok(&["verify", "g"]).contains("clean, 5 records"));
}
