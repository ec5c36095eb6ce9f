//! A [`Vfs`] that is [`RealFs`] except at the calls a test changes: the test
//! implements [`Hooks`] for those (a fault, a byte budget, a gate, a count) and
//! every other call goes to `RealFs` unchanged. Files it opens are wrapped so
//! their calls reach the hooks too, with the file's path.
#![allow(dead_code)]

use runlog::engine::RealFs;
use runlog::engine::vfs::{FileBytes, LockAttempt, Vfs, VfsFile};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The calls of [`HookedFs`]; each default is `RealFs`'s (or the open file's) own.
/// `Clone` because every file the filesystem opens carries a copy: share state
/// between the copies through an `Arc`.
pub trait Hooks: Clone + fmt::Debug + Send + Sync + 'static {
    fn write_at(
        &self,
        _path: &Path,
        f: &dyn VfsFile,
        buf: &[u8],
        offset: u64,
    ) -> io::Result<usize> {
        f.write_at(buf, offset)
    }
    fn sync_data(&self, _path: &Path, f: &dyn VfsFile) -> io::Result<()> {
        f.sync_data()
    }
    fn sync_all(&self, _path: &Path, f: &dyn VfsFile) -> io::Result<()> {
        f.sync_all()
    }
    fn set_len(&self, _path: &Path, f: &dyn VfsFile, len: u64) -> io::Result<()> {
        f.set_len(len)
    }
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        RealFs.create_dir(path)
    }
    fn dir_mode(&self, path: &Path) -> io::Result<u32> {
        RealFs.dir_mode(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        RealFs.list(dir)
    }
    /// The file is wrapped by [`HookedFs`] after this returns it.
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        RealFs.create_new(path)
    }
    /// The file is wrapped by [`HookedFs`] after this returns it.
    fn open_write(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        RealFs.open_write(path)
    }
    fn read(&self, path: &Path) -> io::Result<FileBytes> {
        RealFs.read(path)
    }
    fn read_mapped(&self, path: &Path) -> io::Result<FileBytes> {
        RealFs.read_mapped(path)
    }
    fn read_head(&self, path: &Path, len: usize) -> io::Result<Vec<u8>> {
        RealFs.read_head(path, len)
    }
    fn read_from(&self, path: &Path, offset: u64, max: usize) -> io::Result<Vec<u8>> {
        RealFs.read_from(path, offset, max)
    }
    /// The file is wrapped by [`HookedFs`] after this returns it.
    fn open_write_read_from(
        &self,
        path: &Path,
        offset: u64,
        max: usize,
    ) -> io::Result<(Box<dyn VfsFile>, Vec<u8>)> {
        RealFs.open_write_read_from(path, offset, max)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealFs.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        RealFs.remove(path)
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_dir(path)
    }
    fn list_dirs(&self, dir: &Path) -> io::Result<Vec<String>> {
        RealFs.list_dirs(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        RealFs.sync_dir(dir)
    }
    fn try_lock(&self, path: &Path, holder: &str) -> io::Result<LockAttempt> {
        RealFs.try_lock(path, holder)
    }
    fn lock_wait(&self, path: &Path, holder: &str, timeout: Duration) -> io::Result<LockAttempt> {
        RealFs.lock_wait(path, holder, timeout)
    }
    /// Not `RealFs`'s: `false` ("cannot tell", `Vfs::lock_busy`'s default),
    /// as for every `HookedFs` before this hook existed, so that a test that
    /// does not ask for it sees no look at the lock. A test that does calls
    /// `RealFs.lock_busy(path)` from its own.
    fn lock_busy(&self, _path: &Path) -> bool {
        false
    }
    /// Not `RealFs`'s either: `None` ("cannot tell", `Vfs::free_space`'s
    /// default), so a test that does not ask sees no compaction deferred
    /// for the real disk's sake. A test's small disk says what it has left.
    fn free_space(&self, _dir: &Path) -> Option<u64> {
        None
    }
}

/// `RealFs` with the calls of `H` in place of its own.
#[derive(Debug, Clone, Default)]
pub struct HookedFs<H>(pub H);

impl<H: Hooks> HookedFs<H> {
    fn wrap(&self, path: &Path, inner: Box<dyn VfsFile>) -> Box<dyn VfsFile> {
        Box::new(HookedFile {
            hooks: self.0.clone(),
            path: path.to_path_buf(),
            inner,
        })
    }
}

#[derive(Debug)]
struct HookedFile<H> {
    hooks: H,
    path: PathBuf,
    inner: Box<dyn VfsFile>,
}

impl<H: Hooks> VfsFile for HookedFile<H> {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.hooks.write_at(&self.path, &*self.inner, buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.hooks.sync_data(&self.path, &*self.inner)
    }
    fn sync_all(&self) -> io::Result<()> {
        self.hooks.sync_all(&self.path, &*self.inner)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.hooks.set_len(&self.path, &*self.inner, len)
    }
}

impl<H: Hooks> Vfs for HookedFs<H> {
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        self.0.create_dir(path)
    }
    fn dir_mode(&self, path: &Path) -> io::Result<u32> {
        self.0.dir_mode(path)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.0.list(dir)
    }
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        Ok(self.wrap(path, self.0.create_new(path)?))
    }
    fn open_write(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        Ok(self.wrap(path, self.0.open_write(path)?))
    }
    fn read(&self, path: &Path) -> io::Result<FileBytes> {
        self.0.read(path)
    }
    fn read_mapped(&self, path: &Path) -> io::Result<FileBytes> {
        self.0.read_mapped(path)
    }
    fn read_head(&self, path: &Path, len: usize) -> io::Result<Vec<u8>> {
        self.0.read_head(path, len)
    }
    fn read_from(&self, path: &Path, offset: u64, max: usize) -> io::Result<Vec<u8>> {
        self.0.read_from(path, offset, max)
    }
    fn open_write_read_from(
        &self,
        path: &Path,
        offset: u64,
        max: usize,
    ) -> io::Result<(Box<dyn VfsFile>, Vec<u8>)> {
        let (f, bytes) = self.0.open_write_read_from(path, offset, max)?;
        Ok((self.wrap(path, f), bytes))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.0.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.0.remove(path)
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        self.0.remove_dir(path)
    }
    fn list_dirs(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.0.list_dirs(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.0.sync_dir(dir)
    }
    fn try_lock(&self, path: &Path, holder: &str) -> io::Result<LockAttempt> {
        self.0.try_lock(path, holder)
    }
    fn lock_wait(&self, path: &Path, holder: &str, timeout: Duration) -> io::Result<LockAttempt> {
        self.0.lock_wait(path, holder, timeout)
    }
    fn lock_busy(&self, path: &Path) -> bool {
        self.0.lock_busy(path)
    }
    fn free_space(&self, dir: &Path) -> Option<u64> {
        self.0.free_space(dir)
    }
}
