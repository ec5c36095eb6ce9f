//! The writer's side of the group commit, on its shared state: framed
//! records put at the end of the active segment (staged for the next fsync
//! leader, or written now), and the wait for an fsync that covers them, led
//! by whoever comes first ([`Shared::write_frames`], [`Shared::wait_durable`]).

use super::active::write_records;
use super::{Inner, Shared};
use crate::engine::error::{Error, Result};
use crate::engine::io::vfs::retry_interrupted;
use crate::engine::log::mark::Mark;
use crate::engine::machine::Machine;
use crate::engine::mutex::lock;
use crate::engine::options::SyncPolicy;
use std::sync::atomic::Ordering;

impl<M: Machine> Shared<M> {
    /// Puts framed records at the end of the active segment, rotating first when
    /// full: staged for the next fsync leader to write (`Always`/`Grouped`, whose
    /// appenders wait for that fsync anyway), or written now (`Interval`/`Never`,
    /// which acknowledge once written).
    pub(crate) fn write_frames(
        &self,
        g: &mut Inner<M>,
        frames: &[u8],
        first_in_batch: u64,
    ) -> Result<()> {
        if g.active.end() + frames.len() as u64 > self.opts.segment_bytes
            && first_in_batch > g.active.first_seq()
        {
            self.rotate(g, first_in_batch)?;
        }
        let end = g.active.end() + frames.len() as u64;
        self.preallocate(g, end)?;
        let stage = self.stages();
        g.active
            .push(frames, stage)
            .map_err(|e| Error::io("append to segment", &g.active.file().path, e))?;
        g.book.appended(frames.len() as u64);
        Ok(())
    }

    /// Waits until `seq` is durable, leading an fsync when no one else is.
    pub(crate) fn wait_durable(&self, seq: u64) -> Result<()> {
        let linger = match self.opts.sync {
            SyncPolicy::Grouped { linger } => Some(linger),
            _ => None,
        };
        self.group
            .wait_durable(seq, || {
                // A fixed linger, or a wait for the appenders the last round
                // saw arrive (log/gather.rs); a one-shot writer stages nothing.
                let plan = match linger.filter(|d| !d.is_zero()) {
                    Some(d) => {
                        std::thread::sleep(d);
                        None
                    }
                    None => self.stages().then(|| self.gather.wait()),
                };
                let (target, active, staged, at, taken_at, io) = {
                    let mut g = lock(&self.inner);
                    let io = self.io.lock(&mut g);
                    let (staged, at) = g.active.take_staged();
                    let taken_at = self.gather.staged();
                    let target = g.live.last_seq();
                    (target, g.active.file().clone(), staged, at, taken_at, io)
                };
                // One write for every record staged since the last leader, then the
                // fsync, both outside `inner`: appenders keep staging meanwhile.
                if !staged.is_empty() {
                    write_records(active.file.as_ref(), &staged, at).map_err(|e| {
                        Error::io("append to segment", &active.path, e).poison_cause()
                    })?;
                }
                // Under the sync lock, shared with every writer process
                // (FORMAT.md §5.8): none when another's fsync covered these
                // records already. The mark is written before any waiter is
                // woken: an acknowledged record is one the mark proves,
                // unless the mark's own write was lost.
                let own = Mark {
                    seq: target,
                    segment: active.first_seq,
                    end: at + staged.len() as u64,
                };
                let mut fsynced = false;
                let started = std::time::Instant::now();
                let r = self.group.fsync(active.path.display(), || {
                    let vfs = self.vfs.as_ref();
                    self.writers
                        .fsync(vfs, &self.mark, own, true, !self.writer_lock.held(), || {
                            retry_interrupted(|| active.file.sync_data())
                        })
                        .map(|did| fsynced = did)
                });
                drop(io);
                if let Some(plan) = &plan {
                    self.gather.learn(plan, taken_at, started.elapsed());
                }
                let counter = match fsynced {
                    true => &self.stats.fsyncs,
                    false => &self.stats.fsyncs_covered,
                };
                if r.is_ok() {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                if !staged.is_empty() {
                    // Hand the buffer back for reuse.
                    lock(&self.inner).active.give_back(staged);
                }
                r.map(|()| target)
                    .map_err(|e| Error::io("fsync segment", &active.path, e).poison_cause())
            })
            .map_err(|cause| {
                lock(&self.inner).poison.set(cause.clone());
                Error::Poisoned { cause }
            })
    }
}
