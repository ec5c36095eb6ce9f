//! Appending: staging framed records under the writer's lock, writing them
//! (or handing them to the next fsync leader), and the group-commit glue that
//! waits for an fsync to cover them.

use super::Machine;
use super::active::write_records;
use super::codec::encode_payload;
use super::compact;
use super::error::{Error, Result};
use super::format::*;
use super::frame::encode_record_tagged;
use super::live::Live;
use super::mark::Mark;
use super::mutex::lock;
use super::options::SyncPolicy;
use super::shared::{Inner, Shared};
use super::store::Store;
use super::tag::{Key, StoreId, TAG_LEN, record_tag};
use super::tailcache::write_tail_cache;
use super::vfs::retry_interrupted;
use std::sync::atomic::Ordering;

impl<M: Machine> Store<M> {
    /// Appends one transition and returns its seq once durable under the sync policy.
    ///
    /// `M::apply` runs first: a transition it refuses returns [`Error::Refused`] and
    /// nothing is written. `apply` must leave the state unchanged when it refuses.
    pub fn append(&self, t: &M::Transition) -> Result<u64> {
        match self.append_batch(std::slice::from_ref(t)).pop() {
            Some(r) => r,
            None => unreachable!("one result per transition"),
        }
    }

    /// Appends several transitions with one write and one fsync. Each is applied
    /// in order and accepted or refused on its own; the result for each is its seq
    /// or its error. Accepted ones are durable when this returns.
    pub fn append_batch(&self, ts: &[M::Transition]) -> Vec<Result<u64>> {
        let s = &*self.shared;
        let mut results = Vec::with_capacity(ts.len());
        if s.released() {
            return ts
                .iter()
                .map(|_| {
                    Err(Error::Unsupported {
                        path: s.dir.clone(),
                        reason: "a one-shot writer appends one batch: it let the writer lock go \
                                 once that was written (open the store again to append more)"
                            .into(),
                    })
                })
                .collect();
        }
        let (last, want_compact) = {
            let mut g = lock(&s.inner);
            if let Some(cause) = g.poison.cause() {
                return poisoned_batch(ts.len(), cause);
            }
            let (mut payload, mut batch) = g.scratch.take();
            let mut last = None;
            let first = g.live.next_seq();
            // Each record carries the durable watermark it was written under, so
            // recovery can tell a crash's unsynced hole from damage to synced data.
            let synced = s.durable();
            for t in ts {
                results.push(stage(
                    s.codec,
                    s.tagging.as_ref(),
                    &mut g.live,
                    t,
                    synced,
                    &mut payload,
                    &mut batch,
                ));
                if let Some(Ok(seq)) = results.last() {
                    last = Some(*seq);
                }
            }
            let written = if batch.is_empty() {
                Ok(())
            } else {
                s.prepare_or_poison(&mut g).and_then(|_| {
                    // A deferred open that made the replayed tail durable on its
                    // own raised the watermark: the records carry the new one.
                    if s.durable() > synced {
                        reframe(s, ts, &results, s.durable(), &mut payload, &mut batch)?;
                    }
                    s.write_frames(&mut g, &batch, first)?;
                    if s.stages() {
                        s.gather.staged_one();
                    }
                    Ok(())
                })
            };
            g.scratch.give_back(payload, batch);
            if let Err(e) = written {
                let cause = e.poison_cause();
                s.poison(&mut g, cause.clone());
                return poisoned_batch(ts.len(), &cause);
            }
            // Not before a deferred open's first write (all refused so far),
            // nor without room for it (FORMAT.md §5.4).
            let want_compact = g.prepared() && compact::due_with_room(s, &g);
            if s.opts.one_shot && last.is_some() && !want_compact {
                // Written: other writer processes may append after it while
                // its fsync runs, and share it (FORMAT.md §5.8).
                let (seq, a) = (g.live.last_seq(), g.active.first_seq());
                s.writers.publish(s.vfs.as_ref(), seq, a, g.active.end());
                // The state the open built, for the next process (FORMAT.md
                // §15): under the writer lock, so no compaction changes the
                // snapshot it stands on meanwhile. Never needed: a failure is
                // counted, not returned.
                if let Some(bytes) = lock(&s.tail_cache).take()
                    && write_tail_cache(s.vfs.as_ref(), &s.dir, &bytes).is_err()
                {
                    s.stats.tail_cache_failures.fetch_add(1, Ordering::Relaxed);
                }
                s.writer_lock.release();
            }
            (last, want_compact)
        };
        if let Some(seq) = last {
            s.stats.appends.fetch_add(
                results.iter().filter(|r| r.is_ok()).count() as u64,
                Ordering::Relaxed,
            );
            // Interval and Never acknowledge once written; the flusher (or sync) fsyncs.
            let wait = matches!(s.opts.sync, SyncPolicy::Always | SyncPolicy::Grouped { .. });
            if wait && let Err(e) = s.wait_durable(seq) {
                let cause = e.poison_cause();
                for r in results.iter_mut().filter(|r| r.is_ok()) {
                    *r = Err(Error::Poisoned {
                        cause: cause.clone(),
                    });
                }
                return results;
            }
        }
        if want_compact {
            compact::spawn_background(&self.shared);
        }
        results
    }

