//! Group commit: the durable watermark and the leader/follower protocol that
//! shares one fsync among concurrent appenders.
//!
//! A waiter for seq `s` returns `Ok` only once an fsync that started after `s`
//! was written has succeeded (the watermark is the last seq written before the
//! leader's fsync began). At most one leader runs an fsync at a time; the others
//! sleep and are woken when it ends. A failed fsync is never retried: it sets
//! `failed`, which every current and later waiter returns.
//!
//! Each sleeper is parked on its own, listed under the monitor with the seq it
//! waits for. The end of a round unparks exactly the sleepers its fsync covered,
//! and one more to lead the next round (first, so the next fsync starts at
//! once). A woken sleeper reads the watermark from an atomic mirror and returns
//! without taking the monitor's mutex: the end of a round with 64 sleepers does
//! not hand the mutex from one to the next (a convoy of context switches, which
//! a condition variable's `notify_all` makes).
//!
//! The protocol is generic over its mutex and its threads' parking
//! ([`Monitor`]) so that tests can run it under a randomized scheduler; the
//! store uses [`StdMonitor`].

use std::fmt;
use std::io;
use std::ops::DerefMut;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// One parked waiter.
#[derive(Debug)]
struct Sleeper<T> {
    /// The seq it waits for.
    seq: u64,
    /// Names it in the list (a woken thread is one no longer listed).
    ticket: u64,
    thread: T,
}

/// The protocol's shared state, over `T`, a handle that unparks a thread.
#[derive(Debug)]
pub struct GroupState<T> {
    durable: u64,
    leading: bool,
    failed: Option<String>,
    /// The parked waiters, in no particular order.
    asleep: Vec<Sleeper<T>>,
    next_ticket: u64,
}

impl<T> GroupState<T> {
    /// The state with everything up to `durable` durable.
    pub fn new(durable: u64) -> Self {
        GroupState {
            durable,
            leading: false,
            failed: None,
            asleep: Vec::new(),
            next_ticket: 0,
        }
    }

    /// Takes the sleepers `durable` covers and, when no leader runs, one other
    /// sleeper to lead the next round (first in the list returned: whichever
    /// leads, its fsync covers every seq asleep, all written before it began).
    /// With `all`, takes every sleeper.
    fn take_woken(&mut self, all: bool) -> Vec<T> {
        let durable = self.durable;
        let mut woken = Vec::new();
        if !all
            && !self.leading
            && let Some(i) = self.asleep.iter().position(|s| s.seq > durable)
        {
            woken.push(self.asleep.remove(i).thread);
        }
        let mut i = 0;
        while i < self.asleep.len() {
            if all || self.asleep[i].seq <= durable {
                woken.push(self.asleep.swap_remove(i).thread);
            } else {
                i += 1;
            }
        }
        woken
    }
}

/// A mutex guarding [`GroupState`], and the parking of threads.
pub trait Monitor: Send + Sync {
    /// What unparks a thread.
    type Thread: Send;
    /// The guard of a held lock.
    type Guard<'a>: DerefMut<Target = GroupState<Self::Thread>>
    where
        Self: 'a;
    /// A monitor holding `state`.
    fn new(state: GroupState<Self::Thread>) -> Self;
    /// Locks.
    fn lock(&self) -> Self::Guard<'_>;
    /// The calling thread's handle.
    fn current() -> Self::Thread;
    /// Parks the calling thread until it is unparked (or spuriously).
    fn park();
    /// Unparks `t` (its next park returns at once if it is not parked yet).
    fn unpark(t: &Self::Thread);
    /// The guard of the fsync gate.
    type Gate<'a>
    where
        Self: 'a;
    /// Takes the fsync gate (a second, plain mutex).
    fn gate(&self) -> Self::Gate<'_>;
}

/// [`Monitor`] over std's `Mutex` and thread parking.
#[derive(Debug)]
pub struct StdMonitor {
    m: Mutex<GroupState<std::thread::Thread>>,
    gate: Mutex<()>,
}

