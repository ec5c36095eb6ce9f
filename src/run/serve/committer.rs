//! A server's committer: one thread applies the changes that every
//! connection hands it, in batches of one write and one fdatasync
//! (`batch::apply_batch`, which ends a batch after an `item` or a `spend`),
//! and decides when each batch starts (docs/CLI.md, "serve"; FORMAT.md §5.9). Once a change is waiting, it holds the batch:
//!
//! - while a connection greeted less than [`FRESH_WAIT`] ago has sent
//!   nothing: a one-shot call sends its change right after the greeting, so
//!   it is on its way;
//! - with `--commit-delay D`, up to `D` after the first change while another
//!   connection is open and has nothing in the batch (PostgreSQL's
//!   `commit_delay` with `commit_siblings` = 1). A lone writer never waits:
//!   the only open connection is its own.
//!
//! A batch starts as soon as neither holds. What it covers changes nothing
//! an answer means: each connection writes its acks only after
//! `apply_batch` returns, which is after the fdatasync that covers them.

use super::batch::{Deferral, apply_batch};
use super::protocol::Acked;
use crate::run::RunError;
use crate::run::handle::Run;
use crate::run::open::Warning;
use crate::run::transition::Change;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long after its greeting a connection that has sent nothing is waited
/// for: past it, a slow or idle client holds no batch.
pub(super) const FRESH_WAIT: Duration = Duration::from_millis(1);

/// What each change of a batch came to, in order.
type Results = Vec<Result<Acked, RunError>>;

/// The committer's state, shared with every connection.
pub(super) struct Committer<'r> {
    run: &'r Run,
    delay: Duration,
    deferral: Deferral,
    warn: &'r (dyn Fn(&Warning) + Sync),
    queue: Mutex<Queue>,
    changed: Condvar,
}

#[derive(Default)]
struct Queue {
    /// Changes handed over and not yet applied, one entry per connection.
    pending: Vec<(Vec<Change>, SyncSender<Results>)>,
    /// Connections accepted and not yet finished.
    open: usize,
    /// Of those, the ones not yet heard from: (id, accepted at).
    fresh: Vec<(u64, Instant)>,
    next_id: u64,
    /// No connection will be accepted any more.
    closed: bool,
}

/// One connection's registration: counted open from its accept until this
/// is dropped.
pub(super) struct Connection<'c, 'r> {
    committer: &'c Committer<'r>,
    id: u64,
}

/// Until when a batch whose first change came at `first` is held, if it is
/// held at all (module docs): `fresh` are the accept times of connections not
/// yet heard from, `others` the open connections with nothing in the batch.
/// Never past `first` + the longer of [`FRESH_WAIT`] and `delay`.
pub(super) fn hold_until(
    now: Instant,
    first: Instant,
    fresh: impl Iterator<Item = Instant>,
    others: usize,
    delay: Duration,
) -> Option<Instant> {
    let on_its_way = fresh.map(|at| at + FRESH_WAIT).max();
    let siblings = (others > 0 && !delay.is_zero()).then(|| first + delay);
    // Connections that keep arriving never hold a batch longer than this.
    let cap = first + FRESH_WAIT.max(delay);
    on_its_way
        .max(siblings)
        .map(|until| until.min(cap))
        .filter(|&until| until > now)
}

