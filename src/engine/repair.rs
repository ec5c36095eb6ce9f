//! Recovery's changes on disk, deferred to the first write (FORMAT.md §5.5
//! steps 3–5): the torn tail quarantined and cut, the bytes not known durable
//! rewritten, the active segment chosen, leftover temp files removed.

use super::Machine;
use super::error::{Error, Result};
use super::files::quarantine;
use super::pending::Pending;
use super::segment::create_segment;
use super::shared::{Active, Inner, Shared};
use super::vfs::{retry_interrupted, write_all_at};
use std::path::PathBuf;
use std::sync::Arc;

/// A deferred open rewrites the bytes not known durable together with the first
/// records appended, under their fdatasync, when they are at most this many
/// records and bytes; else it makes them durable on their own first (FORMAT.md §5.5).
const MAX_MERGED_TAIL_RECORDS: u64 = 32;
/// See [`MAX_MERGED_TAIL_RECORDS`].
const MAX_MERGED_TAIL_BYTES: u64 = 64 << 10;

impl<M: Machine> Shared<M> {
    /// Finishes a deferred open before anything is written (nothing to do once
    /// done). Returns where a torn tail's bytes were kept. A failure poisons.
    pub(crate) fn prepare_or_poison(&self, g: &mut Inner<M>) -> Result<Option<PathBuf>> {
        let Some(p) = g.pending.take() else {
            return Ok(None);
        };
        self.prepare(g, *p)
            .inspect_err(|e| self.poison(g, e.poison_cause()))
    }

    /// FORMAT.md §5.5 steps 3–5.
    fn prepare(&self, g: &mut Inner<M>, p: Pending) -> Result<Option<PathBuf>> {
        let (vfs, dir) = (self.vfs.as_ref(), self.dir.as_path());
        let mut quarantined = None;
        // Step 3: a torn tail is kept beside its segment (the copy and its name
        // made durable by `quarantine`), then cut off durably.
        if let Some(t) = &p.torn {
            quarantined = Some(quarantine(vfs, dir, &t.path, t.offset)?);
            if t.whole_file {
                vfs.remove(&t.path)
                    .map_err(|e| Error::io("remove torn segment", &t.path, e))?;
                // Durable before a segment of the same name may be created again.
                retry_interrupted(|| vfs.sync_dir(dir))
                    .map_err(|e| Error::io("fsync store directory", dir, e))?;
            } else {
                let f = vfs
                    .open_write(&t.path)
                    .map_err(|e| Error::io("open segment", &t.path, e))?;
                retry_interrupted(|| f.set_len(t.offset))
                    .map_err(|e| Error::io("truncate torn tail", &t.path, e))?;
                retry_interrupted(|| f.sync_all())
                    .map_err(|e| Error::io("fsync truncated segment", &t.path, e))?;
            }
        }
        // Step 4. Segments before the last need no fsync here: a rotation fsyncs
        // a segment (sync_all, after cutting it to its records) before the next
        // one is created, and a failed fsync poisons the writer, so the existence
        // of a later segment proves the earlier ones durable. In the last, the
        // records up to the last one's `synced` watermark were fsynced by their
        // writer (a failed fsync poisons, so no record claims a watermark past
        // one), and its header by its creator before any record was written. What
        // remains, `tail`, may be in the page cache only: a killed writer's, or
        // one whose fsync failed (the kernel may then have marked the lost pages
        // clean: a plain fsync would "succeed" without writing them, fsyncgate).
        // So it is rewritten, making what the cache shows dirty again.
        let id = self.keying.as_ref().map(|s| (&s.0, &s.1));
        match p.last {
            Some(l) if l.continues => {
                let file = vfs
                    .open_write(&l.path)
                    .map_err(|e| Error::io("open segment for append", &l.path, e))?;
                if l.from == 0 {
                    // A segment without records: its creator may have been killed
                    // between its fsync and the directory's. Its name must be
                    // durable before a record in it is acknowledged.
                    retry_interrupted(|| vfs.sync_dir(dir))
                        .map_err(|e| Error::io("fsync store directory", dir, e))?;
                }
                // Cut to the records (dropping preallocated zeros; the next append
                // preallocates again), even when the cache shows none: a rotation
                // whose fsync failed may have cut them in the cache only, and
                // the next fsync of this segment (the tail's or a rotation's)
                // makes the size on disk match, so zeros can never end a segment
                // that a later rotation closes.
                retry_interrupted(|| file.set_len(l.end))
                    .map_err(|e| Error::io("trim last segment", &l.path, e))?;
                // Records appended next carry the watermark the disk proves, which a
                // merged rewrite does not raise: each open of a one-shot writer
                // would owe one record more. Past a bound, the tail is made durable
                // on its own first (one more fdatasync, once per that many opens),
                // so the records appended next carry a watermark past it.
                let merge = l.records <= MAX_MERGED_TAIL_RECORDS
                    && l.tail.len() as u64 <= MAX_MERGED_TAIL_BYTES;
                if !l.tail.is_empty() && merge && self.stages() {
                    // Ends where the records begin: the next fsync leader writes
                    // both with one pwrite and one fdatasync. Until then the
                    // watermark stays at what the disk proves (`durable`), so no
                    // record claims the tail durable before it is.
                    let mut staged = l.tail;
                    staged.extend_from_slice(&g.staged);
                    g.staged = staged;
                } else if !l.tail.is_empty() {
                    write_all_at(file.as_ref(), &l.tail, l.from)
                        .map_err(|e| Error::io("rewrite last segment", &l.path, e))?;
                    if !merge {
                        retry_interrupted(|| file.sync_data())
                            .map_err(|e| Error::io("fsync replayed segment", &l.path, e))?;
                        self.group.advance(p.next_seq - 1);
                    }
                }
                g.active = Arc::new(Active {
                    file,
                    path: l.path,
                    first_seq: l.first_seq,
                });
                g.active_len = l.end;
                g.active_alloc = l.end;
            }
            last => {
                if let Some(l) = last {
                    // The history does not continue in it, so it is closed like a
                    // rotation closes a segment: rewritten, cut to its records and
                    // fsynced before the next segment exists.
                    let f = vfs
                        .open_write(&l.path)
                        .map_err(|e| Error::io("open segment", &l.path, e))?;
                    write_all_at(f.as_ref(), &l.tail, l.from)
                        .map_err(|e| Error::io("rewrite last segment", &l.path, e))?;
                    retry_interrupted(|| f.set_len(l.end))
                        .map_err(|e| Error::io("trim last segment", &l.path, e))?;
                    retry_interrupted(|| f.sync_all())
                        .map_err(|e| Error::io("fsync replayed segment", &l.path, e))?;
                }
                let (a, len) = create_segment(vfs, dir, self.codec, p.next_seq, id)?;
                g.segments.push(p.next_seq);
                g.active = Arc::new(a);
                g.active_len = len;
                g.active_alloc = len;
                self.group.advance(p.next_seq - 1);
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
