//! Group commit: the durable watermark and the leader/follower protocol that
//! shares one fsync among concurrent appenders.
//!
//! A waiter for seq `s` returns `Ok` only once an fsync that started after `s`
//! was written has succeeded (the watermark is the last seq written before the
//! leader's fsync began). At most one leader runs an fsync at a time; the others
//! wait and are woken when it ends. A failed fsync is never retried: it sets
//! `failed`, which every current and later waiter returns.
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
}

/// A mutex guarding [`GroupState`] with one condition variable.
pub trait Monitor: Send + Sync {
    /// The guard of a held lock.
    type Guard<'a>: DerefMut<Target = GroupState>
    where
        Self: 'a;
    /// A monitor holding `state`.
    fn new(state: GroupState) -> Self;
    /// Locks.
    fn lock(&self) -> Self::Guard<'_>;
    /// Releases the lock, waits for a notification, locks again.
    fn wait<'a>(&'a self, g: Self::Guard<'a>) -> Self::Guard<'a>;
    /// Wakes every waiter.
    fn notify_all(&self);
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
    cv: Condvar,
    gate: Mutex<()>,
}

impl Monitor for StdMonitor {
    type Guard<'a> = MutexGuard<'a, GroupState>;
    fn new(state: GroupState) -> Self {
        StdMonitor {
            m: Mutex::new(state),
            cv: Condvar::new(),
            gate: Mutex::new(()),
        }
    }
    fn lock(&self) -> Self::Guard<'_> {
        // Every update is a single assignment: a poisoned mutex holds consistent data.
        self.m.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn wait<'a>(&'a self, g: Self::Guard<'a>) -> Self::Guard<'a> {
        self.cv.wait(g).unwrap_or_else(|p| p.into_inner())
    }
    fn notify_all(&self) {
        self.cv.notify_all()
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
        drop(s);
        self.mon.notify_all();
    }

    /// Fails every current and later waiter with `cause` (the first cause stays).
    pub fn fail(&self, cause: String) {
        self.mon.lock().failed.get_or_insert(cause);
        self.mon.notify_all();
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
                s = self.mon.wait(s);
                continue;
            }
            s.leading = true;
            drop(s);
            // If flush panics, leading must not stay set or every waiter hangs.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut flush))
                .unwrap_or_else(|_| Err("fsync leader panicked".to_string()));
            s = self.mon.lock();
            s.leading = false;
            match r {
                Ok(target) => s.durable = s.durable.max(target),
                // Never retried: after a failed fsync the kernel may have dropped
                // the dirty pages, so a second "successful" fsync proves nothing.
                Err(cause) => {
                    s.failed.get_or_insert(cause);
                }
            }
            self.mon.notify_all();
        }
    }
}
