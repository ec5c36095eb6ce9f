//! File operations the engine's writers share: installing a file atomically
//! (temp, fsync, rename, directory fsync) under a random temp name, and
//! quarantining a torn tail into a `.broken-<offset>` side file.

use super::vfs::{Vfs, retry_interrupted, write_all_at};
use crate::engine::error::{Error, Result};
use crate::engine::format::*;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};

/// A random suffix for temp names (std's SipHash keys come from the OS's randomness).
pub(crate) fn random_suffix() -> String {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}

/// Installs `bytes` as `dir/name`: a new temp file in the same directory (created
/// exclusively, never through a symlink), fsync, rename over `name`, fsync the
/// directory. A failure at any step leaves the previous `name` intact.
pub fn write_file_atomic(vfs: &dyn Vfs, dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let target = dir.join(name);
    let temp = dir.join(format!("{name}{TEMP_MARKER}{}", random_suffix()));
    let r = (|| {
        let f = vfs
            .create_new(&temp)
            .map_err(|e| Error::io("create temp file", &temp, e))?;
        write_all_at(f.as_ref(), bytes, 0).map_err(|e| Error::io("write temp file", &temp, e))?;
        retry_interrupted(|| f.sync_all()).map_err(|e| Error::io("fsync temp file", &temp, e))?;
        retry_interrupted(|| vfs.rename(&temp, &target))
            .map_err(|e| Error::io("rename temp file", &target, e))
    })();
    if r.is_err() {
        let _ = vfs.remove(&temp);
        return r;
    }
    // Until the directory is synced the rename may not survive a crash; the caller
    // must not delete anything the new file replaces before this returns Ok.
    retry_interrupted(|| vfs.sync_dir(dir))
        .map_err(|e| Error::io("fsync directory after rename", dir, e))
}

/// Copies the bytes of `segment` from `offset` on into a new side file
/// `<segment>.broken-<offset>` (fsynced), so nothing is destroyed irrecoverably.
/// No bytes there (an empty segment a creation left): no file (`None`).
pub fn quarantine(
    vfs: &dyn Vfs,
    dir: &Path,
    segment: &Path,
    offset: u64,
) -> Result<Option<PathBuf>> {
    let bytes = vfs
        .read(segment)
        .map_err(|e| Error::io("read torn segment", segment, e))?;
    let bytes: &[u8] = (*bytes).as_ref();
    let tail = bytes.get(offset as usize..).unwrap_or(&[]);
    if tail.is_empty() {
        return Ok(None);
    }
    let base = segment
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("segment");
    for n in 0..1000u32 {
        let name = match n {
            0 => format!("{base}{QUARANTINE_MARKER}{offset}"),
            n => format!("{base}{QUARANTINE_MARKER}{offset}.{n}"),
        };
        let path = dir.join(name);
        let f = match vfs.create_new(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // An earlier open that kept these very bytes and then failed
                // (before its truncate): reuse its copy rather than add another.
                let same = vfs
                    .read(&path)
                    .is_ok_and(|b| !tail.is_empty() && (*b).as_ref() == tail);
                if same {
                    let f = vfs
                        .open_write(&path)
                        .map_err(|e| Error::io("open quarantine file", &path, e))?;
                    retry_interrupted(|| f.sync_all())
                        .map_err(|e| Error::io("fsync quarantine file", &path, e))?;
                    retry_interrupted(|| vfs.sync_dir(dir))
                        .map_err(|e| Error::io("fsync store directory", dir, e))?;
                    return Ok(Some(path));
                }
                continue;
            }
            Err(e) => return Err(Error::io("create quarantine file", &path, e)),
        };
        let written = write_all_at(f.as_ref(), tail, 0)
            .map_err(|e| Error::io("write quarantine file", &path, e))
            .and_then(|()| {
                retry_interrupted(|| f.sync_all())
                    .map_err(|e| Error::io("fsync quarantine file", &path, e))
            });
        if let Err(e) = written {
            // A failed copy (a full disk) leaves no file behind: every retry
            // would otherwise add one more empty `.broken-…` file.
            drop(f);
            let _ = vfs.remove(&path);
            return Err(e);
        }
        retry_interrupted(|| vfs.sync_dir(dir))
            .map_err(|e| Error::io("fsync store directory", dir, e))?;
        return Ok(Some(path));
    }
    Err(Error::Mismatch {
        path: segment.to_path_buf(),
        reason: "too many quarantine files for one offset".into(),
    })
}
