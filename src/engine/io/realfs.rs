//! The real filesystem behind [`Vfs`]: O_NOFOLLOW everywhere, 0600 files and
//! 0700 directories whatever the umask, whole-file reads through a memory map.

use super::vfs::{FileBytes, FileData, LockAttempt, SharedFile, Vfs, VfsFile, read_full_with};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// The real filesystem.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

#[derive(Debug)]
struct RealFile(File);

impl VfsFile for RealFile {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.0.write_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.0.sync_all()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
}

#[derive(Debug)]
struct RealShared(File);

impl SharedFile for RealShared {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.0.write_at(buf, offset)
    }
    fn lock(&self) -> io::Result<()> {
        self.0.lock()
    }
    fn try_lock(&self) -> io::Result<bool> {
        match self.0.try_lock() {
            Ok(()) => Ok(true),
            Err(fs::TryLockError::WouldBlock) => Ok(false),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }
    fn unlock(&self) -> io::Result<()> {
        self.0.unlock()
    }
}

fn nofollow() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    o
}

fn regular(f: File, path: &Path) -> io::Result<File> {
    regular_meta(f, path).map(|(f, _)| f)
}

/// [`regular`], with the file's length from the same stat.
fn regular_len(f: File, path: &Path) -> io::Result<(File, u64)> {
    regular_meta(f, path).map(|(f, m)| (f, m.len()))
}

/// [`regular`], with the stat it took: one `statx` per open, reused by the
/// caller (a length, a mode, an inode) rather than asked for again.
fn regular_meta(f: File, path: &Path) -> io::Result<(File, fs::Metadata)> {
    let m = f.metadata()?;
    if m.is_file() {
        Ok((f, m))
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ))
    }
}

/// Files up to this size are read into memory by `read_mapped`, not mapped.
const READ_NOT_MAP: usize = 64 << 10;

/// A read-only memory map of a file.
struct Mapped(memmap2::Mmap);

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl FileData for Mapped {
    fn release(&self, range: std::ops::Range<usize>) {
        // Whole pages inside the range only.
        // SAFETY: sysconf has no preconditions.
        #[allow(unsafe_code)]
        let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            p if p > 0 => p as usize,
            _ => return,
        };
        let start = range.start.next_multiple_of(page);
        let end = range.end.min(self.0.len()) / page * page;
        if end <= start {
            return;
        }
        // SAFETY: the map is shared, read-only and of a file that is never
        // written while mapped (see `read_mapped`): MADV_DONTNEED only drops
        // the pages from this process, and any later read, through a borrow
        // taken before or after, faults the same bytes in again from the
        // page cache or the file. Nothing is zeroed, as it would be in a
        // private or anonymous map. A failure leaves the pages where they are.
        #[allow(unsafe_code)]
        let _ = unsafe {
            self.0
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
        };
    }
}

