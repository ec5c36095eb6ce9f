//! A plain in-memory [`Vfs`] for fast end-to-end sweeps: files are shared byte
//! buffers (an open handle keeps writing to its file across renames, like an
//! inode), every write is immediately "durable", and nothing ever fails. It
//! models no crash semantics; the fault-injecting simulator is `engine::sim`.
//! Also compiled into the fuzz targets (`fuzz/`) by path.
#![allow(dead_code)]

use runlog::engine::vfs::{FileBytes, LockAttempt, Vfs, VfsFile};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

type Data = Arc<Mutex<Vec<u8>>>;

#[derive(Debug, Default)]
struct State {
    files: BTreeMap<PathBuf, Data>,
    dirs: BTreeMap<PathBuf, u32>,
    locks: BTreeSet<PathBuf>,
}

/// The in-memory filesystem; clones share the same files.
#[derive(Debug, Default, Clone)]
pub struct MemFs(Arc<Mutex<State>>);

#[derive(Debug)]
struct MemFile(Data);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn not_found(p: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not found", p.display()),
    )
}

impl VfsFile for MemFile {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        let mut d = lock(&self.0);
        let end = offset as usize + buf.len();
        if d.len() < end {
            d.resize(end, 0);
        }
        d[offset as usize..end].copy_from_slice(buf);
        Ok(buf.len())
    }
    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
    fn sync_all(&self) -> io::Result<()> {
        Ok(())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        lock(&self.0).resize(len as usize, 0);
        Ok(())
    }
}

struct LockGuard(MemFs, PathBuf);
impl Drop for LockGuard {
    fn drop(&mut self) {
        lock(&(self.0).0).locks.remove(&self.1);
    }
}

impl MemFs {
    /// An empty filesystem holding only the directory `/mem` (mode 0700).
    pub fn new() -> MemFs {
        let fs = MemFs::default();
        fs.mkdir(Path::new("/mem"), 0o700);
        fs
    }

    /// Creates a directory with `mode` (and its parents, mode 0700).
    pub fn mkdir(&self, dir: &Path, mode: u32) {
        lock(&self.0).dirs.insert(dir.to_path_buf(), mode);
    }

    /// Every file under `dir` with its bytes, sorted by name.
    pub fn files(&self, dir: &Path) -> Vec<(String, Vec<u8>)> {
        let s = lock(&self.0);
        s.files
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir))
            .map(|(p, d)| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (name, lock(d).clone())
            })
            .collect()
    }

    /// Replaces the contents of `dir` with `files` (the directory is created 0700).
    pub fn set_files(&self, dir: &Path, files: &[(String, Vec<u8>)]) {
        let mut s = lock(&self.0);
        s.files.retain(|p, _| p.parent() != Some(dir));
        s.dirs.insert(dir.to_path_buf(), 0o700);
        for (name, bytes) in files {
            s.files
                .insert(dir.join(name), Arc::new(Mutex::new(bytes.clone())));
        }
    }

    /// The bytes of one file.
    pub fn get(&self, path: &Path) -> Option<Vec<u8>> {
        lock(&self.0).files.get(path).map(|d| lock(d).clone())
    }

    /// Writes (creating or replacing) one file.
    pub fn put(&self, path: &Path, bytes: Vec<u8>) {
        lock(&self.0)
            .files
            .insert(path.to_path_buf(), Arc::new(Mutex::new(bytes)));
    }
}

impl Vfs for MemFs {
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        let mut s = lock(&self.0);
        if s.dirs.contains_key(path) || s.files.contains_key(path) {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, "exists"));
        }
        s.dirs.insert(path.to_path_buf(), 0o700);
        Ok(())
    }

    fn dir_mode(&self, path: &Path) -> io::Result<u32> {
        lock(&self.0)
            .dirs
            .get(path)
            .copied()
            .ok_or_else(|| not_found(path))
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let s = lock(&self.0);
        if !s.dirs.contains_key(dir) {
            return Err(not_found(dir));
        }
        Ok(s.files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect())
    }

    fn create_new(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        let mut s = lock(&self.0);
        if s.files.contains_key(path) {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, "exists"));
        }
        if !path.parent().is_some_and(|d| s.dirs.contains_key(d)) {
            return Err(not_found(path));
        }
        let d: Data = Arc::default();
        s.files.insert(path.to_path_buf(), d.clone());
        Ok(Box::new(MemFile(d)))
    }

    fn open_write(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        let s = lock(&self.0);
        let d = s.files.get(path).ok_or_else(|| not_found(path))?;
        Ok(Box::new(MemFile(d.clone())))
    }

    fn read(&self, path: &Path) -> io::Result<FileBytes> {
        let s = lock(&self.0);
        let d = s.files.get(path).ok_or_else(|| not_found(path))?;
        Ok(Box::new(lock(d).clone()))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = lock(&self.0);
        let d = s.files.remove(from).ok_or_else(|| not_found(from))?;
        s.files.insert(to.to_path_buf(), d);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        lock(&self.0)
            .files
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        if lock(&self.0).dirs.contains_key(dir) {
            Ok(())
        } else {
            Err(not_found(dir))
        }
    }

    fn try_lock(&self, path: &Path, holder: &str) -> io::Result<LockAttempt> {
        let mut s = lock(&self.0);
        if !path.parent().is_some_and(|d| s.dirs.contains_key(d)) {
            return Err(not_found(path));
        }
        if s.locks.contains(path) {
            let who = s
                .files
                .get(path)
                .map(|d| lock(d).clone())
                .unwrap_or_default();
            let who = String::from_utf8_lossy(&who).trim().to_string();
            return Ok(LockAttempt::Busy((!who.is_empty()).then_some(who)));
        }
        s.locks.insert(path.to_path_buf());
        s.files.insert(
            path.to_path_buf(),
            Arc::new(Mutex::new(holder.as_bytes().to_vec())),
        );
        Ok(LockAttempt::Acquired(Box::new(LockGuard(
            self.clone(),
            path.to_path_buf(),
        ))))
    }
}
