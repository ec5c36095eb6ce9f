//! Issue 48 ("fsyncgate" across writer processes), through the real binary:
//! every `runlog` process of a trial runs under the fault shim
//! (tests/faultshim/faultshim.c, [`crate::faultshim`]), which keeps a shadow
//! of what successful fsyncs made durable and injects, in one process at a
//! time, one fault: an fdatasync of a segment that fails with EIO and drops
//! the file's unsynced pages for every process (`eio_drop`), or leaves them
//! readable but marked clean so no later fsync writes them (`eio_clean`), or
//! only fails (`eio`); a segment write that fails with ENOSPC or comes back
//! short; a SIGKILL just before or just after a segment's fdatasync.
//!
//! After each trial (a fresh run), for the live run and for two power-loss
//! images built from the shadows (`DURABLE` and `TAIL` lost, or written
//! back; FORMAT.md §5.7, §7):
//! - every call that exited 0 printing `seq N` is the record at seq N (its
//!   unit set `done`; each call sets its own unit, so the run document shows
//!   it too, also after a compaction), and no seq was acknowledged twice;
//! - the run opens (`dump`, `get`, `verify` not corrupt) and takes a new
//!   write;
//! - the shim saw nothing it does not model.
//!
//! Scenarios: eight one-shot `runlog unit` writers at a time, half the
//! trials with a `runlog compact` loop beside them (FORMAT.md §5.8); a
//! `runlog serve` under a fault, restarted after each failure, with one-shot
//! callers handing it their changes (§5.9); a long-lived `runlog apply`
//! beside one-shot writers, faults in either. Half the trials of each run on
//! a slower disk (every fdatasync 0.1–1 ms longer). Then three schedules held
//! in place by the shim's hold points: the issue's own (A appended, held
//! before the sync lock, B's failed fdatasync drops A's record, C writes the
//! same seq), and two the soak found after the issue's fix, where a writer's
//! lock-free replay read a record that a failed fdatasync then dropped (its
//! open copies the dropped bytes; or it appends after another writer's
//! shorter record written in their place). And the shim's own model, checked
//! with `dd`.
//!
//! `RUNLOG_FAULT_SOAK_FAULTS` sets how many faults the one-shot soak fires
//! (default 200, about 20 s here for all of this file; CI sets 2500, about 5
//! minutes; the serve and apply soaks fire a quarter of it each, at least
//! 12); `RUNLOG_FAULT_SOAK_SEED` its seed (default: from the clock; printed).
//! The seed fixes the faults drawn, not the processes' timing. A summary line
//! per soak goes to stderr uncaptured, and each failed trial's report (its
//! problems, the faults that fired and by which call, and every process of
//! the trial with its plan, times and outcome). `RUNLOG_FAULT_SOAK_KEEP=DIR`
//! keeps a failed trial's run, the shim's state and the report under DIR.
//! Without a C compiler the tests skip visibly (`RUNLOG_REQUIRE_CC=1`: fail).
use crate::cli_support::{self, text};
use crate::depth;
use crate::faultshim::{self, Fired, Hints, Kind, Plan, Trial};
use crate::skip_support;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const RUN: &str = "r";
/// The unit every check writes last, to prove the run takes a write.
const PROBE: &str = "probe";

/// splitmix64: the soak's own generator (seeded, printed, reproducible).
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

fn env_u64(var: &str) -> Option<u64> {
    std::env::var(var).ok().map(|s| {
        s.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{var}={s:?} is not a number"))
    })
}

/// RUNLOG_FAULT_SOAK_SEED, else one from the clock: the same for every soak
/// of this test process.
fn seed() -> u64 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SEED.get_or_init(|| {
        env_u64("RUNLOG_FAULT_SOAK_SEED").unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                % 1_000_000_007
        })
    })
}

/// Faults the one-shot soak fires (200 at the quick depth, 2,500 at the full
/// one: tests/depth); the serve and apply soaks fire a quarter (at least 12).
fn faults_wanted() -> usize {
    depth::scaled("RUNLOG_FAULT_SOAK_FAULTS", 200, 2500) as usize
}

/// A fault kind, page loss (both ways) weighted heavily.
fn draw_kind(rng: &mut Rng) -> Kind {
    const WEIGHTS: [(Kind, u64); 7] = [
        (Kind::EioDrop, 30),
        (Kind::EioClean, 25),
        (Kind::Eio, 10),
        (Kind::EnospcWrite, 10),
        (Kind::ShortWrite, 5),
        (Kind::KillBeforeSync, 10),
        (Kind::KillAfterSync, 10),
    ];
    let mut r = rng.below(WEIGHTS.iter().map(|w| w.1).sum());
    for (k, w) in WEIGHTS {
        if r < w {
            return k;
        }
        r -= w;
    }
    unreachable!()
}

/// How one call (a process, or one op line of `apply`) ended.
#[derive(Debug, Clone)]
enum Outcome {
    /// Acknowledged: exit 0 and `seq N` (or apply's `{"seq":N}`).
    Acked(u64),
    /// A command that is not a change exited 0 (compact, serve).
    Ok,
    /// Exit 1 (or an ack with code 1): not acknowledged; stderr's words.
    Failed(String),
    /// Sent to a server or to apply, and no ack came: may have landed.
    Unknown(String),
    /// Died of the SIGKILL its own plan raised.
    Killed,
    /// Anything else (exit 2, another signal, exit 0 without `seq N`): a
    /// failure of the trial.
    Unexpected(String),
}

#[derive(Debug, Clone)]
struct Call {
    /// What ran, as a person would type it.
    what: String,
    /// The unit it sets `done`, for a change.
    unit: Option<String>,
    pid: u32,
    plan: Option<Plan>,
    /// Milliseconds from the trial's start.
    start: f64,
    end: f64,
    outcome: Outcome,
}

impl Call {
    fn acked(&self) -> Option<u64> {
        match self.outcome {
            Outcome::Acked(s) => Some(s),
            _ => None,
        }
    }
    fn line(&self) -> String {
        format!(
            "[{:8.1}..{:8.1} ms] pid {:>7} `{}`{} -> {}",
            self.start,
            self.end,
            self.pid,
            self.what,
            self.plan.map(|p| format!(" plan {p}")).unwrap_or_default(),
            match &self.outcome {
                Outcome::Acked(s) => format!("acknowledged seq {s}"),
                Outcome::Ok => "exit 0".into(),
                Outcome::Failed(m) => format!("exit 1: {}", one_line(m)),
                Outcome::Unknown(m) => format!("unknown: {}", one_line(m)),
                Outcome::Killed => "SIGKILL (its plan)".into(),
                Outcome::Unexpected(m) => format!("UNEXPECTED: {}", one_line(m)),
            }
        )
    }
}