impl<'r> Committer<'r> {
    pub(super) fn new(run: &'r Run, delay: Duration, warn: &'r (dyn Fn(&Warning) + Sync)) -> Self {
        Committer {
            run,
            delay,
            deferral: Deferral::new(),
            warn,
            queue: Mutex::new(Queue::default()),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a connection just accepted.
    pub(super) fn connection(&self) -> Connection<'_, 'r> {
        let mut q = self.lock();
        let id = q.next_id;
        q.next_id += 1;
        q.open += 1;
        q.fresh.push((id, Instant::now()));
        Connection {
            committer: self,
            id,
        }
    }

    /// Connections accepted and not yet finished.
    pub(super) fn open(&self) -> usize {
        self.lock().open
    }

    /// No more connections: [`run`](Self::run) returns once every open one
    /// has finished.
    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    /// The committer's loop, on its own thread.
    pub(super) fn run(&self) {
        let mut q = self.lock();
        loop {
            if q.pending.is_empty() {
                if q.closed && q.open == 0 {
                    return;
                }
                q = self.changed.wait(q).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            let first = Instant::now();
            while let Some(until) = hold_until(
                Instant::now(),
                first,
                q.fresh.iter().map(|&(_, at)| at),
                q.open.saturating_sub(q.pending.len()),
                self.delay,
            ) {
                let left = until.saturating_duration_since(Instant::now());
                q = self
                    .changed
                    .wait_timeout(q, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            let batch = std::mem::take(&mut q.pending);
            drop(q);
            let sizes: Vec<usize> = batch.iter().map(|(c, _)| c.len()).collect();
            let (changes, replies): (Vec<Vec<Change>>, Vec<_>) = batch.into_iter().unzip();
            let mut results = apply_batch(
                self.run,
                changes.into_iter().flatten().collect(),
                &self.deferral,
                self.warn,
            )
            .into_iter();
            for (n, reply) in sizes.into_iter().zip(replies) {
                // A connection that is gone has no one to answer.
                let _ = reply.send(results.by_ref().take(n).collect());
            }
            q = self.lock();
        }
    }
}

impl Connection<'_, '_> {
    /// Hands `changes` to the committer; returns what each came to, once
    /// the fdatasync covering the accepted ones has returned.
    pub(super) fn commit(&self, changes: Vec<Change>) -> Results {
        let (send, receive) = sync_channel(1);
        let n = changes.len();
        {
            let mut q = self.committer.lock();
            q.fresh.retain(|&(id, _)| id != self.id);
            if n > 0 {
                q.pending.push((changes, send));
            }
        }
        self.committer.changed.notify_all();
        if n == 0 {
            return vec![];
        }
        match receive.recv() {
            Ok(results) => results,
            // Only a panic of the committer drops the sender unanswered.
            Err(_) => (0..n)
                .map(|_| {
                    Err(RunError::Io {
                        op: "hand a change to the server's committer",
                        path: "-".into(),
                        source: std::io::Error::other("the committer stopped unanswered"),
                    })
                })
                .collect(),
        }
    }
}

impl Drop for Connection<'_, '_> {
    fn drop(&mut self) {
        let mut q = self.committer.lock();
        q.open -= 1;
        q.fresh.retain(|&(id, _)| id != self.id);
        drop(q);
        self.committer.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_lone_change_is_never_held() {
        let t = Instant::now();
        for delay in [Duration::ZERO, 100 * MS] {
            assert_eq!(hold_until(t, t, std::iter::empty(), 0, delay), None);
        }
    }

    #[test]
    fn a_connection_greeted_and_silent_is_waited_for_until_its_window_ends() {
        let t = Instant::now();
        let greeted = t - MS / 4;
        assert_eq!(
            hold_until(t, t, [greeted].into_iter(), 1, Duration::ZERO),
            Some(greeted + FRESH_WAIT)
        );
        // Past its window, it holds nothing.
        let late = t + FRESH_WAIT;
        assert_eq!(
            hold_until(late, t, [greeted].into_iter(), 1, Duration::ZERO),
            None
        );
    }

    #[test]
    fn a_commit_delay_holds_only_while_another_connection_is_open() {
        let t = Instant::now();
        let delay = 10 * MS;
        assert_eq!(
            hold_until(t, t, std::iter::empty(), 1, delay),
            Some(t + delay)
        );
        assert_eq!(hold_until(t, t, std::iter::empty(), 0, delay), None);
        // Measured from the batch's first change, not from now.
        assert_eq!(
            hold_until(t + 4 * MS, t, std::iter::empty(), 2, delay),
            Some(t + delay)
        );
        assert_eq!(hold_until(t + delay, t, std::iter::empty(), 2, delay), None);
        // The later of the two bounds holds.
        let greeted = t + delay - FRESH_WAIT / 2;
        assert_eq!(
            hold_until(t, t, [greeted].into_iter(), 1, Duration::ZERO),
            Some(t + FRESH_WAIT),
            "capped"
        );
        assert_eq!(hold_until(t, t, [t].into_iter(), 1, delay), Some(t + delay));
    }

    #[test]
    fn connections_that_keep_arriving_hold_a_batch_no_longer_than_its_cap() {
        let t = Instant::now();
        for delay in [Duration::ZERO, 5 * MS] {
            let cap = t + FRESH_WAIT.max(delay);
            // One greeted just now, at every moment: still released at the cap.
            for now in [t, t + MS / 2, cap - MS / 10] {
                let until = hold_until(now, t, [now].into_iter(), 1, delay);
                assert_eq!(until, Some(cap), "{now:?}");
            }
            assert_eq!(hold_until(cap, t, [cap].into_iter(), 1, delay), None);
        }
    }
}
