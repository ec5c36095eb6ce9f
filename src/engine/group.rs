//! Group commit: the durable watermark and the leader/follower protocol that
//! shares one fsync among concurrent appenders.
//!
//! A waiter for seq `s` returns `Ok` only once an fsync that started after `s`
//! was written has succeeded (the watermark is the last seq written before the
//! leader's fsync began). At most one leader runs an fsync at a time; the others
//! wait and are woken when it ends. A failed fsync is never retried: it sets
//! `failed`, which every current and later waiter returns.
//!
//! Waiters sleep on one of two condition variables by round parity, so that the
//! end of a round wakes only the waiters it covers and one more to lead the next
//! round, not every waiter: once the leader has announced what its fsync covers
//! ([`GroupCommit::announce`]), a waiter beyond that sleeps on the next round's
//! variable. Without an announcement every waiter sleeps on the current round's.
//!
//! The protocol is generic over its mutex and condition variable ([`Monitor`])
//! so that tests can run it under a randomized scheduler; the store uses
//! [`StdMonitor`].

use std::fmt;
use std::io;
use std::ops::DerefMut;
use std::sync::{Condvar, Mutex, MutexGuard};

/// The protocol's shared state.
#[derive(Debug, Default)]
pub struct GroupState {
    durable: u64,
    leading: bool,
    failed: Option<String>,
    /// Rounds led so far; the current one while `leading`.
    round: u64,
    /// What the current round's fsync covers, once its leader has said.
    inflight: Option<u64>,
    /// Threads asleep on each condition variable: a notification with none
    /// is skipped (it costs a system call even when nobody waits).
    asleep: [u32; 2],
}

impl GroupState {
    fn any_asleep(&self, which: usize) -> bool {
        self.asleep[which] > 0
    }
}

/// A mutex guarding [`GroupState`] with two condition variables (0 and 1).
pub trait Monitor: Send + Sync {
    /// The guard of a held lock.
    type Guard<'a>: DerefMut<Target = GroupState>
    where
        Self: 'a;
    /// A monitor holding `state`.
    fn new(state: GroupState) -> Self;
    /// Locks.
    fn lock(&self) -> Self::Guard<'_>;
    /// Releases the lock, waits for a notification on variable `which` (0 or 1),
    /// locks again.
    fn wait<'a>(&'a self, g: Self::Guard<'a>, which: usize) -> Self::Guard<'a>;
    /// Wakes every waiter on variable `which`.
    fn notify_all_on(&self, which: usize);
    /// Wakes one waiter on variable `which`.
    fn notify_one_on(&self, which: usize);
    /// The guard of the fsync gate.
    type Gate<'a>
    where
        Self: 'a;
    /// Takes the fsync gate (a second, plain mutex).
    fn gate(&self) -> Self::Gate<'_>;
}

/// [`Monitor`] over std's `Mutex` and `Condvar`.
#[derive(Debug)]
pub struct StdMonitor {
    m: Mutex<GroupState>,
    cv: [Condvar; 2],
    gate: Mutex<()>,
}

impl Monitor for StdMonitor {
    type Guard<'a> = MutexGuard<'a, GroupState>;
    fn new(state: GroupState) -> Self {
        StdMonitor {
            m: Mutex::new(state),
            cv: [Condvar::new(), Condvar::new()],
            gate: Mutex::new(()),
        }
    }
    fn lock(&self) -> Self::Guard<'_> {
        // Every update is a single assignment: a poisoned mutex holds consistent data.
        self.m.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn wait<'a>(&'a self, g: Self::Guard<'a>, which: usize) -> Self::Guard<'a> {
        self.cv[which].wait(g).unwrap_or_else(|p| p.into_inner())
    }
    fn notify_all_on(&self, which: usize) {
        self.cv[which].notify_all()
    }
    fn notify_one_on(&self, which: usize) {
        self.cv[which].notify_one()
    }
    type Gate<'a> = MutexGuard<'a, ()>;
    fn gate(&self) -> Self::Gate<'_> {
        self.gate.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The durable watermark and its leader/follower protocol.
#[derive(Debug)]
pub struct GroupCommit<M: Monitor = StdMonitor> {
    mon: M,
}

impl<M: Monitor> GroupCommit<M> {
    /// Everything up to `durable` is already durable.
    pub fn new(durable: u64) -> Self {
        GroupCommit {
            mon: M::new(GroupState {
                durable,
                ..Default::default()
            }),
        }
    }

