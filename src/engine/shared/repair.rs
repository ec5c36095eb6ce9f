//! Recovery's changes on disk, deferred to the first write (FORMAT.md §5.5
//! steps 3–5): the torn tail quarantined and cut, a last segment whose records
//! are not all known durable copied to a new file (never rewritten in place),
//! the active segment chosen, leftover temp files removed.

use super::active::{Active, ActiveSegment};
use super::pending::{LastSegment, Pending};
use super::segment::create_segment;
use super::{Inner, Shared};
use crate::engine::error::{Error, Result};
use crate::engine::format::{Codec, segment_name};
use crate::engine::io::files::{quarantine, write_file_atomic};
use crate::engine::io::vfs::{VfsFile, retry_interrupted};
use crate::engine::machine::Machine;
use std::path::PathBuf;

impl<M: Machine> Shared<M> {
    /// Finishes a deferred open before anything is written (nothing to do once
    /// done). Returns where a torn tail's bytes were kept. A failure poisons.
    pub(crate) fn prepare_or_poison(&self, g: &mut Inner<M>) -> Result<Option<PathBuf>> {
        let Some(p) = g.take_pending() else {
            return Ok(None);
        };
        self.prepare(g, *p)
            .inspect_err(|e| self.poison(g, e.poison_cause()))
    }

    /// Makes every record of the last segment durable without writing over any
    /// of them: its bytes up to the valid end are copied into a new temp file,
    /// fsynced, and renamed over the segment (the directory fsynced), the copy's
    /// pages freshly dirty, so its fsync writes them whatever happened to an
    /// earlier fsync of the old file. Returns the new file, open for appending.
    fn replace_segment(&self, l: &LastSegment) -> Result<Box<dyn VfsFile>> {
        let (vfs, dir) = (self.vfs.as_ref(), self.dir.as_path());
        let bytes = vfs
            .read(&l.path)
            .map_err(|e| Error::io("read last segment", &l.path, e))?;
        let bytes: &[u8] = (*bytes).as_ref();
        let Some(prefix) = bytes.get(..l.end as usize) else {
            return Err(Error::Corrupt {
                path: l.path.clone(),
                offset: Some(bytes.len() as u64),
                seq: None,
                reason: format!(
                    "segment is {} bytes now, its records ended at {} when it was read",
                    bytes.len(),
                    l.end
                ),
            });
        };
        let name = segment_name(l.first_seq);
        write_file_atomic(vfs, dir, &name, prefix)?;
        vfs.open_write(&l.path)
            .map_err(|e| Error::io("open segment for append", &l.path, e))
    }

    /// [`Self::replace_segment`] under the sync lock, starting a new
    /// generation of the sync state (FORMAT.md §5.8): a writer that appended
    /// to the old file before it was replaced must not fsync it for an
    /// acknowledgement.
    fn replace_with_sync_lock(&self, l: &LastSegment, next_seq: u64) -> Result<Box<dyn VfsFile>> {
        let mut file = None;
        let last = (next_seq - 1, l.first_seq, l.end);
        let vfs = self.vfs.as_ref();
        let probe = || {
            let f = vfs
                .open_write(&l.path)
                .map_err(|e| Error::io("open segment", &l.path, e))?;
            retry_interrupted(|| f.sync_data())
                .map_err(|e| Error::io("fsync last segment before its copy", &l.path, e))
        };
        self.writers.replace(vfs, last, probe, || {
            file = Some(self.replace_segment(l)?);
            Ok(())
        })?;
        file.ok_or_else(|| {
            Error::io(
                "replace last segment",
                &l.path,
                std::io::Error::other("not replaced"),
            )
        })
    }

    /// Cuts the segment at `path` to `len` and fsyncs it, under the sync lock
    /// ([`Writers::guarded`](crate::engine::log::writers::Writers::guarded)), as every
    /// fsync of the log runs (§5.8): a failure it meets, its own or one the
    /// kernel's writeback met for another process, is recorded for all.
    /// `ops` names the cut and the fsync in an error.
    fn cut_under_sync_lock(
        &self,
        path: &std::path::Path,
        len: u64,
        ops: (&'static str, &'static str),
    ) -> Result<()> {
        let vfs = self.vfs.as_ref();
        self.writers.guarded(vfs, || {
            let f = vfs
                .open_write(path)
                .map_err(|e| Error::io("open segment", path, e))?;
            retry_interrupted(|| f.set_len(len)).map_err(|e| Error::io(ops.0, path, e))?;
            retry_interrupted(|| f.sync_all()).map_err(|e| Error::io(ops.1, path, e))
        })
    }