fn one_line(s: &str) -> String {
    let s = s.trim().replace('\n', " | ");
    if s.chars().count() > 300 {
        format!("{}…", s.chars().take(300).collect::<String>())
    } else {
        s
    }
}

fn ms(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1e3
}

/// One fault in flight at a time: a process takes the token with its plan,
/// and no other process gets a plan until it has ended.
struct Token {
    in_flight: AtomicBool,
    rng: Mutex<Rng>,
}

impl Token {
    fn new(seed: u64) -> Token {
        Token {
            in_flight: AtomicBool::new(false),
            rng: Mutex::new(Rng(seed)),
        }
    }
    /// A plan for the next process (at its `1..=max_n`th segment sync or
    /// write), one time in three when no fault is in flight.
    fn take(&self, max_n: u64) -> Option<Plan> {
        let mut rng = self.rng.lock().unwrap();
        if !rng.one_in(3) || self.in_flight.swap(true, Ordering::SeqCst) {
            return None;
        }
        Some(Plan {
            kind: draw_kind(&mut rng),
            n: 1 + rng.below(max_n) as u32,
        })
    }
    fn release(&self, plan: Option<Plan>) {
        if plan.is_some() {
            assert!(self.in_flight.swap(false, Ordering::SeqCst));
        }
    }
    fn below(&self, n: u64) -> u64 {
        self.rng.lock().unwrap().below(n)
    }
}

/// `writers` one-shot writers, each `runlog unit RUN u<i> done` in turn for
/// the next `i` below `calls`, each call taking a fault plan when the token
/// has one (at its first segment sync or write); their calls once all are done.
fn one_shot_writers(
    trial: &Trial,
    t0: Instant,
    next: &AtomicUsize,
    token: &Token,
    (writers, calls): (usize, usize),
) -> Vec<Call> {
    let total = calls;
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..writers)
            .map(|_| {
                s.spawn(|| {
                    let mut calls = vec![];
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        if i >= total {
                            return calls;
                        }
                        let plan = token.take(1);
                        calls.push(unit_call(trial, t0, plan, &format!("u{i}")));
                        token.release(plan);
                    }
                })
            })
            .collect();
        writers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    })
}

/// Classifies a finished process: a change (`unit`) or not.
fn outcome(o: &Output, plan: Option<Plan>, change: bool, served: bool) -> Outcome {
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr).trim().to_string();
    match (o.status.code(), o.status.signal()) {
        (Some(0), _) if !change => Outcome::Ok,
        (Some(0), _) => match stdout
            .lines()
            .find_map(|l| l.strip_prefix("seq "))
            .and_then(|n| n.trim().parse().ok())
        {
            Some(seq) => Outcome::Acked(seq),
            None => Outcome::Unexpected(format!("exit 0 without `seq N`: {}", text(o))),
        },
        (Some(1), _) if stderr.is_empty() => {
            Outcome::Unexpected("exit 1 with nothing on stderr".into())
        }
        (Some(1), _) if served && stderr.contains("which may have applied it") => {
            Outcome::Unknown(stderr)
        }
        (Some(1), _) => Outcome::Failed(stderr),
        (None, Some(libc::SIGKILL)) if plan.is_some_and(|p| p.kind.kills()) => Outcome::Killed,
        (code, signal) => Outcome::Unexpected(format!(
            "exit code {code:?}, signal {signal:?}: {}",
            text(o)
        )),
    }
}

/// Runs `args` on the trial's root under the shim with `plan`.
fn run(trial: &Trial, t0: Instant, plan: Option<Plan>, args: &[&str], unit: Option<&str>) -> Call {
    let start = ms(t0);
    let child = trial
        .cmd(plan)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn runlog");
    let pid = child.id();
    let o = child.wait_with_output().expect("wait for runlog");
    Call {
        what: args.join(" "),
        unit: unit.map(str::to_string),
        pid,
        plan,
        start,
        end: ms(t0),
        outcome: outcome(&o, plan, unit.is_some(), false),
    }
}

/// `unit RUN UNIT done`, waiting for the writer lock.
fn unit_call(trial: &Trial, t0: Instant, plan: Option<Plan>, unit: &str) -> Call {
    run(
        trial,
        t0,
        plan,
        &["unit", RUN, unit, "done", "--lock-timeout", "60"],
        Some(unit),
    )
}

/// `init` of a run of units `u0..u{n}` and [`PROBE`], under the shim.
fn init(trial: &Trial, units: usize, binary: bool) {
    let names: Vec<String> = (0..units).map(|i| format!("u{i}")).collect();
    init_units(trial, &names, binary);
}

/// `init` of a run of `names` and [`PROBE`], under the shim.
fn init_units(trial: &Trial, names: &[String], binary: bool) {
    let mut names = names.to_vec();
    names.push(PROBE.into());
    let names = names.join(",");
    let mut args = vec!["init", "--id", RUN, "--task", "t", "--units", &names];
    if binary {
        args.extend(["--codec", "binary"]);
    }
    let o = trial.cmd(None).args(&args).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "init: {}", text(&o));
}

/// The log's records (seq → the unit set and its status, `None` for other
/// records) and the run document's unit statuses, or why they cannot be read.
type Read = (
    BTreeMap<u64, Option<(String, String)>>,
    BTreeMap<String, String>,
);