impl Vfs for RealFs {
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        fs::DirBuilder::new().mode(0o700).create(path)?;
        fs::set_permissions(path, fs::Permissions::from_mode(0o700))
    }

    fn dir_mode(&self, path: &Path) -> io::Result<u32> {
        let m = fs::symlink_metadata(path)?;
        if m.file_type().is_symlink() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} is a symlink; runlog does not follow symlinks",
                    path.display()
                ),
            ));
        }
        if !m.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a directory", path.display()),
            ));
        }
        Ok(m.permissions().mode() & 0o7777)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for e in fs::read_dir(dir)? {
            if let Ok(name) = e?.file_name().into_string() {
                out.push(name);
            }
        }
        Ok(out)
    }

    fn list_dirs(&self, dir: &Path) -> io::Result<Vec<String>> {
        // The entry's type from the listing itself (no stat per entry), never
        // following a symlink.
        let mut out = Vec::new();
        for e in fs::read_dir(dir)? {
            let e = e?;
            if e.file_type().is_ok_and(|t| t.is_dir())
                && let Ok(name) = e.file_name().into_string()
            {
                out.push(name);
            }
        }
        Ok(out)
    }

    fn create_new(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        let f = nofollow()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        // The umask may have removed owner bits; 0600 exactly, whatever it is.
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
        Ok(Box::new(RealFile(f)))
    }

    fn open_write(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        let f = regular(nofollow().write(true).open(path)?, path)?;
        Ok(Box::new(RealFile(f)))
    }

    fn read(&self, path: &Path) -> io::Result<FileBytes> {
        let (f, len) = regular_len(nofollow().read(true).open(path)?, path)?;
        Ok(Box::new(read_sized(f, len)?))
    }

    fn read_head(&self, path: &Path, len: usize) -> io::Result<Vec<u8>> {
        let (f, size) = regular_len(nofollow().read(true).open(path)?, path)?;
        read_sized(f.take(len as u64), size.min(len as u64))
    }

    fn read_from(&self, path: &Path, offset: u64, max: usize) -> io::Result<Vec<u8>> {
        let (f, len) = regular_len(nofollow().read(true).open(path)?, path)?;
        read_tail(&f, len, offset, max)
    }

    fn open_write_read_from(
        &self,
        path: &Path,
        offset: u64,
        max: usize,
    ) -> io::Result<(Box<dyn VfsFile>, Vec<u8>)> {
        let (f, len) = regular_len(nofollow().read(true).write(true).open(path)?, path)?;
        let bytes = read_tail(&f, len, offset, max)?;
        Ok((Box::new(RealFile(f)), bytes))
    }

    fn open_shared(&self, path: &Path, create: bool) -> Option<io::Result<Box<dyn SharedFile>>> {
        let open = || {
            let f = nofollow()
                .read(true)
                .write(true)
                .create(create)
                .truncate(false)
                .mode(0o600)
                .open(path)?;
            let (f, meta) = regular_meta(f, path)?;
            if meta.permissions().mode() & 0o7777 != 0o600 {
                f.set_permissions(fs::Permissions::from_mode(0o600))?;
            }
            Ok(Box::new(RealShared(f)) as Box<dyn SharedFile>)
        };
        Some(open())
    }

    fn read_mapped(&self, path: &Path) -> io::Result<FileBytes> {
        let (f, len) = regular_len(nofollow().read(true).open(path)?, path)?;
        if len == 0 {
            return Ok(Box::new(Vec::new()));
        }
        let len = usize::try_from(len).map_err(io::Error::other)?;
        if len <= READ_NOT_MAP {
            // A small file costs less to read than to map, its page faults
            // and its unmap (about 10 us a file here, scripts/syscall-time.sh);
            // a one-shot call opens a delta table or two of a few KiB. The
            // file is complete before it is renamed into place and never
            // written again, so it is read up to its length and no further,
            // into capacity not zeroed first (`read_to_end` fills it in place).
            let mut v = Vec::with_capacity(len);
            f.take(len as u64).read_to_end(&mut v)?;
            return Ok(Box::new(v));
        }
        // SAFETY: a map is undefined behaviour only if the file shrinks under it.
        // The engine maps a segment only while holding the writer lock, and
        // nothing in runlog truncates a file without that lock; bytes past the
        // end of a live segment are only ever appended, which a map of the older
        // length ignores. Snapshots are mapped by lock-free readers too: a
        // snapshot is complete before it is renamed into place and is never
        // written again, only unlinked (which leaves a map intact).
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::MmapOptions::new().len(len).map(&f) }?;
        Ok(Box::new(Mapped(map)))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    /// `statvfs(2)` of `dir`: the blocks free for an unprivileged writer
    /// (`f_bavail`, not `f_bfree`: root's reserve is not the log's) times the
    /// fragment size. `None` when the call fails.
    fn free_space(&self, dir: &Path) -> Option<u64> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
        // SAFETY: all-zero bytes are a valid `statvfs` (plain integers).
        #[allow(unsafe_code)]
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `c` is a NUL-terminated path, `st` a writable statvfs.
        #[allow(unsafe_code)]
        let r = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
        if r != 0 {
            return None;
        }
        #[allow(
            clippy::unnecessary_cast,
            reason = "the field types differ between targets"
        )]
        Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
    }

    /// Tries the lock on a read-only descriptor of its own: the kernel lets
    /// go of a lock it got the moment the file closes, a system call later.
    fn lock_busy(&self, path: &Path) -> bool {
        let Ok(f) = nofollow().read(true).open(path) else {
            return false;
        };
        matches!(f.try_lock(), Err(fs::TryLockError::WouldBlock))
    }

    fn try_lock(&self, path: &Path, holder: &str) -> io::Result<LockAttempt> {
        for _ in 0..LOCK_MOVED_RETRIES {
            let (f, meta) = open_lock(path)?;
            match f.try_lock() {
                // Locked, but the directory was renamed between our open and
                // the lock (start, init and gc rename a run while holding it):
                // that lock guards the renamed directory. Open the path again.
                Ok(()) if !still_at(&meta, path)? => continue,
                Ok(()) => {
                    claim(&f, &meta, holder)?;
                    return Ok(LockAttempt::Acquired(Box::new(f)));
                }
                Err(fs::TryLockError::WouldBlock) => {
                    return Ok(LockAttempt::Busy(read_holder(&f)));
                }
                Err(fs::TryLockError::Error(e)) => return Err(e),
            }
        }
        Err(lock_moved(path))
    }

    /// Tries the lock a few times, yielding the processor before each
    /// (`LOCK_SPINS`, 10), then blocks in the kernel (`flock`) on a waiter thread
    /// with its own open file description, so the lock is taken the moment its
    /// holder releases it. On
    /// timeout the waiter is told to give up: if it has the lock by then it is
    /// handed over here anyway, otherwise it drops the lock the moment it gets it
    /// (a thread left blocked until then; no signal handler, no polling).
    fn lock_wait(&self, path: &Path, holder: &str, timeout: Duration) -> io::Result<LockAttempt> {
        let deadline = std::time::Instant::now() + timeout;
        for _ in 0..LOCK_MOVED_RETRIES {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lock_wait_once(path, holder, left)? {
                Waited::Moved => continue,
                Waited::Done(r) => return Ok(r),
            }
        }
        Err(lock_moved(path))
    }
}

