//! Proves, under thousands of random and PCT thread schedules (shuttle), that the
//! real group-commit protocol (`engine::group`) never acknowledges a seq before
//! an fsync that covers it, delivers an fsync failure to every waiter it affects
//! and every later one, never fsyncs again after a failure, and loses no
//! wake-up (shuttle fails a schedule in which every thread is blocked).
//! Regression: "a rotation's failed fsync raced by a leader's fsync of the same
//! file acknowledged records whose pages were dropped" (fixed by the fsync gate).
use crate::common;
use runlog::engine::group::{GroupCommit, GroupState, Monitor};
use shuttle::sync::{Mutex, MutexGuard};
use shuttle::thread;
use std::sync::Arc;

struct ShuttleMonitor {
    m: Mutex<GroupState<thread::Thread>>,
    gate: Mutex<()>,
}

impl Monitor for ShuttleMonitor {
    type Thread = thread::Thread;
    type Guard<'a> = MutexGuard<'a, GroupState<thread::Thread>>;
    fn new(state: GroupState<thread::Thread>) -> Self {
        ShuttleMonitor {
            m: Mutex::new(state),
            gate: Mutex::new(()),
        }
    }
    fn lock(&self) -> Self::Guard<'_> {
        self.m.lock().unwrap()
    }
    fn current() -> Self::Thread {
        thread::current()
    }
    fn park() {
        thread::park()
    }
    fn unpark(t: &Self::Thread) {
        t.unpark()
    }
    type Gate<'a> = MutexGuard<'a, ()>;
    fn gate(&self) -> Self::Gate<'_> {
        self.gate.lock().unwrap()
    }
}

/// The disk: `durable` is the last seq an fsync really covered. After a failed
/// fsync the dirty pages are gone and a later fsync "succeeds" covering nothing
/// (fsyncgate), so only the protocol's discipline keeps acknowledgements honest.
#[derive(Default)]
struct Disk {
    durable: u64,
    fsyncs: usize,
    failed: bool,
    /// An fsync was issued after a failed one (checked outside the flush, whose
    /// panics the protocol turns into errors).
    fsync_after_failure: bool,
}

impl Disk {
    /// One fsync covering everything up to `written`.
    fn fsync(&mut self, written: u64, fail_at: Option<usize>) -> std::io::Result<()> {
        self.fsyncs += 1;
        self.fsync_after_failure |= self.failed;
        if Some(self.fsyncs) == fail_at {
            self.failed = true;
            return Err(std::io::Error::from_raw_os_error(5));
        }
        if !self.failed {
            self.durable = self.durable.max(written);
        }
        Ok(())
    }
}

/// `writers` threads append (under the append lock `inner`) and wait; one more
/// rotates midway (fsync under the append lock, then advance); the
/// `fail_at`-th fsync fails.
fn scenario(writers: usize, fail_at: Option<usize>, fail_rotation: bool) {
    let inner = Arc::new(Mutex::new(0u64)); // the last seq written
    let disk = Arc::new(Mutex::new(Disk::default()));
    let gc = Arc::new(GroupCommit::<ShuttleMonitor>::new(0));
    let mut hs = vec![];
    {
        let (inner, disk, gc) = (inner.clone(), disk.clone(), gc.clone());
        hs.push(thread::spawn(move || {
            // Rotate once something has been written (spawned first, so it can
            // overlap a leader's fsync).
            let w = loop {
                let w = inner.lock().unwrap();
                if *w > 0 {
                    break w;
                }
                drop(w);
                thread::yield_now();
            };
            let upto = *w;
            let fail = if fail_rotation {
                Some(disk.lock().unwrap().fsyncs + 1)
            } else {
                fail_at
            };
            let r = gc.fsync("rotation", || disk.lock().unwrap().fsync(upto, fail));
            if r.is_ok() {
                gc.advance(upto);
            }
            drop(w);
        }));
    }
    for _ in 0..writers {
        let (inner, disk, gc) = (inner.clone(), disk.clone(), gc.clone());
        hs.push(thread::spawn(move || {
            let failed_before = disk.lock().unwrap().failed;
            let seq = {
                let mut w = inner.lock().unwrap();
                *w += 1;
                *w
            };
            let r = gc.wait_durable(seq, || {
                // As the store: capture under the append lock, fsync with no lock held.
                let target = *inner.lock().unwrap();
                thread::yield_now();
                gc.fsync("log", || {
                    let mut d = disk.lock().unwrap();
                    // A real fsync covers at least what was written before it started.
                    d.fsync(target, fail_at)
                })
                .map(|()| target)
                .map_err(|e| e.to_string())
            });
            let d = disk.lock().unwrap();
            assert!(
                !d.fsync_after_failure,
                "an fsync was issued after a failed one"
            );
            match r {
                Ok(()) => {
                    assert!(
                        seq <= d.durable,
                        "seq {seq} acknowledged, durable only {}",
                        d.durable
                    );
                    assert!(!failed_before, "acknowledged after a failure was known");
                }
                Err(_) => assert!(d.failed, "an error with no failure"),
            }
        }));
    }
    for h in hs {
        h.join().unwrap();
    }
    // Once failed, every later waiter fails at once, without an fsync.
    let (failed, fsyncs) = {
        let d = disk.lock().unwrap();
        (d.failed, d.fsyncs)
    };
    if failed {
        assert!(
            gc.wait_durable(u64::MAX, || unreachable!("fsync after failure"))
                .is_err()
        );
        assert_eq!(disk.lock().unwrap().fsyncs, fsyncs);
    } else {
        assert_eq!(disk.lock().unwrap().durable, writers as u64);
    }
}

#[test]
fn eight_writers_random_schedules_no_failure() {
    shuttle::check_random(|| scenario(8, None, false), common::schedules());
}

#[test]
fn eight_writers_random_schedules_with_a_failed_fsync() {
    for fail_at in 1..=3 {
        shuttle::check_random(
            move || scenario(8, Some(fail_at), false),
            common::schedules() / 3,
        );
    }
}

#[test]
fn eight_writers_pct_schedules() {
    for fail_at in [None, Some(1), Some(2)] {
        shuttle::check_pct(
            move || scenario(8, fail_at, false),
            common::schedules() / 3,
            3,
        );
    }
}

/// The race the fsync gate closes: the rotation's fsync fails while a leader
/// that captured its target before the rotation is about to fsync the same file.
#[test]
fn failed_rotation_fsync_raced_by_a_leader_acknowledges_nothing_lost() {
    shuttle::check_random(|| scenario(3, None, true), common::schedules());
    shuttle::check_pct(|| scenario(3, None, true), common::schedules(), 3);
}
