//! The one I/O seam under the engine. Every byte the engine reads or writes,
//! every fsync, rename, unlink and lock goes through [`Vfs`]; the real
//! filesystem is the default, and tests substitute a fault-injecting one.

use std::fmt;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

/// An open file, positioned writes only.
pub trait VfsFile: Send + Sync + fmt::Debug {
    /// Writes at `offset`; may write fewer bytes than given (the engine loops).
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;
    /// fdatasync.
    fn sync_data(&self) -> io::Result<()>;
    /// fsync (data and metadata).
    fn sync_all(&self) -> io::Result<()>;
    /// Truncates or extends.
    fn set_len(&self, len: u64) -> io::Result<()>;
}

/// A small file a store's writer processes share (`SYNC`, `SHARED`,
/// `DURABLE`, FORMAT.md §5.8), kept open across fsyncs: positional reads and
/// writes, and an exclusive advisory lock (`flock`) on this open file
/// description, so that taking the sync lock costs no open or path lookup.
pub trait SharedFile: Send + Sync + fmt::Debug {
    /// Reads at `offset`; may read fewer bytes than asked (0 at the end).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Writes at `offset`; may write fewer bytes than given.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;
    /// Blocks until this handle holds the exclusive lock.
    fn lock(&self) -> io::Result<()>;
    /// Takes the exclusive lock if it is free; `false` when it is held.
    fn try_lock(&self) -> io::Result<bool>;
    /// Releases the lock.
    fn unlock(&self) -> io::Result<()>;
}

/// Bytes of a whole file, read for scanning.
pub type FileBytes = Box<dyn FileData>;

/// A whole file's bytes: read into memory, or a memory map.
pub trait FileData: AsRef<[u8]> + Send + Sync {
    /// Says that the bytes in `range` will not be read again soon: a map of a
    /// file that never changes may drop those pages from the process's memory
    /// (a later read faults them in again from the file, the same bytes).
    /// Bytes read into memory stay as they are.
    fn release(&self, _range: std::ops::Range<usize>) {}
}

impl FileData for Vec<u8> {}

/// Outcome of a lock attempt.
pub enum LockAttempt {
    /// The lock is held until the guard is dropped.
    Acquired(Box<dyn Send + Sync>),
    /// Another holder; its recorded identity when readable.
    Busy(Option<String>),
}

