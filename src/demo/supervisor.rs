//! The demo's supervisor: plans a run, starts a worker process, SIGKILLs it at
//! random moments and restarts it, then checks the store against the plan on its
//! own, without trusting the worker.

use super::check::{Acked, Check, check};
use super::plan::{Rng, deps_of, kill_points, unit_name};
use super::protocol::Line;
use runlog::engine::{self, RealFs};
use runlog::remote::{Policy, Remote, RemoteConfig, RemoteError, restore};
use runlog::run::{InitSpec, RunError, Runs, Transition};
use serde::Serialize;
use std::collections::HashSet;
use std::io::{BufRead, BufReader, IsTerminal};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The run id the demo uses.
pub const DEMO_RUN: &str = "demo";

/// What the demo is asked to do.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Units in the plan.
    pub units: usize,
    /// Worker threads.
    pub workers: usize,
    /// Times the worker is killed.
    pub kills: usize,
    /// Simulated work per unit, in microseconds.
    pub work_us: u64,
    /// Seed for kill timing (default: from the clock).
    pub seed: Option<u64>,
    /// Runs root to use (default: a fresh temporary directory, removed at the end).
    pub dir: Option<PathBuf>,
    /// Draw a progress bar on stderr (only when stderr is a terminal).
    pub progress: bool,
    /// Ship the run to this remote (`s3://bucket/prefix`, `file:///dir`) under
    /// the `sync` policy: a transition is acknowledged once the remote holds it.
    /// The remote must hold no run yet.
    pub remote: Option<String>,
    /// With `remote`: at the middle kill the host is lost. The supervisor
    /// deletes the worker's run directory, restores the run from the remote
    /// into a fresh runs root (a new host), and the worker finishes there.
    pub lose_host: bool,
    /// Serve the web view of the run while the demo runs (`runlog demo --ui`)
    /// and print its URL on stderr; it ends with the demo.
    pub ui: bool,
}

/// The host lost mid-run (`--lose-host`), and the run restored on a new one.
#[derive(Debug, Clone, Serialize)]
pub struct HostLoss {
    /// The kill (1-based) after which the host was lost.
    pub after_kill: usize,
    /// The highest seq acknowledged before the loss.
    pub acked_seq: u64,
    /// The run directory deleted (the lost host's copy).
    pub lost_dir: String,
    /// The runs root of the new host.
    pub new_root: String,
    /// The remote restored from.
    pub remote: String,
    /// The last seq the restore brought back.
    pub restored_seq: u64,
    /// Chunks downloaded.
    pub chunks: usize,
    /// Bytes downloaded.
    pub bytes: u64,
    /// Time the restore took, in ms.
    pub restore_ms: f64,
}

/// One worker restart after a kill.
#[derive(Debug, Clone, Serialize)]
pub struct Recovery {
    /// Units done (acknowledged) when the kill came.
    pub killed_at_units: usize,
    /// Time the restarted worker took to open the run and replay its log, in ms.
    pub recovery_ms: f64,
    /// Records it replayed.
    pub replayed: u64,
    /// From spawning the process to its first line, in ms (includes process start).
    pub restart_ms: f64,
}

/// The demo's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct DemoReport {
    /// Units in the plan.
    pub units: usize,
    /// Units done exactly once with the right result.
    pub done: usize,
    /// Acknowledged transitions missing from the log.
    pub lost: usize,
    /// Units committed more than once.
    pub duplicates: usize,
    /// Kills survived.
    pub crashes: usize,
    /// Kills asked for (`--kills`); more than `crashes` when the worker
    /// finished before a kill point was reached, which the summary says.
    pub kills_asked: usize,
    /// Worker threads.
    pub workers: usize,
    /// Transitions acknowledged as durable.
    pub acked: usize,
    /// Acknowledged transitions per second of worker time.
    pub transitions_per_sec: f64,
    /// fsyncs the workers issued (as last reported by each).
    pub fsyncs: u64,
    /// Acknowledged transitions per fsync.
    pub avg_group: f64,
    /// Each restart after a kill.
    pub recoveries: Vec<Recovery>,
    /// Seconds from the first worker start to the last worker's exit.
    pub elapsed_s: f64,
    /// The seed of the kill timing.
    pub seed: u64,
    /// The independent check.
    pub check: Check,
    /// Where the run lives (only when kept).
    pub dir: Option<String>,
    /// The remote the run shipped to (`--remote`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// The host loss (`--lose-host`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_loss: Option<HostLoss>,
}

