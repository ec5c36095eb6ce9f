//! Segment files on the writer's side: creation (header, fsync, directory
//! fsync), preallocation of the active segment, and rotation.

use super::active::{Active, ActiveSegment};
use super::{Inner, Shared};
use crate::engine::error::{Error, Result};
use crate::engine::format::*;
use crate::engine::io::vfs::{Vfs, is_out_of_space, retry_interrupted, write_all_at};
use crate::engine::log::frame::encode_segment_header_checked;
use crate::engine::machine::Machine;
use crate::engine::tag::{Key, StoreId};
use std::path::Path;
use std::sync::atomic::Ordering;

/// Creates a segment file holding only its header, durably (file and directory).
pub(crate) fn create_segment(
    vfs: &dyn Vfs,
    dir: &Path,
    codec: Codec,
    first_seq: u64,
    tagging: Option<(&Key, &StoreId)>,
) -> Result<(Active, u64)> {
    let path = dir.join(segment_name(first_seq));
    let file = vfs
        .create_new(&path)
        .map_err(|e| Error::io("create segment", &path, e))?;
    let check = tagging.map(|(key, id)| crate::engine::tag::key_check(key, id));
    let header =
        encode_segment_header_checked(codec, first_seq, tagging.map(|s| s.1), check.as_ref());
    let written = write_all_at(file.as_ref(), &header, 0)
        .map_err(|e| Error::io("write segment header", &path, e))
        .and_then(|()| {
            retry_interrupted(|| file.sync_data())
                .map_err(|e| Error::io("fsync new segment", &path, e))
        });
    if let Err(e) = written {
        // No record was ever in it: a segment whose header never made it (a
        // full disk) is removed, not left for every later open to quarantine.
        drop(file);
        let _ = vfs.remove(&path);
        return Err(e);
    }
    // The new name must be durable before any record in it is acknowledged.
    retry_interrupted(|| vfs.sync_dir(dir))
        .map_err(|e| Error::io("fsync store directory", dir, e))?;
    Ok((
        Active {
            file,
            path,
            first_seq,
        },
        header.len() as u64,
    ))
}

impl<M: Machine> Shared<M> {
    /// Makes sure the active segment's file reaches past `end`: when it does not,
    /// writes zeros from its current end up to the next multiple of the
    /// preallocation step (never past `segment_bytes`). Not fsynced here: the next
    /// fdatasync carries the zeros and the new size, once per step.
    pub(crate) fn preallocate(&self, g: &mut Inner<M>, end: u64) -> Result<()> {
        let step = self.opts.preallocate;
        if step == 0 || self.codec != Codec::Binary || end <= g.active.alloc() {
            return Ok(());
        }
        let target = end
            .div_ceil(step)
            .saturating_mul(step)
            .min(self.opts.segment_bytes.max(end));
        let from = g.active.alloc().max(end);
        if target <= from {
            return Ok(());
        }
        // After one failed fill, appends stay plain for this writer: a nearly
        // full disk would fail every fill again, and each costs a write.
        if self.stats.preallocation_fallbacks.load(Ordering::Relaxed) > 0 {
            return Ok(());
        }
        static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
        let a = g.active.file().clone();
        let mut at = from;
        while at < target {
            let n = (target - at).min(ZEROS.len() as u64) as usize;
            if let Err(e) = write_all_at(a.file.as_ref(), &ZEROS[..n], at) {
                if !is_out_of_space(&e) {
                    return Err(Error::io("preallocate segment", &a.path, e));
                }
                // A little space left must not become no space and no progress:
                // give back what the fill took (the file ended at `active_alloc`
                // before it; nothing past that was ever a record) and append plain.
                retry_interrupted(|| a.file.set_len(g.active.alloc()))
                    .map_err(|e2| Error::io("give back a failed preallocation", &a.path, e2))?;
                self.stats
                    .preallocation_fallbacks
                    .fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            at += n as u64;
        }
        g.active.set_alloc(target);
        Ok(())
    }

    /// Closes the active segment (fsynced) and starts a new one at `first_seq`.
    pub(crate) fn rotate(&self, g: &mut Inner<M>, first_seq: u64) -> Result<()> {
        let old = g.active.file().clone();
        // Wait out a leader's write and fsync, then write what is still staged.
        let _io = self.io.lock(g);
        g.active
            .write_staged()
            .map_err(|e| Error::io("append to segment", &old.path, e))?;
        // Cut the preallocated zeros off, so that only the last segment ever ends
        // in zeros (recovery treats zeros anywhere else as damage). Even when the
        // cache shows none: a rotation of this segment whose fsync failed may have
        // cut them in the cache only, and this cut, fsynced below, makes the
        // size on disk match (an open no longer cuts the last segment, §5.5).
        let end = g.active.end();
        retry_interrupted(|| old.file.set_len(end))
            .map_err(|e| Error::io("trim preallocated segment", &old.path, e))?;
        g.active.set_alloc(end);
        // Every record in the old segment becomes durable before the new one exists:
        // recovery relies on only the last segment ever having a torn tail. fsync,
        // not fdatasync: the trimmed length must be durable too.
        // Under the sync lock, which writes the mark (FORMAT.md §5.8); this
        // writer holds the writer lock, so no appender to wait for.
        let own = crate::engine::log::mark::Mark {
            seq: first_seq - 1,
            segment: old.first_seq,
            end,
        };
        self.group
            .fsync(old.path.display(), || {
                self.writers
                    .fsync(self.vfs.as_ref(), &self.mark, own, false, false, || {
                        retry_interrupted(|| old.file.sync_all())
                    })
                    .map(|_| ())
            })
            .map_err(|e| Error::io("fsync segment before rotation", &old.path, e))?;
        self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        let id = self.tagging.as_ref().map(|s| (&s.0, &s.1));
        let (active, len) =
            create_segment(self.vfs.as_ref(), &self.dir, self.codec, first_seq, id)?;
        g.start_segment(ActiveSegment::new(active, len));
        self.group.advance(first_seq - 1);
        // The new segment is durable, header and name: a one-shot writer that
        // opens it next needs no fsync to prove it (FORMAT.md §5.7).
        self.mark_durable(first_seq - 1, first_seq, len);
        Ok(())
    }
}
