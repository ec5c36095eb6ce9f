//! Gathering a round: how long an fsync leader waits for the appenders it
//! expects before it takes what is staged (an adaptive commit delay).
//!
//! Leader/follower group commit alone covers about half of a steady set of
//! appenders per fsync: the ones a round wakes come back with their next
//! record just after the next leader took its target, and wait a whole round
//! more. So a leader waits, before it takes the staged records, until as many
//! batches are staged as the last round saw arrive (the ones it took and the
//! ones staged during its fsync), and no longer than half that round's fsync.
//! A leader that waited in vain expects only what did come: appenders that are
//! busy elsewhere between their records cost at most one bounded wait, and a
//! lone appender never waits (its own batch is all it expects).
//!
//! The wait yields the processor to the appenders it waits for; it takes no
//! lock. What it changes is only when a round starts, never what a round
//! covers or acknowledges.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::engine::mutex::lock;

/// The longest a leader waits, whatever the fsync took.
const MAX_WAIT: Duration = Duration::from_millis(1);

/// What the last round taught, and how many batches have been staged.
#[derive(Debug, Default)]
pub(crate) struct Gather {
    /// Batches staged since the open (only ever rises; counted under `inner`).
    staged: AtomicU64,
    last: Mutex<Round>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Round {
    /// `staged` when the last round took its records.
    taken_at: u64,
    /// Batches the next round expects.
    expect: u64,
    /// How long the last round's fsync took.
    fsync: Duration,
}

/// A round being gathered: what it waits for.
pub(crate) struct Plan {
    since: u64,
    expect: u64,
    bound: Duration,
}

impl Plan {
    /// Whether the batches expected were not all staged when the leader came.
    fn short(&self, staged: u64) -> bool {
        staged - self.since < self.expect
    }
}

impl Gather {
    /// Counts one staged batch (called under `inner`, after staging it).
    pub(crate) fn staged_one(&self) {
        self.staged.fetch_add(1, Ordering::Release);
    }

    /// The batches staged so far (read under `inner` by a leader taking them).
    pub(crate) fn staged(&self) -> u64 {
        self.staged.load(Ordering::Acquire)
    }

    /// Waits until the batches the last round taught this one to expect are
    /// staged, or half that round's fsync has passed. Returns the plan, which
    /// [`learn`](Self::learn) takes back once the round's fsync has ended.
    pub(crate) fn wait(&self) -> Plan {
        let r = *lock(&self.last);
        let plan = Plan {
            since: r.taken_at,
            expect: r.expect,
            bound: (r.fsync / 2).min(MAX_WAIT),
        };
        if plan.short(self.staged()) {
            let start = Instant::now();
            while plan.short(self.staged()) && start.elapsed() < plan.bound {
                std::thread::yield_now();
            }
        }
        plan
    }

    /// Learns from a round that took the batches staged up to `taken_at` and
    /// whose fsync took `fsync`: the next round expects the batches that
    /// arrived for this one (those it took, and those staged during its fsync).
    pub(crate) fn learn(&self, plan: &Plan, taken_at: u64, fsync: Duration) {
        // Rounds do not overlap (one leader at a time, `GroupCommit`), so
        // this round's lesson is the newest.
        let now = self.staged();
        let mut r = lock(&self.last);
        *r = Round {
            taken_at,
            expect: now.saturating_sub(plan.since).max(1),
            fsync,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_appender_never_waits() {
        let g = Gather::default();
        for _ in 0..100 {
            g.staged_one();
            let p = g.wait();
            assert!(!p.short(g.staged()), "its own batch is all it expects");
            let taken = g.staged();
            g.learn(&p, taken, Duration::from_secs(10));
            assert_eq!(lock(&g.last).expect, 1);
        }
    }

    #[test]
    fn a_round_expects_the_batches_the_last_one_saw_arrive() {
        let g = Gather::default();
        g.staged_one();
        let p = g.wait();
        g.learn(&p, 1, Duration::ZERO);
        // Round 2 takes 3 batches; 5 more arrive during its fsync.
        for _ in 0..3 {
            g.staged_one();
        }
        let p = g.wait();
        let taken = g.staged();
        for _ in 0..5 {
            g.staged_one();
        }
        g.learn(&p, taken, Duration::from_micros(100));
        let r = *lock(&g.last);
        assert_eq!((r.taken_at, r.expect), (4, 8));
    }

    #[test]
    fn a_wait_in_vain_is_bounded_and_lowers_what_is_expected() {
        let g = Gather::default();
        *lock(&g.last) = Round {
            taken_at: 0,
            expect: 8,
            fsync: Duration::from_millis(20),
        };
        g.staged_one();
        let t = Instant::now();
        let p = g.wait();
        // It waited, for half the fsync capped at MAX_WAIT, and then went on.
        assert!(p.short(g.staged()));
        assert_eq!(p.bound, MAX_WAIT);
        assert!(t.elapsed() >= MAX_WAIT);
        g.learn(&p, 1, Duration::from_millis(20));
        assert_eq!(lock(&g.last).expect, 1);
    }
}
