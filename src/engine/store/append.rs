//! Appending: [`Store::append`], [`Store::append_batch`] and [`Store::sync`].
//! A batch's transitions are applied and framed under the writer's lock,
//! then put at the end of the log through the shared state
//! ([`Shared::write_frames`]) and waited for ([`Shared::wait_durable`], the
//! group commit's glue, in `shared/commit.rs`).

use super::Store;
use super::compact;
use crate::engine::codec::encode_payload;
use crate::engine::error::{Error, Result};
use crate::engine::format::*;
use crate::engine::load::tailcache::write_tail_cache;
use crate::engine::log::frame::encode_record_tagged;
use crate::engine::machine::Machine;
use crate::engine::mutex::lock;
use crate::engine::options::SyncPolicy;
use crate::engine::shared::Shared;
use crate::engine::shared::live::Live;
use crate::engine::tag::{Key, StoreId, TAG_LEN, record_tag};
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
        let (last, want_compact, over_backlog) = {
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
            let over_backlog =
                s.opts.max_backlog > 0 && M::backlog(g.live.state()) > s.opts.max_backlog;
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
            (last, want_compact, over_backlog)
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
        // Bounded memory (FORMAT.md §14.6): past the backlog, this append
        // returns once the running compaction (often the one just started)
        // has ended and its install has dropped what it flushed. No lock is
        // held here, and a deferred or failed compaction ends the wait too.
        if over_backlog && s.compaction.wait_free() {
            s.stats.backlog_waits.fetch_add(1, Ordering::Relaxed);
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