fn read_run(root: &Path) -> Result<Read, String> {
    let o = cli_support::runlog(root, &["dump", RUN]);
    if o.status.code() != Some(0) {
        return Err(format!("`dump` exit {:?}: {}", o.status.code(), text(&o)));
    }
    let mut log = BTreeMap::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let rec: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("`dump` printed {line:?}: {e}"))?;
        let seq = rec["seq"]
            .as_u64()
            .ok_or(format!("`dump`: no seq in {line}"))?;
        let u = &rec["t"]["change"]["unit"];
        let change = u["unit"].as_str().map(|n| {
            (
                n.to_string(),
                u["status"].as_str().unwrap_or("?").to_string(),
            )
        });
        if log.insert(seq, change).is_some() {
            return Err(format!("`dump` lists seq {seq} twice"));
        }
    }
    let o = cli_support::runlog(root, &["get", RUN, "--json"]);
    if o.status.code() != Some(0) {
        return Err(format!("`get` exit {:?}: {}", o.status.code(), text(&o)));
    }
    let doc: serde_json::Value =
        serde_json::from_slice(&o.stdout).map_err(|e| format!("`get` printed no JSON: {e}"))?;
    let units = doc["units"]
        .as_object()
        .ok_or(format!("no units in {doc}"))?
        .iter()
        .map(|(n, u)| (n.clone(), u["status"].as_str().unwrap_or("?").to_string()))
        .collect();
    Ok((log, units))
}

/// Every acknowledged call is the log's record at its seq (when that seq is
/// still in a segment) and its unit is `done`; no seq acknowledged twice.
/// Returns how many acknowledged records were found in the log.
fn check_acks(root: &Path, calls: &[Call]) -> Result<usize, String> {
    let (log, units) = read_run(root)?;
    let (first, last) = match (log.keys().next(), log.keys().next_back()) {
        (Some(f), Some(l)) => (*f, *l),
        _ => return Err("the log is empty".into()),
    };
    if log.len() as u64 != last - first + 1 {
        return Err(format!("a gap in the log's seqs {first}..={last}"));
    }
    let mut seen: BTreeMap<u64, &Call> = BTreeMap::new();
    let mut in_log = 0;
    for c in calls {
        let Some(seq) = c.acked() else { continue };
        let unit = c.unit.as_deref().unwrap();
        if let Some(other) = seen.insert(seq, c) {
            return Err(format!(
                "seq {seq} acknowledged twice:\n  {}\n  {}",
                other.line(),
                c.line()
            ));
        }
        if seq > last {
            return Err(format!(
                "acknowledged {} is past the log's last seq {last}",
                c.line()
            ));
        }
        if seq >= first {
            in_log += 1;
            let want = Some((unit.to_string(), "done".to_string()));
            let have = log.get(&seq).cloned().flatten();
            if log.get(&seq) != Some(&want) {
                return Err(format!(
                    "acknowledged {} is not the log's record at seq {seq}, which is {}",
                    c.line(),
                    match have {
                        Some((u, s)) => format!("`unit {u} {s}`"),
                        None => "not a unit change".into(),
                    }
                ));
            }
        }
        if units.get(unit).map(String::as_str) != Some("done") {
            return Err(format!(
                "acknowledged {} but the run document has {unit} {:?}",
                c.line(),
                units.get(unit)
            ));
        }
    }
    Ok(in_log)
}