/// Filesystem operations the engine uses. Paths are absolute or relative to the
/// process; implementations must never follow a symlink in the final component.
pub trait Vfs: Send + Sync + fmt::Debug {
    /// Creates a directory (mode 0700), failing if it exists.
    fn create_dir(&self, path: &Path) -> io::Result<()>;
    /// The permission bits of an existing directory; an error if `path` is a
    /// symlink, not a directory, or absent (`NotFound`).
    fn dir_mode(&self, path: &Path) -> io::Result<u32>;
    /// Names of the entries in a directory.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Names of the directories in a directory (not symlinks to one): the
    /// runs and archived runs of a runs root.
    fn list_dirs(&self, dir: &Path) -> io::Result<Vec<String>> {
        Ok(self
            .list(dir)?
            .into_iter()
            .filter(|n| self.dir_mode(&dir.join(n)).is_ok())
            .collect())
    }
    /// Creates a new file (mode 0600, exclusive, no symlink), open for writing.
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn VfsFile>>;
    /// Opens an existing regular file for writing (never through a symlink).
    fn open_write(&self, path: &Path) -> io::Result<Box<dyn VfsFile>>;
    /// Reads a whole regular file (never through a symlink).
    fn read(&self, path: &Path) -> io::Result<Box<dyn FileData>>;
    /// Reads a whole file by memory map where available (a small file may be
    /// read instead): a segment only while holding the writer lock (nothing
    /// truncates under it), a snapshot at any time (never written after its
    /// rename).
    fn read_mapped(&self, path: &Path) -> io::Result<Box<dyn FileData>> {
        self.read(path)
    }
    /// Reads at most the first `len` bytes of a regular file (never through a
    /// symlink): a segment's header, without the records after it.
    fn read_head(&self, path: &Path, len: usize) -> io::Result<Vec<u8>> {
        let b = self.read(path)?;
        let b: &[u8] = (*b).as_ref();
        Ok(b[..b.len().min(len)].to_vec())
    }
    /// Reads a regular file from `offset` to its end (never through a
    /// symlink), at most `max` bytes: what other writers appended to a
    /// segment since it was read (FORMAT.md §5.8).
    fn read_from(&self, path: &Path, offset: u64, max: usize) -> io::Result<Vec<u8>> {
        let b = self.read(path)?;
        let b: &[u8] = (*b).as_ref();
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(b.len());
        Ok(b[start..b.len().min(start.saturating_add(max))].to_vec())
    }
    /// [`Vfs::read_from`], and the file opened for writing as
    /// [`Vfs::open_write`]: a one-shot writer's catch-up, which appends to the
    /// segment it read next (FORMAT.md §5.8), through one open where the
    /// filesystem can (the default opens twice).
    fn open_write_read_from(
        &self,
        path: &Path,
        offset: u64,
        max: usize,
    ) -> io::Result<(Box<dyn VfsFile>, Vec<u8>)> {
        let bytes = self.read_from(path, offset, max)?;
        Ok((self.open_write(path)?, bytes))
    }
    /// Atomically renames `from` over `to` (a file over a file; a directory to a
    /// new name, possibly in another directory of the same filesystem).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Unlinks a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Removes an empty directory (never through a symlink).
    fn remove_dir(&self, path: &Path) -> io::Result<()>;
    /// fsyncs a directory, making creates, renames and unlinks in it durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// This boot's id, zeros when unknown: `SHARED`'s slots of another boot
    /// are ignored (FORMAT.md §5.8), since the page caches they describe are
    /// gone. Linux's `/proc/sys/kernel/random/boot_id` by default; a simulated
    /// filesystem starts a new boot at every crash.
    fn boot_id(&self) -> [u8; 16] {
        // One read: the file is 37 bytes, and procfs hands it whole.
        use std::io::Read;
        let mut buf = [0u8; 64];
        std::fs::File::open("/proc/sys/kernel/random/boot_id")
            .and_then(|mut f| f.read(&mut buf))
            .ok()
            .and_then(|n| std::str::from_utf8(&buf[..n]).ok())
            .map_or([0; 16], parse_boot_id)
    }
    /// Opens the regular file at `path` as a [`SharedFile`] (never through a
    /// symlink), creating it (0600) when `create` and absent. `None` when this
    /// filesystem keeps no such handles (the default): the engine then reads,
    /// writes and locks the file by path each time, through the calls above.
    fn open_shared(&self, _path: &Path, _create: bool) -> Option<io::Result<Box<dyn SharedFile>>> {
        None
    }
    /// Whether another holder has the lock at `path` right now: a hint, taken
    /// by a writer that is about to fsync to decide whether to wait for an
    /// appender (FORMAT.md §5.8, step 3.5). `false` when it cannot tell (the
    /// default), which only means the fsync starts at once.
    fn lock_busy(&self, _path: &Path) -> bool {
        false
    }
    /// Bytes this process may still write on the filesystem holding `dir`
    /// (`statvfs`: `f_bavail` × `f_frsize`), or `None` when it cannot tell
    /// (the default). A writer looks before it starts an automatic compaction
    /// and defers one that would leave its log too little room (FORMAT.md
    /// §5.4); `None` starts it without looking.
    fn free_space(&self, _dir: &Path) -> Option<u64> {
        None
    }
    /// Tries to take the exclusive writer lock at `path`, recording `holder` in it.
    fn try_lock(&self, path: &Path, holder: &str) -> io::Result<LockAttempt>;
    /// Takes the lock as [`Vfs::try_lock`] does, waiting up to `timeout` for its
    /// holder to release it; `Busy` when it did not. A `Busy` result leaves the
    /// lock not held by this call, now or later. Real filesystems block in the
    /// kernel and get the lock the moment it is released; this default, for
    /// simulated ones, polls `try_lock` with sleeps up to `LOCK_POLL_MAX` (50 ms).
    fn lock_wait(&self, path: &Path, holder: &str, timeout: Duration) -> io::Result<LockAttempt> {
        let started = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            match self.try_lock(path, holder)? {
                LockAttempt::Busy(h) => {
                    let waited = started.elapsed();
                    if waited >= timeout {
                        return Ok(LockAttempt::Busy(h));
                    }
                    std::thread::sleep(pause.min(timeout - waited));
                    pause = (pause * 2).min(LOCK_POLL_MAX);
                }
                acquired => return Ok(acquired),
            }
        }
    }
}