impl DemoReport {
    /// True when every unit was done exactly once and nothing acknowledged was lost.
    pub fn ok(&self) -> bool {
        self.check.ok()
    }
}

fn err(s: impl Into<String>) -> RunError {
    RunError::Invalid(s.into())
}

struct Incarnation {
    child: Child,
    lines: std::sync::mpsc::Receiver<Line>,
    spawned: Instant,
}

fn spawn_worker(exe: &Path, root: &Path, o: &DemoOptions) -> Result<Incarnation, RunError> {
    let mut child = Command::new(exe)
        .arg("demo-worker")
        .arg("--dir")
        .arg(root)
        .args([
            "--run",
            DEMO_RUN,
            "--workers",
            &o.workers.to_string(),
            "--work-us",
            &o.work_us.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| RunError::Io {
            op: "start demo worker",
            path: exe.to_path_buf(),
            source: e,
        })?;
    let out = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(out);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                // A line cut short by the kill has no newline: it is not a report.
                Ok(n) if n > 0 && buf.ends_with(b"\n") => {
                    if let Some(l) = std::str::from_utf8(&buf[..n - 1])
                        .ok()
                        .and_then(Line::parse)
                        && tx.send(l).is_err()
                    {
                        return;
                    }
                }
                _ => return,
            }
        }
    });
    Ok(Incarnation {
        child,
        lines: rx,
        spawned: Instant::now(),
    })
}

fn progress_bar(o: &DemoOptions) -> indicatif::ProgressBar {
    let show =
        o.progress && std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(o.units as u64);
    pb.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} units  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    pb
}

/// How often the supervisor looks for Ctrl-C while it waits for the worker.
const INTERRUPT_POLL: Duration = Duration::from_millis(50);

/// The error `run_demo` returns after Ctrl-C (its temporary root removed).
pub fn is_interrupted(e: &RunError) -> bool {
    matches!(e, RunError::Invalid(m) if m == INTERRUPTED)
}

const INTERRUPTED: &str = "demo interrupted (Ctrl-C)";

/// Runs the demo. `exe` is the `runlog` binary to start workers with. A
/// temporary runs root is removed at the end, after Ctrl-C and after an
/// error too; it is kept (and named in the report) only when the check fails.
pub fn run_demo(o: &DemoOptions, exe: &Path) -> Result<DemoReport, RunError> {
    if o.units == 0 || o.workers == 0 {
        return Err(err("--units and --workers must be at least 1"));
    }
    if o.kills > super::plan::max_kills(o.units) {
        return Err(err(format!(
            "--kills {} needs at least {} units (--units {}): each kill falls at a distinct count of units done, between the first and the last",
            o.kills,
            o.kills + 2,
            o.units
        )));
    }
    if o.lose_host && o.remote.is_none() {
        return Err(err(
            "--lose-host needs --remote URL: the run is restored from there on the new host",
        ));
    }
    if o.lose_host && o.kills == 0 {
        return Err(err(
            "--lose-host needs at least one kill (--kills): the host is lost after one",
        ));
    }
    let seed = o.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    if let Some(root) = &o.dir {
        return run_demo_in(o, exe, root, seed, false);
    }
    let root = std::env::temp_dir().join(format!("runlog-demo-{}-{seed:x}", std::process::id()));
    // Ctrl-C sets a flag the supervisor polls, so it can kill its worker and
    // remove the temporary root before it exits.
    crate::sys::install_sigint_handler();
    let r = run_demo_in(o, exe, &root, seed, true);
    if !matches!(&r, Ok(rep) if !rep.ok()) {
        let _ = std::fs::remove_dir_all(&root);
    }
    r
}

/// `--ui`: the web view of the demo's run, on a free loopback port, served
/// on a thread of its own until the demo ends.
fn start_ui(root: &Path) -> Result<(), RunError> {
    let bound = crate::ui::bind(
        &Runs::new(root),
        &crate::ui::UiOptions {
            listen: crate::ui::DEFAULT_LISTEN,
            token: None,
            run: Some(DEMO_RUN.into()),
        },
    )?;
    eprintln!(
        "runlog demo: watch the run at {} (the view ends with the demo)",
        bound.url()
    );
    bound.serve_in_background()
}

fn interrupted() -> bool {
    crate::sys::sigint_received()
}

