//! A multi-threaded orchestrator embedding runlog: a DAG of units, W worker
//! threads pulling eligible units from the run's resume set, each unit marked
//! `in_progress`, worked on, then `done` with its result in the note.
//!
//! ```text
//! cargo run --example orchestrator -- --dir /tmp/orch --units 40 --workers 4
//! cargo run --example orchestrator -- --dir /tmp/orch --units 40 --workers 4 --crash-after 7
//! ```
//!
//! Killed at any point (`--crash-after K` aborts the process right after the
//! K-th unit is durably done), it resumes when run again on the same runs root:
//! `Runs::start` with the same fingerprint restores the live run, done units are
//! skipped, and a unit interrupted while `in_progress` is eligible again (its
//! `attempts` shows the restart). A done unit is never redone.
//!
//! The DAG: unit `uNNN` (N ≥ 1) depends on `u((N-1)/2)`, a binary tree rooted at
//! `u000`, so parallelism widens as the run proceeds.

use runlog::engine::SyncPolicy;
use runlog::run::{InitSpec, Run, RunStatus, Runs, UnitStatus};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

const USAGE: &str = "\
usage: orchestrator [--dir D] [--units N] [--workers W] [--crash-after K] [--run ID]
  --dir D          the runs root (default .runlog)
  --units N        units in the DAG, 1..=1000 (default 20)
  --workers W      worker threads, 1..=64 (default 4)
  --crash-after K  abort the process right after the K-th unit is done, to try resuming
  --run ID         the run id (default orchestrator)
Run it again on the same runs root and it resumes; after the run finished, it starts afresh
(with a RUN_FINISHED_STARTED_FRESH warning).";

struct Args {
    dir: PathBuf,
    run: String,
    units: usize,
    workers: usize,
    crash_after: Option<usize>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        dir: PathBuf::from(".runlog"),
        run: "orchestrator".into(),
        units: 20,
        workers: 4,
        crash_after: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let num = |v: String| v.parse::<usize>().map_err(|e| format!("{flag} {v:?}: {e}"));
        match flag.as_str() {
            "--dir" => a.dir = PathBuf::from(value()?),
            "--run" => a.run = value()?,
            "--units" => a.units = num(value()?)?,
            "--workers" => a.workers = num(value()?)?,
            "--crash-after" => a.crash_after = Some(num(value()?)?),
            _ => {
                return Err(format!("unknown argument {flag:?}\n{USAGE}"));
            }
        }
    }
    if a.units == 0 || a.units > 1000 || a.workers == 0 || a.workers > 64 {
        return Err("--units must be 1..=1000 and --workers 1..=64".into());
    }
    Ok(a)
}

fn unit_name(i: usize) -> String {
    format!("u{i:03}")
}

/// The unit's "work": deterministic, and slow enough for workers to overlap.
fn work(unit: &str) -> String {
    std::thread::sleep(Duration::from_millis(5));
    let sum = unit
        .bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b.into()));
    format!("result={sum:x}")
}

/// What the workers share besides the run: units handed out and not yet done.
struct Board {
    claimed: BTreeSet<String>,
    failed: Option<String>,
}

struct Shared {
    run: Run,
    board: Mutex<Board>,
    changed: Condvar,
    done_here: AtomicUsize,
    crash_after: Option<usize>,
}

/// Takes the next eligible unit nobody holds; `None` when there is nothing
/// left to do (every unit done, or a failure stopped the run).
fn next_unit(s: &Shared) -> Option<String> {
    let mut board = s.board.lock().unwrap();
    loop {
        if board.failed.is_some() {
            return None;
        }
        let rs = match s.run.resume_set() {
            Ok(rs) => rs,
            Err(e) => {
                board.failed = Some(e.to_string());
                return None;
            }
        };
        if let Some(u) = rs.eligible.iter().find(|u| !board.claimed.contains(*u)) {
            board.claimed.insert(u.clone());
            return Some(u.clone());
        }
        if board.claimed.is_empty() {
            // Nothing eligible and nothing in flight: done (or stuck, which main reports).
            return None;
        }
        board = s.changed.wait(board).unwrap();
    }
}

