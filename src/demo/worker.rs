//! The demo's worker process: opens the run (recovering after a kill), works
//! through the resume set with several threads, and reports each durable
//! transition on stdout. It keeps no state of its own: everything it knows after
//! a restart comes from the store.

use super::plan::result_of;
use super::protocol::Line;
use runlog::engine::SyncPolicy;
use runlog::run::{Run, RunError, RunStatus, Runs, UnitStatus};
use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// What a worker is asked to do.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The runs root.
    pub root: PathBuf,
    /// The run id.
    pub run: String,
    /// Threads working on units.
    pub workers: usize,
    /// Simulated work per unit, in microseconds.
    pub work_us: u64,
}

/// Which units may start, as units finish.
struct Schedule {
    ready: VecDeque<String>,
    remaining: usize,
    children: HashMap<String, Vec<String>>,
    deps_left: HashMap<String, usize>,
    failed: Option<RunError>,
}

impl Schedule {
    fn from_run(run: &Run) -> Result<Schedule, RunError> {
        // The demo's runs are small: the worker plans from the whole document.
        let doc = run.doc()?;
        Ok({
            let doc = &doc;
            let mut children: HashMap<String, Vec<String>> = HashMap::new();
            let mut deps_left = HashMap::new();
            let mut ready = VecDeque::new();
            let mut remaining = 0;
            for (name, u) in &doc.units {
                if u.status == UnitStatus::Done {
                    continue;
                }
                remaining += 1;
                let left = u
                    .depends_on
                    .iter()
                    .filter(|d| {
                        doc.units
                            .get(*d)
                            .is_none_or(|x| x.status != UnitStatus::Done)
                    })
                    .count();
                for d in &u.depends_on {
                    children.entry(d.clone()).or_default().push(name.clone());
                }
                if left == 0 {
                    ready.push_back(name.clone());
                } else {
                    deps_left.insert(name.clone(), left);
                }
            }
            Schedule {
                ready,
                remaining,
                children,
                deps_left,
                failed: None,
            }
        })
    }

    fn finish(&mut self, unit: &str) {
        self.remaining -= 1;
        for c in self.children.remove(unit).unwrap_or_default() {
            if let Some(n) = self.deps_left.get_mut(&c) {
                *n -= 1;
                if *n == 0 {
                    self.deps_left.remove(&c);
                    self.ready.push_back(c);
                }
            }
        }
    }
}

fn say(line: &Line) {
    let mut out = std::io::stdout().lock();
    // The supervisor reads these; a closed pipe means it is gone, and so should we be.
    if writeln!(out, "{}", line.render())
        .and_then(|_| out.flush())
        .is_err()
    {
        std::process::exit(1);
    }
}

/// Runs the worker to completion: every unit done, the run finalized.
pub fn run_worker(o: &WorkerOptions) -> Result<(), RunError> {
    let started = Instant::now();
    // No compaction and no delta flush: the demo's check reads every record
    // of the log (FORMAT.md §14 would fold them into tables).
    let runs = Runs::new(&o.root)
        .with_compaction(runlog::engine::CompactionPolicy::Manual)
        .with_sync(SyncPolicy::Grouped {
            linger: Duration::ZERO,
        })
        .with_lock_wait(Some(Duration::from_secs(10)));
    let run = runs.open(&o.run)?;
    let recovery_us = started.elapsed().as_micros() as u64;
    let replayed = run.recovery().records_replayed;
    let schedule = Schedule::from_run(&run)?;
    let done = run.counts().total() as usize - schedule.remaining;
    say(&Line::Ready {
        recovery_us,
        replayed,
        done,
    });
    let fsyncs = || run.stats().fsyncs.load(Ordering::Relaxed);

    let sched = Mutex::new(schedule);
    let wake = Condvar::new();
    std::thread::scope(|scope| {
        for _ in 0..o.workers.max(1) {
            scope.spawn(|| {
                loop {
                    let unit = {
                        let mut s = sched.lock().unwrap_or_else(|p| p.into_inner());
                        loop {
                            if s.remaining == 0 || s.failed.is_some() {
                                return;
                            }
                            if let Some(u) = s.ready.pop_front() {
                                break u;
                            }
                            s = wake.wait(s).unwrap_or_else(|p| p.into_inner());
                        }
                    };
                    let r = (|| {
                        let seq = run.set_unit(&unit, UnitStatus::InProgress, None, None)?;
                        say(&Line::Ack {
                            seq,
                            unit: unit.clone(),
                            status: "in_progress".into(),
                            fsyncs: fsyncs(),
                        });
                        std::thread::sleep(Duration::from_micros(o.work_us));
                        let result = result_of(&unit);
                        // The unit's result is committed with its `done`: one durable
                        // transition, so it is recorded once or not at all.
                        let seq = run.set_unit(&unit, UnitStatus::Done, Some(&result), None)?;
                        say(&Line::Ack {
                            seq,
                            unit: unit.clone(),
                            status: "done".into(),
                            fsyncs: fsyncs(),
                        });
                        Ok::<(), RunError>(())
                    })();
                    let mut s = sched.lock().unwrap_or_else(|p| p.into_inner());
                    match r {
                        Ok(()) => s.finish(&unit),
                        Err(e) => {
                            s.failed.get_or_insert(e);
                        }
                    }
                    wake.notify_all();
                }
            });
        }
    });
    if let Some(e) = sched.into_inner().unwrap_or_else(|p| p.into_inner()).failed {
        // The first failure as it was: an I/O failure stays one (exit 1).
        return Err(e);
    }
    // A previous incarnation may have finalized just before it was killed.
    if !run.read(|d| d.header().status.is_terminal()) {
        run.finalize(RunStatus::Done, Some("every unit done"))?;
    }
    say(&Line::Finished { fsyncs: fsyncs() });
    Ok(())
}