/// The checks of the module's doc on the run under `root` (`label` names it
/// in messages); `cmd` makes a writer's command for it. Returns problems.
fn check_run(
    root: &Path,
    label: &str,
    calls: &[Call],
    cmd: &dyn Fn() -> std::process::Command,
) -> Vec<String> {
    let mut problems = vec![];
    let o = cli_support::runlog(root, &["verify", RUN, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    if o.status.code() != Some(0) || !(v["integrity"] == "clean" || v["integrity"] == "torn_tail") {
        problems.push(format!(
            "{label}: `verify` exit {:?}: {}",
            o.status.code(),
            one_line(&text(&o))
        ));
    }
    if let Err(e) = check_acks(root, calls) {
        problems.push(format!("{label}: {e}"));
    }
    let o = cmd()
        .args(["unit", RUN, PROBE, "done", "--lock-timeout", "60"])
        .output()
        .unwrap();
    if o.status.code() != Some(0) {
        problems.push(format!(
            "{label} takes no new write: `unit {RUN} {PROBE} done` exit {:?}: {}",
            o.status.code(),
            one_line(&text(&o))
        ));
    } else if let Err(e) = check_acks(root, calls) {
        problems.push(format!("{label}, after a new write: {e}"));
    }
    problems
}

/// Every check of a finished trial: the shim's own, the calls' outcomes, the
/// two power-loss images, then the live run (last: its new write changes it).
fn check_trial(trial: &Trial, calls: &[Call]) -> Vec<String> {
    let mut problems = vec![];
    let bugs = trial.bugs();
    if !bugs.is_empty() {
        problems.push(format!("the shim saw what it does not model:\n{bugs}"));
    }
    for c in calls {
        if let Outcome::Unexpected(_) = c.outcome {
            problems.push(format!("an unexpected end: {}", c.line()));
        }
    }
    for (hints, label) in [
        (Hints::Lost, "the power-loss image (DURABLE and TAIL lost)"),
        (
            Hints::WrittenBack,
            "the power-loss image (DURABLE and TAIL written back)",
        ),
    ] {
        let img = trial.power_loss_image(hints);
        let root = img.path().to_path_buf();
        problems.extend(check_run(&root, label, calls, &|| cli_support::cmd(&root)));
    }
    problems.extend(check_run(&trial.root, "the run", calls, &|| {
        trial.cmd(None)
    }));
    problems
}

/// What a soak explored, and its failed trials.
struct Soak {
    name: &'static str,
    /// The seed (RUNLOG_FAULT_SOAK_SEED), as printed.
    seed: u64,
    /// Mixed into the seed: each soak draws its own faults from it.
    salt: u64,
    started: Instant,
    trials: usize,
    calls: usize,
    acked: usize,
    refused: usize,
    unknown: usize,
    fired: Vec<Fired>,
    failures: Vec<String>,
    /// Failed trials by what went wrong (a trial may count under several).
    classes: BTreeMap<&'static str, usize>,
}

/// What a problem of [`check_trial`] says went wrong, in a word or three.
fn class(problem: &str) -> &'static str {
    if problem.contains("acknowledged twice") {
        "a seq acknowledged twice"
    } else if problem.contains("is not the log's record")
        || problem.contains("but the run document has")
        || problem.contains("past the log's last seq")
    {
        "an acknowledged call lost"
    } else if problem.starts_with("the shim saw") {
        "the shim saw what it does not model"
    } else if problem.starts_with("an unexpected end") {
        "an unexpected exit"
    } else if problem.starts_with("the run") {
        "the run left unopenable or unwritable"
    } else {
        "a power-loss image unopenable or unwritable"
    }
}

impl Soak {
    fn new(name: &'static str, seed: u64, salt: u64) -> Soak {
        Soak {
            name,
            seed,
            salt,
            started: Instant::now(),
            trials: 0,
            calls: 0,
            acked: 0,
            refused: 0,
            unknown: 0,
            fired: vec![],
            failures: vec![],
            classes: BTreeMap::new(),
        }
    }

    /// Checks trial `n` (`what`: its set-up), counts it, and records a
    /// failure with its seed, faults and schedule.
    fn trial(&mut self, n: usize, what: &str, trial: &Trial, mut calls: Vec<Call>) {
        let fired = trial.fired();
        let problems = check_trial(trial, &calls);
        self.trials += 1;
        self.calls += calls.len();
        self.acked += calls.iter().filter(|c| c.acked().is_some()).count();
        self.refused += calls
            .iter()
            .filter(|c| c.unit.is_some() && matches!(c.outcome, Outcome::Failed(_)))
            .count();
        self.unknown += calls
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Unknown(_)))
            .count();
        if !problems.is_empty() {
            let mut classes: Vec<&str> = problems.iter().map(|p| class(p)).collect();
            classes.sort();
            classes.dedup();
            for c in classes {
                *self.classes.entry(c).or_insert(0) += 1;
            }
            calls.sort_by(|a, b| a.start.total_cmp(&b.start));
            let mut s = format!(
                "{}: seed {} trial {n} ({what}) FAILED:\n",
                self.name, self.seed
            );
            for p in &problems {
                let _ = writeln!(s, "- {p}");
            }
            let _ = writeln!(s, "faults fired in this trial:");
            for f in &fired {
                let by = calls
                    .iter()
                    .find(|c| c.pid == f.pid)
                    .map(|c| c.line())
                    .unwrap_or_else(|| "a process the harness did not record".into());
                let _ = writeln!(
                    s,
                    "  {}:{} on {} by pid {}: {by}",
                    f.kind.name(),
                    f.n,
                    f.file,
                    f.pid
                );
            }
            let _ = writeln!(s, "schedule (every process of the trial, by start):");
            for c in &calls {
                let _ = writeln!(s, "  {}", c.line());
            }
            if let Some(keep) = std::env::var_os("RUNLOG_FAULT_SOAK_KEEP") {
                let to = Path::new(&keep).join(format!(
                    "{}-seed-{}-trial-{n}",
                    self.name.replace(' ', "-"),
                    self.seed
                ));
                keep_copy(&trial.root, &to.join("root"));
                keep_copy(&trial.state, &to.join("state"));
                let _ = std::fs::write(to.join("report.txt"), &s);
                let _ = writeln!(
                    s,
                    "(the run and the shim's state are kept in {})",
                    to.display()
                );
            }
            skip_support::to_fd2(&format!("{s}\n"));
            self.failures.push(s);
        }
        self.fired.extend(fired);
    }

    fn page_loss(&self) -> usize {
        self.fired.iter().filter(|f| f.kind.loses_pages()).count()
    }

    /// The one-line summary (to stderr, uncaptured), then the verdict:
    /// failures first, then the floors on what was explored.
    fn finish(self, wanted: usize, extra: &str) {
        let counts = faultshim::by_kind(&self.fired);
        depth::explored(
            self.name,
            format_args!(
                "RUNLOG_FAULT_SOAK_SEED={}: {} trials, {} calls, {} faults fired ({}), {} acknowledged, \
             {} refused (exit 1), {} unknown outcomes{extra}; {} trials failed{}; {:.1} s",
                self.seed,
                self.trials,
                self.calls,
                self.fired.len(),
                faultshim::kinds_line(&counts),
                self.acked,
                self.refused,
                self.unknown,
                self.failures.len(),
                if self.classes.is_empty() {
                    String::new()
                } else {
                    format!(
                        " ({})",
                        self.classes
                            .iter()
                            .map(|(c, n)| format!("{c}: {n}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                },
                self.started.elapsed().as_secs_f64()
            ),
        );
        if !self.failures.is_empty() {
            panic!(
                "{} of {} trials failed ({:?}; seed {}: RUNLOG_FAULT_SOAK_SEED={} draws the \
                 same faults, not the same timing). The first:\n{}",
                self.failures.len(),
                self.trials,
                self.classes,
                self.seed,
                self.seed,
                self.failures[0]
            );
        }
        assert!(
            self.fired.len() >= wanted,
            "{}: only {} faults fired in {} trials (wanted {wanted})",
            self.name,
            self.fired.len(),
            self.trials
        );
        assert!(
            self.page_loss() * 4 >= wanted,
            "{}: only {} page-loss faults fired of {wanted}: the soak proved little about them",
            self.name,
            self.page_loss()
        );
        if wanted >= 50 {
            for kind in [Kind::EioDrop, Kind::EioClean] {
                let n = counts.get(&kind).copied().unwrap_or(0);
                assert!(
                    n * 10 >= wanted,
                    "{}: only {n} {} faults fired of {wanted}",
                    self.name,
                    kind.name()
                );
            }
        }
        assert!(self.acked > 0, "{}: nothing was acknowledged", self.name);
    }
}

/// Copies a directory tree as it is (`RUNLOG_FAULT_SOAK_KEEP`: a failed
/// trial's run and shim state, for a person to look at).
fn keep_copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = e.file_type().unwrap();
        if t.is_dir() {
            keep_copy(&e.path(), &to.join(e.file_name()));
        } else if t.is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Trials until `wanted` faults fired; at most ten times that many trials.
fn soak_loop(soak: &mut Soak, wanted: usize, mut one: impl FnMut(&mut Soak, usize, &mut Rng)) {
    let mut rng = Rng(soak.seed ^ soak.salt);
    let mut n = 0;
    while soak.fired.len() < wanted && n < 10 * wanted + 10 {
        one(soak, n, &mut rng);
        n += 1;
    }
}

/// Half the trials run on a slower disk: every fdatasync of the run takes
/// 0.1 to 1 ms more (FAULTSHIM_SYNC_DELAY_US), which widens the windows
/// between a writer's append and its sync. Says so for the trial's label.
fn slow_disk(trial: &mut Trial, rng: &mut Rng) -> String {
    if rng.one_in(2) {
        return String::new();
    }
    let us = 100 + rng.below(901);
    trial.set("SYNC_DELAY_US", &us.to_string());
    format!(", each fdatasync {us} us slower")
}

fn lib(test: &str) -> Option<PathBuf> {
    faultshim::shim(test)
}

/// Eight one-shot writers at a time (each `runlog unit` its own process),
/// one fault in flight at a time, half the trials with a compact loop.
#[test]
fn one_shot_writers_under_page_loss_and_other_faults_lose_no_acknowledged_checkpoint() {
    const NAME: &str = "cli_fault_soak one-shot";
    let Some(lib) = lib(NAME) else { return };
    const WRITERS: usize = 8;
    const CALLS: usize = 40;
    let wanted = faults_wanted();
    let mut soak = Soak::new(NAME, seed(), 0);
    soak_loop(&mut soak, wanted, |soak, n, rng| {
        let mut trial = Trial::new(&lib);
        trial.set("JITTER_US", "300");
        let slow = slow_disk(&mut trial, rng);
        let binary = rng.one_in(2);
        let compact = rng.one_in(2);
        init(&trial, CALLS, binary);
        let token = Token::new(rng.next());
        let next = AtomicUsize::new(0);
        let writers_done = AtomicBool::new(false);
        let t0 = Instant::now();
        let calls = std::thread::scope(|s| {
            let compactor = compact.then(|| {
                s.spawn(|| {
                    let mut calls = vec![];
                    while !writers_done.load(Ordering::SeqCst) {
                        let plan = token.take(2);
                        calls.push(run(
                            &trial,
                            t0,
                            plan,
                            &["compact", RUN, "--lock-timeout", "60"],
                            None,
                        ));
                        token.release(plan);
                        std::thread::sleep(Duration::from_millis(token.below(30)));
                    }
                    calls
                })
            });
            let mut calls = one_shot_writers(&trial, t0, &next, &token, (WRITERS, CALLS));
            writers_done.store(true, Ordering::SeqCst);
            if let Some(c) = compactor {
                calls.extend(c.join().unwrap());
            }
            calls
        });
        let what = format!(
            "{} codec{slow}, {}",
            if binary { "binary" } else { "jsonl" },
            if compact {
                "a compact loop beside"
            } else {
                "no compaction"
            }
        );
        soak.trial(n, &what, &trial, calls);
    });
    soak.finish(wanted, "");
}

/// `serve RUN` under the shim, its plan a fault at one of its first six
/// segment fdatasyncs; when it ends (a fault stops it) another starts, with
/// another plan. Eight callers hand it `unit` changes (and apply them
/// themselves while no server listens).
#[test]
fn a_server_under_page_loss_restarted_loses_no_acknowledged_change() {
    const NAME: &str = "cli_fault_soak serve";
    let Some(lib) = lib(NAME) else { return };
    const WRITERS: usize = 8;
    const CALLS: usize = 48;
    let wanted = (faults_wanted() / 4).max(12);
    let mut soak = Soak::new(NAME, seed(), 0x5e47e);
    let mut servers = 0;
    soak_loop(&mut soak, wanted, |soak, n, rng| {
        let mut trial = Trial::new(&lib);
        let slow = slow_disk(&mut trial, rng);
        let binary = rng.one_in(2);
        init(&trial, CALLS, binary);
        let next = AtomicUsize::new(0);
        let writers_done = AtomicBool::new(false);
        let t0 = Instant::now();
        let mut server_rng = Rng(rng.next());
        let (calls, started) = std::thread::scope(|s| {
            let server = s.spawn(|| {
                let mut calls = vec![];
                while !writers_done.load(Ordering::SeqCst) {
                    let plan = Plan {
                        kind: draw_kind(&mut server_rng),
                        n: 1 + server_rng.below(6) as u32,
                    };
                    calls.push(serve_once(&trial, t0, plan, &writers_done));
                }
                calls
            });
            let writers: Vec<_> = (0..WRITERS)
                .map(|_| {
                    s.spawn(|| {
                        let mut calls = vec![];
                        loop {
                            let i = next.fetch_add(1, Ordering::SeqCst);
                            if i >= CALLS {
                                return calls;
                            }
                            let unit = format!("u{i}");
                            let start = ms(t0);
                            let child = trial
                                .cmd(None)
                                .args(["unit", RUN, &unit, "done", "--lock-timeout", "60"])
                                .stdout(Stdio::piped())
                                .stderr(Stdio::piped())
                                .spawn()
                                .unwrap();
                            let pid = child.id();
                            let o = child.wait_with_output().unwrap();
                            calls.push(Call {
                                what: format!("unit {RUN} {unit} done"),
                                unit: Some(unit),
                                pid,
                                plan: None,
                                start,
                                end: ms(t0),
                                outcome: outcome(&o, None, true, true),
                            });
                        }
                    })
                })
                .collect();
            let mut calls: Vec<Call> = writers
                .into_iter()
                .flat_map(|w| w.join().unwrap())
                .collect();
            writers_done.store(true, Ordering::SeqCst);
            let served = server.join().unwrap();
            let started = served.len();
            calls.extend(served);
            (calls, started)
        });
        servers += started;
        let what = format!(
            "{} codec{slow}, {started} servers",
            if binary { "binary" } else { "jsonl" }
        );
        soak.trial(n, &what, &trial, calls);
    });
    soak.finish(wanted, &format!(", {servers} servers started"));
}

/// One server with `plan`, until it ends or the writers are done (then
/// SIGTERM).
fn serve_once(trial: &Trial, t0: Instant, plan: Plan, writers_done: &AtomicBool) -> Call {
    let start = ms(t0);
    let mut child = trial
        .cmd(Some(plan))
        .args(["serve", RUN, "--lock-timeout", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Its first line says it listens (or it ended before: the outcome says why).
    let mut line = String::new();
    let _ = BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if writers_done.load(Ordering::SeqCst) {
            // SAFETY: `kill` of our own child's pid with a valid signal number.
            #[allow(unsafe_code)]
            unsafe {
                libc::kill(pid as i32, libc::SIGTERM)
            };
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let o = child.wait_with_output().unwrap();
    let mut out = outcome(&o, Some(plan), false, false);
    if let Outcome::Ok = out
        && !line.contains("serving run r at")
    {
        out = Outcome::Unexpected(format!("serve said {line:?}"));
    }
    Call {
        what: format!("serve {RUN}"),
        unit: None,
        pid,
        plan: Some(plan),
        start,
        end: ms(t0),
        outcome: out,
    }
}

/// A long-lived `apply RUN` (op lines on a pipe, one ack each) taking turns
/// with six one-shot writers waiting for the writer lock; the one fault in
/// flight is given to either.
#[test]
fn a_long_lived_apply_beside_one_shot_writers_under_faults_loses_no_acknowledged_change() {
    const NAME: &str = "cli_fault_soak apply";
    let Some(lib) = lib(NAME) else { return };
    const WRITERS: usize = 6;
    const CALLS: usize = 48;
    let wanted = (faults_wanted() / 4).max(12);
    let mut soak = Soak::new(NAME, seed(), 0xa991);
    soak_loop(&mut soak, wanted, |soak, n, rng| {
        let mut trial = Trial::new(&lib);
        trial.set("JITTER_US", "300");
        let slow = slow_disk(&mut trial, rng);
        let binary = rng.one_in(2);
        init(&trial, CALLS, binary);
        let token = Token::new(rng.next());
        let next = AtomicUsize::new(0);
        let t0 = Instant::now();
        let calls = std::thread::scope(|s| {
            let applier = s.spawn(|| {
                let mut calls = vec![];
                while next.load(Ordering::SeqCst) < CALLS {
                    let plan = token.take(3);
                    calls.extend(apply_once(&trial, t0, plan, &next, CALLS, &token));
                    token.release(plan);
                    std::thread::sleep(Duration::from_millis(token.below(10)));
                }
                calls
            });
            let mut calls = one_shot_writers(&trial, t0, &next, &token, (WRITERS, CALLS));
            calls.extend(applier.join().unwrap());
            calls
        });
        let what = format!("{} codec{slow}", if binary { "binary" } else { "jsonl" });
        soak.trial(n, &what, &trial, calls);
    });
    soak.finish(wanted, "");
}

/// One `apply RUN` process: up to six op lines, in bursts of one to three,
/// each burst's acks read before the next; then stdin closed.
fn apply_once(
    trial: &Trial,
    t0: Instant,
    plan: Option<Plan>,
    next: &AtomicUsize,
    units: usize,
    token: &Token,
) -> Vec<Call> {
    let start = ms(t0);
    let mut child: Child = trial
        .cmd(plan)
        .args(["apply", RUN, "--lock-timeout", "60"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut calls: Vec<Call> = vec![];
    let mut ended: Option<String> = None;
    let lines = 1 + token.below(6) as usize;
    let mut sent = 0;
    while sent < lines && ended.is_none() {
        let burst = (1 + token.below(3) as usize).min(lines - sent);
        let mut batch = vec![];
        for _ in 0..burst {
            let i = next.fetch_add(1, Ordering::SeqCst);
            if i >= units {
                break;
            }
            let unit = format!("u{i}");
            let op = format!(r#"{{"op":"unit","unit":"{unit}","status":"done"}}"#);
            let written = stdin
                .write_all(format!("{op}\n").as_bytes())
                .and_then(|()| stdin.flush());
            batch.push((unit, op, ms(t0)));
            if let Err(e) = written {
                ended = Some(format!("writing its stdin: {e}"));
                break;
            }
        }
        if batch.is_empty() {
            break;
        }
        sent += batch.len();
        for (unit, op, at) in batch {
            let mut ack = String::new();
            let got = if ended.is_none() {
                stdout.read_line(&mut ack)
            } else {
                Ok(0)
            };
            let outcome = match got {
                Ok(0) | Err(_) => {
                    ended.get_or_insert_with(|| "apply ended".into());
                    Outcome::Unknown(format!("no ack ({})", ended.as_deref().unwrap()))
                }
                Ok(_) => {
                    let v: serde_json::Value = serde_json::from_str(&ack).unwrap_or_default();
                    match (v["seq"].as_u64(), v["code"].as_u64()) {
                        (Some(seq), _) => Outcome::Acked(seq),
                        (None, Some(1)) => Outcome::Failed(ack.trim().to_string()),
                        _ => Outcome::Unexpected(format!("ack {ack:?}")),
                    }
                }
            };
            calls.push(Call {
                what: format!("apply {RUN} < {op}"),
                unit: Some(unit),
                pid,
                plan,
                start: at,
                end: ms(t0),
                outcome,
            });
        }
    }
    drop(stdin);
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stdout, &mut rest);
    let status = child.wait().unwrap();
    let mut err = String::new();
    let _ = std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err);
    let o = Output {
        status,
        stdout: rest.into_bytes(),
        stderr: err.into_bytes(),
    };
    // The process itself: exit 0, 1 after a failure, or its plan's SIGKILL.
    calls.push(Call {
        what: format!("apply {RUN} (the process; {sent} lines sent)"),
        unit: None,
        pid,
        plan,
        start,
        end: ms(t0),
        outcome: outcome(&o, plan, false, false),
    });
    calls
}

/// The shim's model, checked with `dd` writing whole pages of a file named
/// like a segment: a successful fsync copies what was written into the
/// shadow; `eio_drop` fails the sync and puts the shadow's bytes back in the
/// file; `eio_clean` fails it and leaves the bytes, which no later sync makes
/// durable until they are written again; `enospc_write` writes nothing;
/// `kill_before_sync` dies with nothing synced; and a change the shim did not
/// see is reported as a bug of the shim.
#[test]
fn the_fault_shim_keeps_what_fsyncs_made_durable_and_loses_pages_as_told() {
    const NAME: &str = "cli_fault_soak shim model";
    let Some(lib) = lib(NAME) else { return };
    let trial = Trial::new(&lib);
    let seg = trial.root.join("seg-00000000000000000001.log");
    const PAGE: usize = 4096;
    let pages = |cs: &[u8]| cs.iter().flat_map(|&c| vec![c; PAGE]).collect::<Vec<u8>>();
    // A file's pages as letters (`0` a page of zeros, `?` a mixed one).
    let sketch = |b: Vec<u8>| -> String {
        b.chunks(PAGE)
            .map(|p| match p[0] {
                _ if p.len() < PAGE || p.iter().any(|&x| x != p[0]) => '?',
                0 => '0',
                c => c as char,
            })
            .collect()
    };
    // `dd` under the shim with `plan`: page `at` becomes `c`, then `conv`'s sync.
    let dd = |plan: Option<Plan>, c: u8, at: usize, conv: &str| {
        let src = trial.state.join(format!("src-{}", c as char));
        std::fs::write(&src, pages(&[c])).unwrap();
        let mut cmd = std::process::Command::new("dd");
        cmd.arg(format!("if={}", src.display()))
            .arg(format!("of={}", seg.display()))
            .args(["bs=4096", "count=1", "status=none"])
            .arg(format!("seek={at}"))
            .arg(format!("conv=notrunc,{conv}"));
        trial.under_shim(cmd, plan).output().unwrap()
    };
    let file = || sketch(std::fs::read(&seg).unwrap());
    let shadow = || sketch(trial.shadow_of(&seg).unwrap_or_default());
    let both = || format!("file {} shadow {}", file(), shadow());
    let plan = |kind| Some(Plan { kind, n: 1 });
    let ok = |o: &Output, what: &str| assert!(o.status.success(), "{what}: {}", text(o));
    let failed = |o: &Output, what: &str| {
        assert_eq!(o.status.code(), Some(1), "{what}: {}", text(o));
    };

    ok(&dd(None, b'a', 0, "fsync"), "a synced");
    assert_eq!(both(), "file a shadow a");

    // GNU dd answers a failed fdatasync with an fsync, which succeeds: the
    // fsyncgate sequence itself. It makes the size durable, not the page.
    failed(&dd(plan(Kind::EioDrop), b'b', 1, "fdatasync"), "b dropped");
    assert_eq!(
        both(),
        "file a0 shadow a0",
        "the dropped page reads as the disk has it"
    );
    failed(
        &dd(plan(Kind::EioClean), b'c', 1, "fdatasync"),
        "c marked clean",
    );
    assert_eq!(
        both(),
        "file ac shadow a0",
        "a page marked clean reads new, and the fsync after the failure does not write it"
    );
    ok(&dd(None, b'd', 2, "fdatasync"), "d synced");
    assert_eq!(file(), "acd");
    assert_eq!(
        shadow(),
        "a0d",
        "a later sync does not write a page marked clean"
    );
    ok(
        &dd(None, b'e', 1, "fsync"),
        "e written over the page marked clean",
    );
    assert_eq!(shadow(), "aed", "a page written again is synced again");

    failed(&dd(plan(Kind::EnospcWrite), b'f', 0, "fsync"), "f refused");
    assert_eq!(both(), "file aed shadow aed");

    let o = dd(plan(Kind::KillBeforeSync), b'g', 0, "fsync");
    assert_eq!(o.status.signal(), Some(libc::SIGKILL), "g: {}", text(&o));
    assert_eq!(both(), "file ged shadow aed");
    let o = dd(plan(Kind::KillAfterSync), b'h', 3, "fsync");
    assert_eq!(o.status.signal(), Some(libc::SIGKILL), "h: {}", text(&o));
    assert_eq!(both(), "file gedh shadow gedh");

    let kinds: Vec<Kind> = trial.fired().iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [
            Kind::EioDrop,
            Kind::EioClean,
            Kind::EnospcWrite,
            Kind::KillBeforeSync,
            Kind::KillAfterSync
        ]
    );
    assert_eq!(trial.bugs(), "", "nothing the shim does not model so far");

    // A write the shim did not see (this process is not under it) is found
    // by the next sync's check of the pages it does not copy.
    std::os::unix::fs::FileExt::write_all_at(
        &std::fs::OpenOptions::new().write(true).open(&seg).unwrap(),
        &pages(b"x"),
        PAGE as u64,
    )
    .unwrap();
    ok(&dd(None, b'i', 4, "fsync"), "i synced");
    let bugs = trial.bugs();
    assert!(
        bugs.contains("page 1 of") && bugs.contains("no write the shim saw"),
        "the unseen write is reported: {bugs:?}"
    );
}

/// Starts `unit RUN unit done` under the shim with `plan`, to be held
/// before its first exclusive flock of `lock` until the file `go` exists.
fn held_unit(trial: &Trial, plan: Option<Plan>, lock: &str, go: &Path, unit: &str) -> Child {
    trial
        .cmd(plan)
        .env(
            "FAULTSHIM_HOLD",
            format!("before_flock:{lock}:{}", go.display()),
        )
        .args(["unit", RUN, unit, "done", "--lock-timeout", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The [`Call`] of a held process, once it ended.
fn held_call(
    child: Child,
    t0: Instant,
    start: f64,
    plan: Option<Plan>,
    unit: &str,
    held: &str,
) -> Call {
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    Call {
        what: format!("unit {RUN} {unit} done ({held})"),
        unit: Some(unit.into()),
        pid,
        plan,
        start,
        end: ms(t0),
        outcome: outcome(&o, plan, true, false),
    }
}

/// Prints a held schedule, runs every check of a trial on it, and fails
/// with the schedule.
fn check_schedule(name: &str, binary: bool, trial: &Trial, calls: &[Call]) {
    let codec = if binary { "binary" } else { "jsonl" };
    let schedule = calls
        .iter()
        .map(|c| format!("\n  {}", c.line()))
        .collect::<String>();
    skip_support::to_fd2(&format!("{name} ({codec} codec):{schedule}\n"));
    let problems = check_trial(trial, calls);
    assert!(
        problems.is_empty(),
        "{name} ({codec} codec):\n- {}\nschedule:{schedule}",
        problems.join("\n- ")
    );
}

/// The issue's schedule, held in place by the shim: writer A appends seq 3
/// and stops before the sync lock; writer B appends seq 4, its fdatasync
/// fails and the segment's unsynced pages are dropped (A's record too);
/// writer C writes its record and syncs; then A goes on. A must not be
/// acknowledged at seq 3 unless seq 3 is its record, durable; and every
/// acknowledged call must survive in the power-loss image.
#[test]
fn the_issue_48_schedule_never_acknowledges_a_record_that_a_failed_fdatasync_dropped() {
    const NAME: &str = "cli_fault_soak issue 48 schedule";
    let Some(lib) = lib(NAME) else { return };
    for binary in [false, true] {
        let trial = Trial::new(&lib);
        init(&trial, 4, binary);
        let t0 = Instant::now();
        let mut calls = vec![unit_call(&trial, t0, None, "u0")];
        assert!(
            matches!(calls[0].outcome, Outcome::Acked(2)),
            "{}",
            calls[0].line()
        );
        // A: appended, then held before the sync lock.
        let go = trial.state.join("go");
        let a_start = ms(t0);
        let a = held_unit(&trial, None, "SYNC", &go, "u1");
        trial.wait_held("SYNC", a.id());
        // B: its fdatasync fails and drops the pages (A's record's too).
        let plan = Plan {
            kind: Kind::EioDrop,
            n: 1,
        };
        let b = unit_call(&trial, t0, Some(plan), "u2");
        assert!(matches!(b.outcome, Outcome::Failed(_)), "B: {}", b.line());
        let fired = trial.fired();
        assert_eq!(fired.len(), 1, "B's fault fired once: {fired:?}");
        assert_eq!(fired[0].pid, b.pid);
        // C: opens over the dropped pages, writes, syncs.
        let c = unit_call(&trial, t0, None, "u3");
        // A goes on.
        std::fs::write(&go, b"").unwrap();
        let a = held_call(a, t0, a_start, None, "u1", "held before the sync lock");
        calls.extend([a, b, c]);
        check_schedule(NAME, binary, &trial, &calls);
    }
}

/// Found by the one-shot soak (seed 2, trials 3 and 6): writer C replays the
/// log without the writer lock and reads writer X's record, not yet synced;
/// X's fdatasync fails and the page is dropped (the record reads as zeros);
/// C takes the writer lock, finds the sync state failed, and copies the
/// segment (FORMAT.md §5.5 step 4) to make the records it replayed durable.
/// Whatever C does, the run must stay openable, and C's acknowledged record
/// must be in it.
#[test]
fn a_record_replayed_then_dropped_by_a_failed_fdatasync_leaves_the_run_openable() {
    const NAME: &str = "cli_fault_soak replayed then dropped";
    let Some(lib) = lib(NAME) else { return };
    for binary in [false, true] {
        let trial = Trial::new(&lib);
        init(&trial, 4, binary);
        let t0 = Instant::now();
        let mut calls = vec![unit_call(&trial, t0, None, "u0")];
        assert!(
            matches!(calls[0].outcome, Outcome::Acked(2)),
            "{}",
            calls[0].line()
        );
        // X: appends seq 3, is held before the sync lock; its fdatasync will
        // fail and drop the page.
        let (x_go, c_go) = (trial.state.join("x-go"), trial.state.join("c-go"));
        let plan = Plan {
            kind: Kind::EioDrop,
            n: 1,
        };
        let x_start = ms(t0);
        let x = held_unit(&trial, Some(plan), "SYNC", &x_go, "u1");
        trial.wait_held("SYNC", x.id());
        // C: replays without the lock (reading seq 3), held before the
        // writer lock.
        let c_start = ms(t0);
        let c = held_unit(&trial, None, "LOCK", &c_go, "u2");
        trial.wait_held("LOCK", c.id());
        std::fs::write(&x_go, b"").unwrap();
        let x = held_call(
            x,
            t0,
            x_start,
            Some(plan),
            "u1",
            "held before the sync lock",
        );
        assert!(matches!(x.outcome, Outcome::Failed(_)), "X: {}", x.line());
        assert_eq!(trial.fired().len(), 1, "X's fault fired");
        std::fs::write(&c_go, b"").unwrap();
        let c = held_call(c, t0, c_start, None, "u2", "held before the writer lock");
        calls.extend([x, c]);
        check_schedule(NAME, binary, &trial, &calls);
    }
}

/// Found by the one-shot soak on the fixed protocol (seed 9, trials 483 and
/// 785): writer C replays without the writer lock and reads writer W's record
/// at seq 3; W's fdatasync fails and the page is dropped; writer D writes
/// another, shorter record as seq 3 over the dropped bytes and syncs it; C
/// takes the writer lock and catches up from where its replay ended (past
/// D's record, in zeros), so it appends seq 4 after a gap. Whatever C does,
/// every acknowledged record must stay the log's record at its seq, in the
/// run and after a power loss.
#[test]
fn a_record_replayed_then_dropped_and_written_again_shorter_loses_no_acknowledged_checkpoint() {
    const NAME: &str = "cli_fault_soak replayed, dropped, written again";
    let Some(lib) = lib(NAME) else { return };
    let long = "w-a-unit-whose-name-is-longer-than-the-others";
    for binary in [false, true] {
        let trial = Trial::new(&lib);
        let names: Vec<String> = ["u0", long, "c", "d"].map(String::from).to_vec();
        init_units(&trial, &names, binary);
        let t0 = Instant::now();
        let mut calls = vec![unit_call(&trial, t0, None, "u0")];
        assert!(
            matches!(calls[0].outcome, Outcome::Acked(2)),
            "{}",
            calls[0].line()
        );
        // W: appends seq 3 (long), held before the sync lock; its fdatasync
        // will fail and drop the page.
        let (w_go, c_go) = (trial.state.join("w-go"), trial.state.join("c-go"));
        let plan = Plan {
            kind: Kind::EioDrop,
            n: 1,
        };
        let w_start = ms(t0);
        let w = held_unit(&trial, Some(plan), "SYNC", &w_go, long);
        trial.wait_held("SYNC", w.id());
        // C: replays without the lock (reading W's seq 3), held before the
        // writer lock.
        let c_start = ms(t0);
        let c = held_unit(&trial, None, "LOCK", &c_go, "c");
        trial.wait_held("LOCK", c.id());
        std::fs::write(&w_go, b"").unwrap();
        let w = held_call(
            w,
            t0,
            w_start,
            Some(plan),
            long,
            "held before the sync lock",
        );
        assert!(matches!(w.outcome, Outcome::Failed(_)), "W: {}", w.line());
        assert_eq!(trial.fired().len(), 1, "W's fault fired");
        // D: writes its shorter seq 3 where W's was, and syncs it.
        let d = unit_call(&trial, t0, None, "d");
        std::fs::write(&c_go, b"").unwrap();
        let c = held_call(c, t0, c_start, None, "c", "held before the writer lock");
        calls.extend([w, d, c]);
        check_schedule(NAME, binary, &trial, &calls);
    }
}
