//! The end of a group-commit round wakes its sleepers without handing the
//! monitor's mutex from one to the next: each woken sleeper reads the durable
//! watermark from its mirror and returns. With a condition variable every
//! woken waiter took the mutex again on its way out, one after another (the
//! convoy that held 64 appender threads on 2 cores to ~7× one thread).
use runlog::engine::group::{GroupCommit, GroupState, Monitor, StdMonitor};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// std's mutex and parking ([`StdMonitor`]), counting what the protocol does
/// with them.
struct CountingMonitor(StdMonitor);

/// Threads registered as sleepers (each calls `current` once to do so).
static REGISTERED: AtomicUsize = AtomicUsize::new(0);
/// Set once the leader's flush has returned: locks after it are counted.
static ROUND_ENDED: AtomicBool = AtomicBool::new(false);
static LOCKS_AFTER_ROUND: AtomicUsize = AtomicUsize::new(0);

impl Monitor for CountingMonitor {
    type Thread = <StdMonitor as Monitor>::Thread;
    type Guard<'a> = <StdMonitor as Monitor>::Guard<'a>;
    fn new(state: GroupState<Self::Thread>) -> Self {
        CountingMonitor(StdMonitor::new(state))
    }
    fn lock(&self) -> Self::Guard<'_> {
        if ROUND_ENDED.load(Ordering::SeqCst) {
            LOCKS_AFTER_ROUND.fetch_add(1, Ordering::SeqCst);
        }
        self.0.lock()
    }
    fn current() -> Self::Thread {
        REGISTERED.fetch_add(1, Ordering::SeqCst);
        StdMonitor::current()
    }
    fn park() {
        StdMonitor::park()
    }
    fn unpark(t: &Self::Thread) {
        StdMonitor::unpark(t)
    }
    type Gate<'a> = <StdMonitor as Monitor>::Gate<'a>;
    fn gate(&self) -> Self::Gate<'_> {
        self.0.gate()
    }
}

#[test]
fn a_round_end_wakes_its_sleepers_without_handing_the_lock_from_one_to_the_next() {
    const SLEEPERS: usize = 16;
    let gc = Arc::new(GroupCommit::<CountingMonitor>::new(0));
    let flushes = Arc::new(AtomicUsize::new(0));
    // The leader (seq 1) holds its fsync until every other waiter sleeps.
    let leader = {
        let (gc, flushes) = (gc.clone(), flushes.clone());
        std::thread::spawn(move || {
            gc.wait_durable(1, || {
                flushes.fetch_add(1, Ordering::SeqCst);
                while REGISTERED.load(Ordering::SeqCst) < SLEEPERS {
                    std::thread::yield_now();
                }
                ROUND_ENDED.store(true, Ordering::SeqCst);
                // Its fsync covers every seq written before it began.
                Ok(1 + SLEEPERS as u64)
            })
        })
    };
    while flushes.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    let sleepers: Vec<_> = (0..SLEEPERS as u64)
        .map(|i| {
            let (gc, flushes) = (gc.clone(), flushes.clone());
            std::thread::spawn(move || {
                gc.wait_durable(2 + i, || {
                    flushes.fetch_add(1, Ordering::SeqCst);
                    Ok(u64::MAX)
                })
            })
        })
        .collect();
    assert_eq!(leader.join().unwrap(), Ok(()));
    for s in sleepers {
        assert_eq!(s.join().unwrap(), Ok(()));
    }
    assert_eq!(flushes.load(Ordering::SeqCst), 1, "one fsync covered all");
    assert_eq!(gc.durable(), 1 + SLEEPERS as u64);
    // The leader locks once to end its round; no woken sleeper locks at all.
    assert_eq!(LOCKS_AFTER_ROUND.load(Ordering::SeqCst), 1);
}