impl Monitor for StdMonitor {
    type Thread = std::thread::Thread;
    type Guard<'a> = MutexGuard<'a, GroupState<std::thread::Thread>>;
    fn new(state: GroupState<std::thread::Thread>) -> Self {
        StdMonitor {
            m: Mutex::new(state),
            gate: Mutex::new(()),
        }
    }
    fn lock(&self) -> Self::Guard<'_> {
        // Every update is a single assignment: a poisoned mutex holds consistent data.
        self.m.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn current() -> Self::Thread {
        std::thread::current()
    }
    fn park() {
        std::thread::park()
    }
    fn unpark(t: &Self::Thread) {
        t.unpark()
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
    /// Mirrors of `durable` and of whether `failed` is set, written under the
    /// monitor after the state they mirror: a woken sleeper, and an appender
    /// framing its records, read them without the lock. A mirror may lag the
    /// state, never lead it.
    durable: AtomicU64,
    failed: AtomicBool,
}

impl<M: Monitor> GroupCommit<M> {
    /// Everything up to `durable` is already durable.
    pub fn new(durable: u64) -> Self {
        GroupCommit {
            mon: M::new(GroupState::new(durable)),
            durable: AtomicU64::new(durable),
            failed: AtomicBool::new(false),
        }
    }

    /// The durable watermark.
    pub fn durable(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// Whether `seq` is known durable without the lock (the mirror), and no
    /// failure is known.
    fn covered(&self, seq: u64) -> bool {
        !self.failed.load(Ordering::Acquire) && self.durable.load(Ordering::Acquire) >= seq
    }

    /// Sets the watermark to at least `upto` (under the lock) and its mirror.
    fn raise(&self, s: &mut GroupState<M::Thread>, upto: u64) {
        s.durable = s.durable.max(upto);
        self.durable.store(s.durable, Ordering::Release);
    }

    /// Records `cause` (the first cause stays) and its mirror.
    fn set_failed(&self, s: &mut GroupState<M::Thread>, cause: String) {
        s.failed.get_or_insert(cause);
        self.failed.store(true, Ordering::Release);
    }

    /// Records that everything up to `upto` was made durable by someone else
    /// (a rotation fsyncs the closed segment).
    pub fn advance(&self, upto: u64) {
        self.settle(self.mon.lock(), Ok(upto));
    }

    /// Fails every current and later waiter with `cause` (the first cause stays).
    pub fn fail(&self, cause: String) {
        self.settle(self.mon.lock(), Err(cause));
    }

    /// Records an fsync's outcome under the held lock `s` (everything up to
    /// the seq is durable, or the failure), lets go of the lock and unparks the
    /// sleepers it settles: on success those it covers and, when no leader
    /// runs, one more to lead the next round; on failure every one.
    fn settle(&self, mut s: M::Guard<'_>, outcome: Result<u64, String>) {
        let woken = match outcome {
            Ok(upto) => {
                self.raise(&mut s, upto);
                s.take_woken(false)
            }
            Err(cause) => {
                self.set_failed(&mut s, cause);
                s.take_woken(true)
            }
        };
        drop(s);
        woken.iter().for_each(M::unpark);
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
        if self.covered(seq) {
            return Ok(());
        }
        let mut s = self.mon.lock();
        loop {
            if let Some(cause) = &s.failed {
                return Err(cause.clone());
            }
            if s.durable >= seq {
                return Ok(());
            }
            if s.leading {
                // Parked until a round's end covers `seq` or picks this thread
                // to lead the next round (or a failure).
                let ticket = s.next_ticket;
                s.next_ticket += 1;
                s.asleep.push(Sleeper {
                    seq,
                    ticket,
                    thread: M::current(),
                });
                drop(s);
                s = loop {
                    M::park();
                    if self.covered(seq) {
                        return Ok(());
                    }
                    let g = self.mon.lock();
                    // Still listed: a spurious wake-up.
                    if !g.asleep.iter().any(|w| w.ticket == ticket) {
                        break g;
                    }
                };
                continue;
            }
            s.leading = true;
            drop(s);
            // If flush panics, leading must not stay set or every waiter hangs.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut flush))
                .unwrap_or_else(|_| Err("fsync leader panicked".to_string()));
            s = self.mon.lock();
            s.leading = false;
            // This round's sleepers, and one of the next round's to lead it; a
            // failure is never retried: after a failed fsync the kernel may have
            // dropped the dirty pages, so a second "successful" fsync proves nothing.
            self.settle(s, r);
            if self.covered(seq) {
                return Ok(());
            }
            s = self.mon.lock();
        }
    }
}