/// Makes the demo's run under `root`: the plan's units on their dependency
/// tree, shipping to `o.remote` when asked, its web view started when asked.
/// Returns the plan.
fn create_demo_run(o: &DemoOptions, runs: &Runs, root: &Path) -> Result<Vec<String>, RunError> {
    let plan: Vec<String> = (1..=o.units).map(unit_name).collect();
    let deps = (1..=o.units)
        .filter(|&i| i >= 2)
        .map(|i| (unit_name(i), deps_of(i)))
        .collect();
    drop(runs.init(InitSpec {
        id: DEMO_RUN.into(),
        task: format!(
            "demo: {} units on a dependency tree, {} workers",
            o.units, o.workers
        ),
        units: plan.clone(),
        deps,
        ..InitSpec::default()
    })?);
    if let Some(url) = &o.remote {
        attach(&runs.run_dir(DEMO_RUN)?, url)?;
    }
    if o.ui {
        start_ui(root)?;
    }
    Ok(plan)
}

/// What the supervisor learns from its workers' lines, across incarnations.
struct Watch {
    kills: std::iter::Peekable<std::vec::IntoIter<usize>>,
    rng: Rng,
    pb: indicatif::ProgressBar,
    acked: Vec<Acked>,
    done_units: HashSet<String>,
    /// Units done as the store says: the last worker's count at its start
    /// plus the done acks since. A kill can swallow a done unit's ack, so
    /// counting acks alone could never reach a late kill point.
    done_now: usize,
    recoveries: Vec<Recovery>,
    /// The kill point of the worker killed last, until its successor is ready.
    pending_kill: Option<usize>,
    finished: bool,
}

/// How one worker's life ended.
struct Ended {
    killed: bool,
    /// The fdatasyncs it reported last.
    fsyncs: u64,
}

impl Watch {
    /// Reads worker `inc`'s lines until it exits, or until this kills it at
    /// the next kill point. `temp`: a Ctrl-C stops the demo.
    fn worker(&mut self, inc: &mut Incarnation, temp: bool) -> Result<Ended, RunError> {
        let mut fsyncs = 0;
        loop {
            let line = match inc.lines.recv_timeout(INTERRUPT_POLL) {
                Ok(l) => l,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if temp && interrupted() {
                        let _ = inc.child.kill();
                        let _ = inc.child.wait();
                        self.pb.finish_and_clear();
                        return Err(err(INTERRUPTED));
                    }
                    continue;
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Ok(Ended {
                        killed: false,
                        fsyncs,
                    });
                }
            };
            match line {
                Line::Ready {
                    recovery_us,
                    replayed,
                    done,
                } => {
                    if let Some(at) = self.pending_kill.take() {
                        self.recoveries.push(Recovery {
                            killed_at_units: at,
                            recovery_ms: recovery_us as f64 / 1000.0,
                            replayed,
                            restart_ms: inc.spawned.elapsed().as_secs_f64() * 1000.0,
                        });
                    }
                    self.done_now = self.done_now.max(done);
                    self.pb.set_position(done as u64);
                }
                Line::Ack {
                    seq,
                    unit,
                    status,
                    fsyncs: f,
                } => {
                    fsyncs = f;
                    if status == "done" {
                        if self.done_units.insert(unit.clone()) {
                            self.done_now += 1;
                        }
                        self.pb.set_position(self.done_now as u64);
                    }
                    self.acked.push(Acked { seq, unit, status });
                    if self.kills.peek().is_some_and(|&k| self.done_now >= k) {
                        let at = self.kills.next().unwrap_or_default();
                        // A little later, so the kill lands mid-transition, not between.
                        std::thread::sleep(Duration::from_micros(self.rng.range(0, 3000)));
                        let _ = inc.child.kill();
                        self.pending_kill = Some(at);
                        self.pb
                            .set_message(format!("killed {} time(s)", self.recoveries.len() + 1));
                        return Ok(Ended {
                            killed: true,
                            fsyncs,
                        });
                    }
                }
                Line::Finished { fsyncs: f } => {
                    fsyncs = f;
                    self.finished = true;
                }
            }
        }
    }
}

/// Every record of the demo's log, decoded. The check reads the store
/// itself: the log (every record ever appended; the demo's log stays below
/// the auto-compaction threshold) and the document.
fn read_demo_log(runs: &Runs) -> Result<Vec<(u64, runlog::run::Change)>, RunError> {
    let dir = runs.run_dir(DEMO_RUN)?;
    let mut raw: Vec<(u64, Vec<u8>)> = Vec::new();
    let codec = engine::Reader::new(&RealFs, &dir)
        .records(|seq, payload| raw.push((seq, payload.to_vec())))
        .map_err(|e| RunError::Engine {
            id: DEMO_RUN.into(),
            source: e,
        })?
        .ok_or_else(|| err("the demo log has no readable segment"))?;
    let mut log = Vec::with_capacity(raw.len());
    for (seq, payload) in raw {
        let t = codec.decode::<Transition>(&payload).map_err(|e| {
            err(format!(
                "record seq {seq} of the demo log does not decode: {e}"
            ))
        })?;
        log.push((seq, t.change));
    }
    if log.first().is_some_and(|(s, _)| *s != 1) {
        return Err(err(
            "the demo log was compacted; the check needs every record",
        ));
    }
    Ok(log)
}

