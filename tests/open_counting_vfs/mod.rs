//! A [`Vfs`] that delegates to [`RealFs`] and counts what the engine asks of it:
//! fsyncs of each kind, bytes written and truncations per file, whole-file reads
//! per file, lock calls (hooks on tests/common/hooked.rs). Shared by the
//! `open_*` tests.
#![allow(dead_code)]

use crate::common::hooked::{HookedFs, Hooks};
use runlog::engine::RealFs;
use runlog::engine::vfs::{FileBytes, LockAttempt, Vfs, VfsFile};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What was asked of the filesystem since the last [`CountingFs::reset`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    pub sync_data: u64,
    pub sync_all: u64,
    pub sync_dir: u64,
    /// (file, bytes) of every `write_at`.
    pub writes: Vec<(PathBuf, usize)>,
    /// (file, offset) of every `write_at`, in the same order.
    pub writes_at: Vec<(PathBuf, u64)>,
    /// (file, new length) of every `set_len`.
    pub set_lens: Vec<(PathBuf, u64)>,
    /// (file, bytes) of every whole-file read, mapped or not.
    pub reads: Vec<(PathBuf, usize)>,
    /// (file, bytes) of every read of a file's first bytes (a segment header).
    pub heads: Vec<(PathBuf, usize)>,
    /// (file, bytes) of every read from an offset to the end (a one-shot
    /// writer's catch-up, FORMAT.md §5.8).
    pub tails: Vec<(PathBuf, usize)>,
    /// (file, bytes) of every read from an offset to the end through a
    /// descriptor then kept for writing (the catch-up before an append).
    pub tails_for_write: Vec<(PathBuf, usize)>,
    /// Every file opened for writing by `open_write`.
    pub write_opens: Vec<PathBuf>,
    pub creates: Vec<PathBuf>,
    pub removes: Vec<PathBuf>,
    pub renames: u64,
    pub try_locks: u64,
    pub lock_waits: u64,
}

impl Counts {
    /// All fsyncs, of files and directories.
    pub fn syncs(&self) -> u64 {
        self.sync_data + self.sync_all + self.sync_dir
    }
    /// Whole-file reads of files whose name starts with `prefix`.
    pub fn reads_of(&self, prefix: &str) -> Vec<String> {
        names(&self.reads, prefix)
    }
    /// Files whose name starts with `prefix` that were written or truncated.
    pub fn changed(&self, prefix: &str) -> Vec<String> {
        let mut v = names(&self.writes, prefix);
        v.extend(
            self.set_lens
                .iter()
                .map(|(p, _)| name(p))
                .filter(|n| n.starts_with(prefix)),
        );
        v
    }
}

fn name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

fn names<T>(v: &[(PathBuf, T)], prefix: &str) -> Vec<String> {
    v.iter()
        .map(|(p, _)| name(p))
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// The counts, shared by every clone: the hooks of [`CountingFs`].
#[derive(Debug, Clone, Default)]
pub struct Counter(Arc<Mutex<Counts>>);

impl Counter {
    fn with(&self, f: impl FnOnce(&mut Counts)) {
        f(&mut self.0.lock().unwrap())
    }
}

/// The counting filesystem; clones share the counts.
pub type CountingFs = HookedFs<Counter>;

impl CountingFs {
    pub fn new() -> CountingFs {
        CountingFs::default()
    }
    /// The counts so far.
    pub fn counts(&self) -> Counts {
        self.0.0.lock().unwrap().clone()
    }
    /// Starts counting from zero.
    pub fn reset(&self) {
        *self.0.0.lock().unwrap() = Counts::default();
    }
}

impl Hooks for Counter {
    fn write_at(&self, path: &Path, f: &dyn VfsFile, buf: &[u8], offset: u64) -> io::Result<usize> {
        let n = f.write_at(buf, offset)?;
        self.with(|c| {
            c.writes.push((path.to_path_buf(), n));
            c.writes_at.push((path.to_path_buf(), offset));
        });
        Ok(n)
    }
    fn sync_data(&self, _: &Path, f: &dyn VfsFile) -> io::Result<()> {
        self.with(|c| c.sync_data += 1);
        f.sync_data()
    }
    fn sync_all(&self, _: &Path, f: &dyn VfsFile) -> io::Result<()> {
        self.with(|c| c.sync_all += 1);
        f.sync_all()
    }
    fn set_len(&self, path: &Path, f: &dyn VfsFile, len: u64) -> io::Result<()> {
        self.with(|c| c.set_lens.push((path.to_path_buf(), len)));
        f.set_len(len)
    }
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        self.with(|c| c.creates.push(path.to_path_buf()));
        RealFs.create_new(path)
    }
    fn read(&self, path: &Path) -> io::Result<FileBytes> {
        let b = RealFs.read(path)?;
        let n = (*b).as_ref().len();
        self.with(|c| c.reads.push((path.to_path_buf(), n)));
        Ok(b)
    }
    fn read_head(&self, path: &Path, len: usize) -> io::Result<Vec<u8>> {
        let b = RealFs.read_head(path, len)?;
        self.with(|c| c.heads.push((path.to_path_buf(), b.len())));
        Ok(b)
    }
    fn read_from(&self, path: &Path, offset: u64, max: usize) -> io::Result<Vec<u8>> {
        let b = RealFs.read_from(path, offset, max)?;
        self.with(|c| c.tails.push((path.to_path_buf(), b.len())));
        Ok(b)
    }
    fn open_write(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        self.with(|c| c.write_opens.push(path.to_path_buf()));
        RealFs.open_write(path)
    }
    fn open_write_read_from(
        &self,
        path: &Path,
        offset: u64,
        max: usize,
    ) -> io::Result<(Box<dyn VfsFile>, Vec<u8>)> {
        let (f, b) = RealFs.open_write_read_from(path, offset, max)?;
        self.with(|c| c.tails_for_write.push((path.to_path_buf(), b.len())));
        Ok((f, b))
    }
    fn read_mapped(&self, path: &Path) -> io::Result<FileBytes> {
        let b = RealFs.read_mapped(path)?;
        let n = (*b).as_ref().len();
        self.with(|c| c.reads.push((path.to_path_buf(), n)));
        Ok(b)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.with(|c| c.renames += 1);
        RealFs.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.with(|c| c.removes.push(path.to_path_buf()));
        RealFs.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.with(|c| c.sync_dir += 1);
        RealFs.sync_dir(dir)
    }
    fn try_lock(&self, path: &Path, holder: &str) -> io::Result<LockAttempt> {
        self.with(|c| c.try_locks += 1);
        RealFs.try_lock(path, holder)
    }
    fn lock_wait(&self, path: &Path, holder: &str, timeout: Duration) -> io::Result<LockAttempt> {
        self.with(|c| c.lock_waits += 1);
        RealFs.lock_wait(path, holder, timeout)
    }
}