/// Times a lock may turn out to guard a directory renamed away before giving up.
const LOCK_MOVED_RETRIES: usize = 100;

fn lock_moved(path: &Path) -> io::Error {
    io::Error::other(format!(
        "the lock file {} was replaced {LOCK_MOVED_RETRIES} times while being locked",
        path.display()
    ))
}

/// Whether the locked file, whose stat is `a`, is still the file at `path`
/// (same device and inode).
fn still_at(a: &fs::Metadata, path: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    match fs::symlink_metadata(path) {
        Ok(b) => Ok(a.dev() == b.dev() && a.ino() == b.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

enum Waited {
    /// The lock was had on a file no longer at the path: try again.
    Moved,
    Done(LockAttempt),
}

impl RealFs {
    fn lock_wait_once(&self, path: &Path, holder: &str, timeout: Duration) -> io::Result<Waited> {
        match self.try_lock(path, holder)? {
            LockAttempt::Acquired(g) => return Ok(Waited::Done(LockAttempt::Acquired(g))),
            // A wait of zero is a try: no waiter thread, which would otherwise
            // be left behind to take (and at once drop) the lock on its release,
            // so that a writer trying just then would find it busy.
            busy @ LockAttempt::Busy(_) if timeout.is_zero() => return Ok(Waited::Done(busy)),
            LockAttempt::Busy(_) => {}
        }
        let (f, meta) = open_lock(path)?;
        // Spin, then park, as an adaptive mutex does: a writer holds the lock
        // for a catch-up and an append, often less than a scheduling slice, so
        // a few tries on this descriptor, each after yielding the processor
        // (to the holder, when it waits for one), often get the lock without
        // the waiter thread below, whose start and end cost more than such a
        // wait (FORMAT.md §1, `LOCK`).
        let started = std::time::Instant::now();
        for _ in 0..LOCK_SPINS {
            std::thread::yield_now();
            match f.try_lock() {
                Ok(()) => return took(f, &meta, path, holder),
                // The wait is over: `Busy` below, without a waiter thread.
                Err(fs::TryLockError::WouldBlock) if started.elapsed() >= timeout => break,
                Err(fs::TryLockError::WouldBlock) => {}
                Err(fs::TryLockError::Error(e)) => return Err(e),
            }
        }
        let timeout = timeout.saturating_sub(started.elapsed());
        if timeout.is_zero() {
            return Ok(Waited::Done(LockAttempt::Busy(read_holder(&f))));
        }
        #[cfg(test)]
        WAITERS_STARTED.with(|c| c.set(c.get() + 1));
        let cancelled = Arc::new(Mutex::new(false));
        let (tx, rx) = mpsc::sync_channel::<io::Result<File>>(1);
        let flag = cancelled.clone();
        std::thread::Builder::new()
            .name("runlog-lock-wait".into())
            .spawn(move || {
                let r = f.lock().map(|()| f);
                // Decided under the flag's mutex: either the caller has not given
                // up and receives the lock, or it has and the lock is dropped here.
                let gave_up = flag.lock().unwrap_or_else(|p| p.into_inner());
                if !*gave_up {
                    let _ = tx.send(r);
                }
            })?;
        let got = match rx.recv_timeout(timeout) {
            Ok(r) => Some(r),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                *cancelled.lock().unwrap_or_else(|p| p.into_inner()) = true;
                // Sent before the flag was set: it is ours, take it.
                rx.try_recv().ok()
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(io::Error::other("lock waiter thread ended"));
            }
        };
        match got {
            Some(r) => took(r?, &meta, path, holder),
            None => Ok(Waited::Done(LockAttempt::Busy(
                open_lock(path).ok().and_then(|(f, _)| read_holder(&f)),
            ))),
        }
    }
}

/// Tries of a busy lock, each after yielding the processor, before a writer
/// waits for it on a thread (`RealFs::lock_wait`).
const LOCK_SPINS: u32 = 10;

#[cfg(test)]
thread_local! {
    /// Waiter threads this thread has started (tests: a thread's own count,
    /// whatever other tests run beside it).
    static WAITERS_STARTED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The lock just had on `f`, opened at `path` with the stat `meta` before the
/// wait: the writer's, unless the file is no longer at `path`.
fn took(f: File, meta: &fs::Metadata, path: &Path, holder: &str) -> io::Result<Waited> {
    // The wait is where a rename lands: the holder renamed the directory, then
    // released the lock of the file we opened.
    if !still_at(meta, path)? {
        return Ok(Waited::Moved);
    }
    // The length may have changed while we waited: stat again.
    let meta = f.metadata()?;
    claim(&f, &meta, holder)?;
    Ok(Waited::Done(LockAttempt::Acquired(Box::new(f))))
}

/// Opens (or creates) a lock file, with its stat.
fn open_lock(path: &Path) -> io::Result<(File, fs::Metadata)> {
    let f = nofollow()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    regular_meta(f, path)
}

/// Records the new holder in the lock file (for error messages only); `meta`
/// is its stat, taken since the lock was had or just before.
fn claim(f: &File, meta: &fs::Metadata, holder: &str) -> io::Result<()> {
    // Created under the umask like any file: 0600 exactly, as the others.
    if meta.permissions().mode() & 0o7777 != 0o600 {
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
    }
    // Written over the old holder, cut only when that was longer: a lock taken
    // around every fsync (`SYNC`) must not cost a truncation each time.
    f.write_all_at(holder.as_bytes(), 0)?;
    if meta.len() > holder.len() as u64 {
        f.set_len(holder.len() as u64)?;
    }
    Ok(())
}

/// The holder recorded in a lock file, when readable.
fn read_holder(f: &File) -> Option<String> {
    let mut s = String::new();
    let _ = f.take(256).read_to_string(&mut s);
    let s = s.trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// `f` (of length `len` when its size was read) from `offset` to its end, at
/// most `max` bytes.
fn read_tail(mut f: &File, len: u64, offset: u64, max: usize) -> io::Result<Vec<u8>> {
    use std::io::{Seek, SeekFrom};
    // Sized from the file's length, so that the read is one call into a
    // buffer allocated once, not a probe and a doubling per step (a
    // preallocated segment's catch-up reads up to its 1 MiB of zeros).
    let len = len.saturating_sub(offset).min(max as u64);
    f.seek(SeekFrom::Start(offset))?;
    // Then whatever the file gained since its length was read (normally
    // one read that returns nothing), up to `max` in all.
    read_sized(f.take(max as u64), len)
}

/// Reads `f` to its end, `len` bytes by its stat: one read into a buffer of
/// that size, then one more that finds the end (or what was appended since),
/// without a `File`'s `read_to_end` probing the size again (a `statx` and an
/// `lseek`). A `Take` bounds it.
fn read_sized(mut f: impl Read, len: u64) -> io::Result<Vec<u8>> {
    let mut v = vec![0u8; usize::try_from(len).map_err(io::Error::other)?];
    let got = read_full_with(|b, _| f.read(b), &mut v, 0)?;
    v.truncate(got);
    let mut more = [0u8; 4096];
    loop {
        match f.read(&mut more) {
            Ok(0) => return Ok(v),
            Ok(n) => v.extend_from_slice(&more[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A file of at most `READ_NOT_MAP` bytes is read into memory, a larger
    /// one mapped (the process's maps name the one and not the other), and
    /// both give the file's bytes.
    #[test]
    fn a_small_file_is_read_and_a_large_one_mapped() {
        let dir = tempfile::tempdir().unwrap();
        let maps = || fs::read_to_string("/proc/self/maps").unwrap();
        for (name, len, mapped) in [
            ("small.snap", 4096, false),
            ("edge.snap", READ_NOT_MAP, false),
            ("large.snap", READ_NOT_MAP + 1, true),
        ] {
            let path = dir.path().join(name);
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            fs::write(&path, &bytes).unwrap();
            let got = RealFs.read_mapped(&path).unwrap();
            assert_eq!((*got).as_ref(), &bytes[..], "{name}");
            let listed = maps().contains(&path.display().to_string());
            assert_eq!(listed, mapped, "{name} of {len} bytes: mapped {listed}");
            drop(got);
            assert!(
                !maps().contains(&path.display().to_string()),
                "{name} unmapped"
            );
        }
    }

    /// A wait that ends while the writer still tries the lock before it parks
    /// (FORMAT.md §1, `LOCK`: spin, then park) is `Busy` and starts no waiter
    /// thread, which would stay blocked to take the lock when its holder lets
    /// go; a wait that outlasts the tries does park on one.
    #[test]
    fn a_wait_that_ends_while_spinning_starts_no_waiter_thread() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let lock = tmp.path().join("LOCK");
        let held = match RealFs.try_lock(&lock, "holder").expect("try") {
            LockAttempt::Acquired(g) => g,
            LockAttempt::Busy(h) => panic!("a fresh lock is held: {h:?}"),
        };
        let busy = |w: io::Result<Waited>| match w.expect("wait") {
            Waited::Done(LockAttempt::Busy(h)) => h,
            Waited::Done(LockAttempt::Acquired(_)) => panic!("a held lock was taken"),
            Waited::Moved => panic!("the lock file did not move"),
        };
        let started = || WAITERS_STARTED.with(Cell::get);
        let before = started();
        let h = busy(RealFs.lock_wait_once(&lock, "waiter", Duration::from_nanos(1)));
        assert_eq!(h.as_deref(), Some("holder"));
        assert_eq!(
            started(),
            before,
            "a waiter thread was started for a wait already over"
        );
        // The count counts: a wait longer than the tries parks on a thread
        // (left blocked until `held` is dropped, then it drops the lock).
        busy(RealFs.lock_wait_once(&lock, "waiter", Duration::from_millis(20)));
        assert_eq!(started(), before + 1);
        drop(held);
    }
}