fn run_demo_in(
    o: &DemoOptions,
    exe: &Path,
    first_root: &Path,
    seed: u64,
    temp: bool,
) -> Result<DemoReport, RunError> {
    // The runs root of the host the worker runs on (a new one after `--lose-host`).
    let mut root = first_root.to_path_buf();
    // Never compacted (the check reads every record): see `run_worker`.
    let demo_runs = |root: &Path| Runs::new(root).with_compaction(engine::CompactionPolicy::Manual);
    let mut runs = demo_runs(&root);
    let plan = create_demo_run(o, &runs, &root)?;
    // The kill after which the host is lost: the middle one.
    let lose_after = o.lose_host.then_some(o.kills.div_ceil(2));
    let mut host_loss: Option<HostLoss> = None;
    let mut rng = Rng::new(seed);
    let kills = kill_points(o.units, o.kills, &mut rng);
    let mut w = Watch {
        kills: kills.into_iter().peekable(),
        rng,
        pb: progress_bar(o),
        acked: Vec::new(),
        done_units: HashSet::new(),
        done_now: 0,
        recoveries: Vec::new(),
        pending_kill: None,
        finished: false,
    };
    let mut fsyncs = 0u64;
    let started = Instant::now();
    for _ in 0..o.kills + 3 {
        if temp && interrupted() {
            return Err(err(INTERRUPTED));
        }
        let mut inc = spawn_worker(exe, &root, o)?;
        let ended = w.worker(&mut inc, temp)?;
        let status = inc.child.wait().map_err(|e| RunError::Io {
            op: "wait for demo worker",
            path: exe.to_path_buf(),
            source: e,
        })?;
        fsyncs += ended.fsyncs;
        if ended.killed {
            let kill_no = w.recoveries.len() + 1;
            if host_loss.is_none()
                && lose_after == Some(kill_no)
                && let Some(url) = &o.remote
            {
                let acked_seq = w.acked.iter().map(|a| a.seq).max().unwrap_or(0);
                let new_root = first_root.join(NEW_HOST);
                let loss = lose_host(&runs, &new_root, url, kill_no, acked_seq)?;
                w.pb.set_message(format!(
                    "host lost; restored through seq {}",
                    loss.restored_seq
                ));
                host_loss = Some(loss);
                root = new_root;
                runs = demo_runs(&root);
            }
            continue;
        }
        if !status.success() {
            return Err(err(format!(
                "the demo worker failed ({status}) without being killed"
            )));
        }
        if w.finished {
            break;
        }
    }
    let elapsed = started.elapsed();
    w.pb.finish_and_clear();
    if !w.finished {
        return Err(err("the demo worker never finished"));
    }
    let log = read_demo_log(&runs)?;
    let doc = runs.read(DEMO_RUN)?;
    let check = check(&plan, &w.acked, &log, &doc);
    let secs = elapsed.as_secs_f64().max(1e-9);
    let acked = w.acked.len();
    Ok(DemoReport {
        units: o.units,
        done: check.done,
        lost: check.lost,
        duplicates: check.duplicates,
        crashes: w.recoveries.len(),
        kills_asked: o.kills,
        workers: o.workers,
        acked,
        transitions_per_sec: acked as f64 / secs,
        fsyncs,
        avg_group: if fsyncs == 0 {
            0.0
        } else {
            acked as f64 / fsyncs as f64
        },
        recoveries: w.recoveries,
        elapsed_s: secs,
        seed,
        dir: (!temp || !check.ok()).then(|| root.display().to_string()),
        check,
        remote: o.remote.clone(),
        host_loss,
    })
}

/// The directory, under the first runs root, that stands for the new host's runs root.
pub const NEW_HOST: &str = "new-host";

fn remote_err(what: &str, url: &str, e: RemoteError) -> RunError {
    RunError::Remote {
        op: "demo remote",
        at: format!("{what} {url}"),
        source: e.into(),
    }
}