/// The longest sleep between two attempts of the default [`Vfs::lock_wait`].
pub const LOCK_POLL_MAX: Duration = Duration::from_millis(50);

/// Opens `path` for writing, creating it when missing (also when another
/// process created it between the two attempts): the small files written in
/// place (`DURABLE`, `SHARED`, `TAIL`).
pub fn open_or_create(vfs: &dyn Vfs, path: &Path) -> io::Result<Box<dyn VfsFile>> {
    match vfs.open_write(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => match vfs.create_new(path) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => vfs.open_write(path),
            r => r,
        },
        r => r,
    }
}

/// Writes all of `buf` at `offset`, retrying interrupted and short writes.
pub fn write_all_at(f: &dyn VfsFile, buf: &[u8], offset: u64) -> io::Result<()> {
    write_all_with(|b, at| f.write_at(b, at), buf, offset)
}

/// [`write_all_at`] through any positional `write` (a [`SharedFile`]'s too).
pub fn write_all_with(
    mut write: impl FnMut(&[u8], u64) -> io::Result<usize>,
    mut buf: &[u8],
    mut offset: u64,
) -> io::Result<()> {
    while !buf.is_empty() {
        match write(buf, offset) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "write returned 0 bytes",
                ));
            }
            Ok(n) => {
                buf = &buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads into `buf` from `offset` until it is full or the file ends, through
/// any positional `read` (a [`SharedFile`]'s, a file's), retrying interrupted
/// and short reads: the reading twin of [`write_all_with`]. Returns the bytes
/// read, fewer than `buf.len()` only at the end of the file.
pub fn read_full_with(
    mut read: impl FnMut(&mut [u8], u64) -> io::Result<usize>,
    buf: &mut [u8],
    offset: u64,
) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match read(&mut buf[n..], offset + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// ENOSPC or EDQUOT: the disk (or the quota) is full.
pub(crate) fn is_out_of_space(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::StorageFull || matches!(e.raw_os_error(), Some(28 | 122))
}

/// Runs an fsync-like call, retrying only EINTR (which reports nothing about the data).
pub fn retry_interrupted(mut f: impl FnMut() -> io::Result<()>) -> io::Result<()> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            r => return r,
        }
    }
}

/// Reads a boot id: the 32 hex digits of Linux's
/// `/proc/sys/kernel/random/boot_id`, zeros when unknown.
pub fn parse_boot_id(text: &str) -> [u8; 16] {
    let hex: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    let mut id = [0u8; 16];
    if hex.len() != 32 {
        return id;
    }
    for (i, pair) in hex.chunks(2).enumerate() {
        let digit = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
        id[i] = digit(pair[0]) << 4 | digit(pair[1]);
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_boot_id_is_read_from_its_text_form() {
        let id = parse_boot_id("0123456789ab-cdef-0123-456789abcdef\n");
        assert_eq!(id[0], 0x01);
        assert_eq!(id[15], 0xef);
        assert_eq!(parse_boot_id("short"), [0; 16]);
        assert_eq!(parse_boot_id(""), [0; 16]);
    }

    #[test]
    fn the_real_boot_id_is_read_whole_in_one_read() {
        let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .expect("Linux's boot id (runlog's multi-process protocol reads it)");
        let id = crate::engine::RealFs.boot_id();
        assert_ne!(id, [0; 16]);
        assert_eq!(id, parse_boot_id(&text));
    }
}