    /// The durable watermark.
    pub fn durable(&self) -> u64 {
        self.mon.lock().durable
    }

    /// Records that everything up to `upto` was made durable by someone else
    /// (a rotation fsyncs the closed segment).
    pub fn advance(&self, upto: u64) {
        let mut s = self.mon.lock();
        s.durable = s.durable.max(upto);
        self.wake_all(&s);
    }

    /// Wakes every sleeper (called holding the monitor, so none can be
    /// about to sleep unseen).
    fn wake_all(&self, s: &GroupState) {
        for which in 0..2 {
            if s.any_asleep(which) {
                self.mon.notify_all_on(which);
            }
        }
    }

    /// Says what the current round's fsync covers: every seq up to `target`. Called
    /// by the leader's `flush` before its fsync, so that waiters beyond `target`
    /// sleep until the next round instead of waking at the end of this one.
    pub fn announce(&self, target: u64) {
        let mut s = self.mon.lock();
        if s.leading {
            s.inflight = Some(target);
        }
    }

    /// Fails every current and later waiter with `cause` (the first cause stays).
    pub fn fail(&self, cause: String) {
        let mut s = self.mon.lock();
        s.failed.get_or_insert(cause);
        self.wake_all(&s);
    }

    /// Runs one fsync of the log (`what` names it in the error). Log fsyncs are
    /// serialized and a failure is recorded before the next one can start: after
    /// a failed fsync the kernel may have dropped the dirty pages, so a concurrent
    /// or later fsync of the same file would "succeed" without them. Every fsync
    /// that acknowledgement relies on (a leader's, a rotation's) goes through here.
    pub fn fsync(
        &self,
        what: impl fmt::Display,
        f: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        let _gate = self.mon.gate();
        if let Some(cause) = &self.mon.lock().failed {
            return Err(io::Error::other(format!(
                "an earlier fsync failed: {cause}"
            )));
        }
        let r = f();
        if let Err(e) = &r {
            self.fail(format!("fsync {what}: {e}"));
        }
        r
    }

    /// Waits until `seq` is durable. When no fsync is in flight this thread
    /// leads one: `flush` runs with no lock held and returns the watermark its
    /// fsync covers (the last seq written before it started) or the failure.
    pub fn wait_durable(
        &self,
        seq: u64,
        mut flush: impl FnMut() -> Result<u64, String>,
    ) -> Result<(), String> {
        let mut s = self.mon.lock();
        loop {
            if let Some(cause) = &s.failed {
                return Err(cause.clone());
            }
            if s.durable >= seq {
                return Ok(());
            }
            if s.leading {
                // Covered by the round in flight (or not yet known): woken at its
                // end. Beyond it: woken when the next round ends, or to lead it.
                let round = match s.inflight {
                    Some(t) if seq > t => s.round + 1,
                    _ => s.round,
                };
                let which = (round % 2) as usize;
                s.asleep[which] += 1;
                s = self.mon.wait(s, which);
                s.asleep[which] -= 1;
                continue;
            }
            s.leading = true;
            s.round += 1;
            s.inflight = None;
            let round = s.round;
            drop(s);
            // If flush panics, leading must not stay set or every waiter hangs.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut flush))
                .unwrap_or_else(|_| Err("fsync leader panicked".to_string()));
            s = self.mon.lock();
            s.leading = false;
            s.inflight = None;
            match r {
                Ok(target) => {
                    s.durable = s.durable.max(target);
                    // This round's waiters, and one of the next round's to lead it.
                    let (this, next) = ((round % 2) as usize, ((round + 1) % 2) as usize);
                    if s.any_asleep(this) {
                        self.mon.notify_all_on(this);
                    }
                    if s.any_asleep(next) {
                        self.mon.notify_one_on(next);
                    }
                }
                // Never retried: after a failed fsync the kernel may have dropped
                // the dirty pages, so a second "successful" fsync proves nothing.
                Err(cause) => {
                    s.failed.get_or_insert(cause);
                    self.wake_all(&s);
                }
            }
        }
    }
}