    /// FORMAT.md §5.5 steps 3–5.
    fn prepare(&self, g: &mut Inner<M>, p: Pending) -> Result<Option<PathBuf>> {
        let (vfs, dir) = (self.vfs.as_ref(), self.dir.as_path());
        let mut quarantined = None;
        // Step 3: a torn tail is kept beside its segment (the copy and its name
        // made durable by `quarantine`), then cut off durably.
        if let Some(t) = &p.torn {
            quarantined = quarantine(vfs, dir, &t.path, t.offset)?;
            if t.whole_file {
                vfs.remove(&t.path)
                    .map_err(|e| Error::io("remove torn segment", &t.path, e))?;
                // Durable before a segment of the same name may be created again.
                retry_interrupted(|| vfs.sync_dir(dir))
                    .map_err(|e| Error::io("fsync store directory", dir, e))?;
            } else {
                // Under the sync lock: other processes' records before the cut
                // may be waiting for an fsync, and this one covers them (§5.8).
                self.cut_under_sync_lock(
                    &t.path,
                    t.offset,
                    ("truncate torn tail", "fsync truncated segment"),
                )?;
            }
        }
        // Step 4. Segments before the last need no fsync here: a rotation fsyncs
        // a segment (sync_all, after cutting it to its records) before the next
        // one is created, and a failed fsync poisons the writer, so the existence
        // of a later segment proves the earlier ones durable. In the last, the
        // records up to the durability mark (§5.7), or up to the last record's
        // `synced` watermark, were fsynced by their writer, and its header by
        // its creator before any record. Records above that may be in the page
        // cache only: a killed writer's, or one whose fsync failed (the kernel
        // may then have marked the lost pages clean: a plain fsync would
        // "succeed" without writing them, fsyncgate). They are never rewritten
        // in place: the whole segment is copied into a new file, fsynced, and
        // renamed over the old one, so no acknowledged byte is overwritten.
        let id = self.tagging.as_ref().map(|s| (&s.0, &s.1));
        match p.last {
            Some(l) if l.continues => {
                let vouched = l.vouched;
                let (file, alloc) = if l.unproven {
                    (self.replace_with_sync_lock(&l, p.next_seq)?, l.end)
                } else {
                    let file = match l.opened {
                        Some(f) => f,
                        None => vfs
                            .open_write(&l.path)
                            .map_err(|e| Error::io("open segment for append", &l.path, e))?,
                    };
                    if l.alloc == l.end && self.codec == Codec::Binary {
                        // No zeros in the cache: cut to the records anyway (a no-op
                        // there; JSONL segments are never preallocated). A rotation
                        // whose fsync failed may have cut the preallocated zeros in
                        // the cache only, and the next fsync of this segment makes
                        // the size on disk match, so zeros can never end a segment
                        // that a later rotation closes.
                        retry_interrupted(|| file.set_len(l.end))
                            .map_err(|e| Error::io("trim last segment", &l.path, e))?;
                    }
                    // Preallocated zeros the cache shows are kept: the next records
                    // are written over them, with no new allocation and no size
                    // change for their fdatasync to write (§5.2).
                    (file, l.alloc)
                };
                g.continue_segment(ActiveSegment::at(
                    Active {
                        file,
                        path: l.path,
                        first_seq: l.first_seq,
                    },
                    l.end,
                    alloc,
                ));
                // Vouched-for records are not durable yet: the first fsync,
                // which covers them with this writer's own, says when.
                if !vouched {
                    self.group.advance(p.next_seq - 1);
                }
                if l.unproven {
                    self.mark_durable(p.next_seq - 1, l.first_seq, l.end);
                }
            }
            last => {
                if let Some(l) = last {
                    // The history does not continue in it, so it is closed like a
                    // rotation closes a segment: cut to its records and fsynced
                    // before the next segment exists (copied first when some of
                    // its records are not known durable).
                    if l.unproven {
                        self.replace_with_sync_lock(&l, p.next_seq)?;
                    } else {
                        // Under the sync lock, as every fsync of the log: a
                        // failure it reports (another writer's pages lost in
                        // the background) is recorded for every process (§5.8).
                        self.cut_under_sync_lock(
                            &l.path,
                            l.end,
                            ("trim last segment", "fsync replayed segment"),
                        )?;
                    }
                }
                let (a, len) = create_segment(vfs, dir, self.codec, p.next_seq, id)?;
                g.start_segment(ActiveSegment::new(a, len));
                self.group.advance(p.next_seq - 1);
                self.mark_durable(p.next_seq - 1, p.next_seq, len);
            }
        }
        // Step 5. No directory fsync when nothing was created or removed: every
        // create and rename the engine makes is followed by its own, and an
        // unlink of a temp that a crash undoes is repeated by the next writer.
        for path in &p.temps {
            // An interrupted snapshot write; the rename never happened, so it holds nothing needed.
            let _ = vfs.remove(path);
        }
        Ok(quarantined)
    }
}