/// Attaches `url` to the demo run in `dir` under `sync`. The remote must be
/// empty: the demo's check needs the whole chain to be this run's.
fn attach(dir: &Path, url: &str) -> Result<(), RunError> {
    let remote = Remote::open(url).map_err(|e| remote_err("open", url, e))?;
    if !remote
        .list("list", "")
        .map_err(|e| remote_err("list", url, e))?
        .is_empty()
    {
        return Err(err(format!(
            "--remote {url} already holds a run: the demo needs an empty prefix"
        )));
    }
    RemoteConfig::new(url.to_string(), Policy::Sync)
        .write(&RealFs, dir)
        .map_err(|e| remote_err("attach", url, e))
}

/// The host is lost: its run directory goes, entirely; the run is restored
/// from the remote into `new_root` (a new host), whose next writer claims the
/// next epoch.
fn lose_host(
    runs: &Runs,
    new_root: &Path,
    url: &str,
    after_kill: usize,
    acked_seq: u64,
) -> Result<HostLoss, RunError> {
    let lost = runs.run_dir(DEMO_RUN)?;
    std::fs::remove_dir_all(&lost).map_err(|e| RunError::Io {
        op: "delete the lost host's run directory",
        path: lost.clone(),
        source: e,
    })?;
    std::fs::create_dir_all(new_root).map_err(|e| RunError::Io {
        op: "create the new host's runs root",
        path: new_root.to_path_buf(),
        source: e,
    })?;
    let target = Runs::new(new_root).run_dir(DEMO_RUN)?;
    let started = Instant::now();
    let remote = Remote::open(url).map_err(|e| remote_err("open", url, e))?;
    let r = restore(&RealFs, &remote, &target, None)
        .map_err(|e| remote_err("restore the run from", url, e))?;
    RemoteConfig::new(url.to_string(), Policy::Sync)
        .write(&RealFs, &target)
        .map_err(|e| remote_err("attach", url, e))?;
    Ok(HostLoss {
        after_kill,
        acked_seq,
        lost_dir: lost.display().to_string(),
        new_root: new_root.display().to_string(),
        remote: url.to_string(),
        restored_seq: r.last_seq,
        chunks: r.chunks,
        bytes: r.bytes,
        restore_ms: started.elapsed().as_secs_f64() * 1000.0,
    })
}

/// The human summary of a report.
pub fn render(r: &DemoReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "runlog demo: {} units on a dependency tree, {} worker threads, seed {}",
        r.units, r.workers, r.seed
    );
    for (i, k) in r.recoveries.iter().enumerate() {
        let _ = writeln!(
            s,
            "  kill {} (SIGKILL) at {} units done -> recovered in {:.1} ms, replaying {} records (process restart to ready: {:.1} ms)",
            i + 1,
            k.killed_at_units,
            k.recovery_ms,
            k.replayed,
            k.restart_ms
        );
    }
    if let Some(url) = &r.remote {
        let _ = writeln!(
            s,
            "  every transition shipped to {url} (sync: acknowledged once the remote holds it)"
        );
    }
    if let Some(h) = &r.host_loss {
        let _ = writeln!(
            s,
            "  host lost after kill {} at acknowledged seq {}: deleted {}",
            h.after_kill, h.acked_seq, h.lost_dir
        );
        let _ = writeln!(
            s,
            "  restored through seq {} ({} chunks, {} bytes) from {} into {} in {:.1} ms; resumed there",
            h.restored_seq, h.chunks, h.bytes, h.remote, h.new_root, h.restore_ms
        );
    }
    let verdict = if r.ok() { "OK" } else { "FAILED" };
    let _ = writeln!(
        s,
        "  {verdict}: {}/{} units done exactly once; {} acknowledged transitions, {} lost, {} units done twice",
        r.done, r.units, r.acked, r.lost, r.duplicates
    );
    let _ = writeln!(
        s,
        "  {:.0} durable transitions/s over {:.2} s; {} fsyncs, {:.1} transitions per fsync (group commit)",
        r.transitions_per_sec, r.elapsed_s, r.fsyncs, r.avg_group
    );
    if r.crashes < r.kills_asked {
        let _ = writeln!(
            s,
            "  note: {} of the {} kills asked for landed; the worker finished first (more --units or --work-us give the kills room)",
            r.crashes, r.kills_asked
        );
    }
    for p in &r.check.problems {
        let _ = writeln!(s, "  problem: {p}");
    }
    if let Some(d) = &r.dir {
        let _ = writeln!(
            s,
            "  the run is kept in {d} (try: runlog --dir {d} status demo)"
        );
    }
    s
}