fn worker(s: &Shared) {
    while let Some(unit) = next_unit(s) {
        let r = s
            .run
            .set_unit(&unit, UnitStatus::InProgress, None, None)
            .and_then(|_| {
                let result = work(&unit);
                s.run.set_unit(&unit, UnitStatus::Done, Some(&result), None)
            });
        if r.is_ok() {
            let n = s.done_here.fetch_add(1, Ordering::SeqCst) + 1;
            if s.crash_after == Some(n) {
                eprintln!("orchestrator: --crash-after {n}: aborting");
                std::process::abort();
            }
        }
        let mut board = s.board.lock().unwrap();
        board.claimed.remove(&unit);
        if let Err(e) = r {
            board.failed = Some(format!("unit {unit}: {e}"));
        }
        s.changed.notify_all();
    }
}

fn main() -> ExitCode {
    match orchestrate() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("orchestrator: {e}");
            ExitCode::FAILURE
        }
    }
}

fn orchestrate() -> Result<(), String> {
    let args = parse_args()?;
    let names: Vec<String> = (0..args.units).map(unit_name).collect();
    let deps: BTreeMap<String, Vec<String>> = (1..args.units)
        .map(|i| (unit_name(i), vec![unit_name((i - 1) / 2)]))
        .collect();
    // Grouped: many threads append at once; a leader's fsync waits briefly for
    // company, so W workers share fsyncs. Each append still returns only once durable.
    let runs = Runs::new(&args.dir).with_sync(SyncPolicy::Grouped {
        linger: Duration::from_millis(2),
    });
    let started = runs
        .start(InitSpec {
            id: args.run.clone(),
            task: format!("orchestrate {} units", args.units),
            units: names,
            deps,
            // Same inputs → the live run is resumed; other inputs → a fresh run.
            fingerprint: [("units".to_string(), args.units.to_string())].into(),
            ..Default::default()
        })
        .map_err(|e| e.to_string())?;
    for w in &started.warnings {
        eprintln!("orchestrator: warning {}: {}", w.code, w.message);
    }
    let rs = started.run.resume_set().map_err(|e| e.to_string())?;
    println!(
        "run {}: {}, {} done, {} to go",
        args.run,
        if started.resumed {
            "resumed"
        } else {
            "started"
        },
        rs.skip.len(),
        args.units - rs.skip.len()
    );
    let shared = Arc::new(Shared {
        run: started.run,
        board: Mutex::new(Board {
            claimed: BTreeSet::new(),
            failed: None,
        }),
        changed: Condvar::new(),
        done_here: AtomicUsize::new(0),
        crash_after: args.crash_after,
    });
    let handles: Vec<_> = (0..args.workers)
        .map(|_| {
            let s = shared.clone();
            std::thread::spawn(move || worker(&s))
        })
        .collect();
    for h in handles {
        h.join().map_err(|_| "a worker panicked".to_string())?;
    }
    if let Some(f) = shared.board.lock().unwrap().failed.take() {
        return Err(f);
    }
    let rs = shared.run.resume_set().map_err(|e| e.to_string())?;
    if !(rs.eligible.is_empty() && rs.dep_blocked.is_empty()) {
        return Err(format!("units left undone: {rs:?}"));
    }
    let ran = shared.done_here.load(Ordering::SeqCst);
    let result = format!("{} units done ({ran} in this process)", rs.skip.len());
    // Fail-closed: finalize `done` is refused unless every unit is done.
    shared
        .run
        .finalize(RunStatus::Done, Some(&result))
        .map_err(|e| e.to_string())?;
    println!("run {}: finalized done: {result}", args.run);
    Ok(())
}
