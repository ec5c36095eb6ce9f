//! The store's directory: the safety check every open makes, and durable
//! creation (the new name fsynced in its parent).

use super::vfs::{Vfs, retry_interrupted};
use crate::engine::error::{Error, Result};
use std::path::Path;

pub(crate) fn check_dir(vfs: &dyn Vfs, dir: &Path) -> Result<()> {
    let mode = vfs.dir_mode(dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::NotFound {
            path: dir.to_path_buf(),
        },
        std::io::ErrorKind::InvalidInput => Error::Unsafe {
            path: dir.to_path_buf(),
            reason: e.to_string(),
        },
        _ => Error::io("stat store directory", dir, e),
    })?;
    if mode & 0o022 != 0 {
        return Err(Error::Unsafe {
            path: dir.to_path_buf(),
            reason: format!(
                "the directory is writable by other users (mode {mode:o}); chmod go-w it"
            ),
        });
    }
    Ok(())
}

/// Creates directory `dir` (0700) if absent, and makes its name durable: the
/// parent is fsynced after a create. `EINTR` is retried; a directory that
/// exists already (a concurrent creator, or an interrupted call that did
/// create it) is not an error, and its parent is fsynced too, since its
/// creator may not have got that far.
pub fn create_dir_durable(vfs: &dyn Vfs, dir: &Path, op: &'static str) -> Result<()> {
    loop {
        match vfs.create_dir(dir) {
            Ok(()) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => break,
            Err(e) => return Err(Error::io(op, dir, e)),
        }
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        retry_interrupted(|| vfs.sync_dir(parent))
            .map_err(|e| Error::io("fsync parent directory", parent, e))?;
    }
    Ok(())
}

/// [`create_dir_durable`] of `dir` and every missing ancestor, outermost
/// first, each name made durable in its parent.
pub fn create_dir_all_durable(vfs: &dyn Vfs, dir: &Path, op: &'static str) -> Result<()> {
    let mut missing = Vec::new();
    let mut d = Some(dir);
    while let Some(p) = d.filter(|p| !p.as_os_str().is_empty()) {
        match vfs.dir_mode(p) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing.push(p),
            Err(e) => return Err(Error::io(op, p, e)),
        }
        d = p.parent();
    }
    for p in missing.into_iter().rev() {
        create_dir_durable(vfs, p, op)?;
    }
    Ok(())
}

/// Removes `dir` and everything under it, depth first, through `vfs` (never
/// through a symlink: an entry that is not a directory is unlinked as a
/// file). Not durable by itself: a crash part-way leaves some of it, so a
/// caller first renames `dir` to a name nothing reads (as `gc` does) and may
/// sync its parent after.
pub fn remove_dir_all(vfs: &dyn Vfs, dir: &Path, op: &'static str) -> Result<()> {
    let names = vfs.list(dir).map_err(|e| Error::io(op, dir, e))?;
    for name in names {
        let p = dir.join(&name);
        match vfs.dir_mode(&p) {
            Ok(_) => remove_dir_all(vfs, &p, op)?,
            Err(_) => vfs.remove(&p).map_err(|e| Error::io(op, &p, e))?,
        }
    }
    vfs.remove_dir(dir).map_err(|e| Error::io(op, dir, e))
}