    /// Makes every accepted transition durable now, whatever the sync policy.
    pub fn sync(&self) -> Result<()> {
        let last = {
            let mut g = lock(&self.shared.inner);
            g.poison.check()?;
            self.shared.prepare_or_poison(&mut g)?;
            g.live.last_seq()
        };
        self.shared.wait_durable(last)
    }
}

/// A batch of `n` transitions refused whole: the writer is poisoned by `cause`.
fn poisoned_batch(n: usize, cause: &str) -> Vec<Result<u64>> {
    (0..n)
        .map(|_| {
            Err(Error::Poisoned {
                cause: cause.to_string(),
            })
        })
        .collect()
}

fn stage<M: Machine>(
    codec: Codec,
    tagging: Option<&(Key, StoreId)>,
    live: &mut Live<M>,
    t: &M::Transition,
    synced: u64,
    payload: &mut Vec<u8>,
    batch: &mut Vec<u8>,
) -> Result<u64> {
    encode_payload(codec, t, payload).map_err(|reason| Error::Codec {
        path: None,
        seq: None,
        reason,
    })?;
    // A tagged store's tag travels inside the frame and counts against the limit.
    let max = u64::from(MAX_RECORD_LEN) - if tagging.is_some() { TAG_LEN as u64 } else { 0 };
    if payload.len() as u64 > max {
        return Err(Error::TooLarge {
            what: "record",
            len: payload.len() as u64,
            max,
        });
    }
    let seq = live.accept(t)?;
    let tag = tagging.map(|(key, id)| record_tag(key, id, seq, payload));
    encode_record_tagged(codec, seq, synced, payload, tag.as_ref(), batch);
    Ok(seq)
}

/// Frames the accepted transitions of `ts` again under the watermark `synced`.
fn reframe<M: Machine>(
    s: &Shared<M>,
    ts: &[M::Transition],
    results: &[Result<u64>],
    synced: u64,
    payload: &mut Vec<u8>,
    batch: &mut Vec<u8>,
) -> Result<()> {
    batch.clear();
    for (t, r) in ts.iter().zip(results) {
        if let Ok(seq) = r {
            encode_payload(s.codec, t, payload).map_err(|reason| Error::Codec {
                path: None,
                seq: Some(*seq),
                reason,
            })?;
            let tag = s
                .tagging
                .as_ref()
                .map(|(key, id)| record_tag(key, id, *seq, payload));
            encode_record_tagged(s.codec, *seq, synced, payload, tag.as_ref(), batch);
        }
    }
    Ok(())
}

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
                // saw arrive (gather.rs); a one-shot writer stages nothing.
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
