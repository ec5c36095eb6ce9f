//! The live part of a run's page. One [`Watcher`] per run being looked at,
//! whatever the number of browsers: a thread that re-reads the run lock-free
//! every [`POLL_EVERY`] (the header and the counts, as `status --watch` does:
//! the same cost at any size) and, when the log's last seq moved, publishes a
//! new summary to every event stream at once. It also keeps the rate (over
//! the last minute it has seen), starts the lists' background scan
//! (lists.rs), then keeps the lists current from the log's tail on each poll
//! that saw the seq move (follow.rs: the transitions since, never a rescan),
//! and reads the remote's lag on a thread of its own, so a slow remote never
//! delays an update. A rescan runs in the background when the run changed,
//! no sooner than [`lists::min_rescan_gap`] after the last one (it refreshes
//! what the tail does not keep: eligible, held back, newly stuck units, the
//! chart), and at once when the tail was lost. A watcher nobody has asked for in
//! [`IDLE_AFTER`] and with no stream open ends.

use super::follow::{Follower, Step};
use super::lists::{self, ListSet};
use runlog::run::{Assessment, Health, RunDoc, RunError, RunRead, RunView, Runs};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How often a watched run is re-read.
pub const POLL_EVERY: Duration = Duration::from_millis(300);
/// An unchanged run's summary is still re-sent this often (the rate and ETA age).
pub const RESEND_EVERY: Duration = Duration::from_secs(5);
/// How far back the rate looks.
pub const RATE_WINDOW: Duration = Duration::from_secs(60);
/// A watcher with no stream and no request for this long ends.
pub const IDLE_AFTER: Duration = Duration::from_secs(60);
/// Runs watched at once; past it the least recently used idle one is dropped.
pub const MAX_WATCHED: usize = 8;
/// Open items sent with a summary (the count is exact).
pub const ITEMS_SHOWN: usize = 50;
/// How often the remote's lag is re-read, and how long each read may take.
pub const REMOTE_EVERY: Duration = Duration::from_secs(3);
/// The deadline of one remote read.
pub const REMOTE_DEADLINE: Duration = Duration::from_secs(2);

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Units done per second over the window `samples` cover (at least a second).
pub fn rate_of(samples: &VecDeque<(Instant, u64)>) -> Option<f64> {
    let (t0, d0) = *samples.front()?;
    let (t1, d1) = *samples.back()?;
    let dt = t1.duration_since(t0).as_secs_f64();
    (dt >= 1.0).then(|| d1.saturating_sub(d0) as f64 / dt)
}

/// Units done per second since the run started (from its `createdAt` to its
/// end, or to `now_ms` while it runs): what the run itself records, shown
/// (and labelled so) until this view has measured a rate of its own.
pub fn rate_since_start(d: &RunDoc, done: u64, now_ms: i64) -> Option<f64> {
    let ms = runlog::run::SystemClock::parse_rfc3339;
    let from = ms(&d.created_at)?;
    let to = d.finished_at.as_deref().and_then(ms).unwrap_or(now_ms);
    let secs = (to - from) as f64 / 1000.0;
    (secs >= 1.0 && done > 0).then(|| done as f64 / secs)
}

/// The rate to show and where it comes from: the one measured over the
/// last minute (`"lastMinute"`); else, for a live run that has not changed
/// for the whole window, 0 over the last minute (every change, a unit done
/// included, moves the header's `updatedAt`, so none was done in it); else
/// the average since the run started (`"sinceStart"`). So a stalled run's
/// first paint shows no rate from its better days, and no ETA from it.
pub fn shown_rate(
    measured: Option<f64>,
    d: &RunDoc,
    done: u64,
    now_ms: i64,
) -> (Option<f64>, &'static str) {
    let quiet = runlog::run::SystemClock::parse_rfc3339(&d.updated_at)
        .is_some_and(|t| now_ms - t >= RATE_WINDOW.as_millis() as i64);
    match measured {
        Some(r) => (Some(r), "lastMinute"),
        None if quiet && !d.is_closed() => (Some(0.0), "lastMinute"),
        None => (rate_since_start(d, done, now_ms), "sinceStart"),
    }
}

/// The ETA (seconds) of a run with `open` units not done at `rate`: only for
/// a run running as expected ([`Health::Running`]) that is moving; an idle
/// or stalled run, or a finalized one, has none.
pub fn eta(rate: Option<f64>, open: u64, health: &Assessment) -> Option<f64> {
    rate.filter(|r| *r > 0.0 && health.health == Health::Running)
        .map(|r| open as f64 / r)
}

/// A run's health as the pages show it: `health`, `healthWhy`, `writer`.
pub fn health_json(h: &Assessment) -> serde_json::Value {
    serde_json::json!({
        "health": h.health,
        "why": h.why,
        "quietMs": h.quiet_ms,
        "writer": h.writer,
        "trouble": h.health.is_trouble(),
    })
}

/// Adds a sample (at most one a second) and drops those past the window.
pub fn sample(samples: &mut VecDeque<(Instant, u64)>, now: Instant, done: u64) {
    if samples
        .back()
        .is_none_or(|(t, _)| now.duration_since(*t) >= Duration::from_secs(1))
    {
        samples.push_back((now, done));
    } else if let Some(last) = samples.back_mut() {
        last.1 = done;
    }
    while samples.len() > 2
        && samples
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > RATE_WINDOW)
    {
        samples.pop_front();
    }
}

/// The remote's lag as `status` shows it (`None`: the run has no remote).
pub fn remote_part(dir: &std::path::Path, durable: u64) -> Option<serde_json::Value> {
    use runlog::remote::{RemoteStatus, is_deadline};
    match RemoteStatus::read(dir, durable, Some(REMOTE_DEADLINE)) {
        Ok(None) => None,
        Ok(Some(l)) => Some(serde_json::json!({
            "lag": serde_json::to_value(&l).unwrap_or_default(),
            "line": format!(
                "remote: {} ({}), durable {}, shipped {}, lag {}, epoch {} (head {}){}",
                l.url, l.policy, l.durable, l.shipped, l.lag, l.epoch, l.head_epoch,
                if l.fenced { " (this host is fenced)" } else { "" }
            ),
        })),
        Err(e) if is_deadline(&e) => Some(serde_json::json!({
            "error": runlog::run::ErrorChain(&e).to_string(),
            "line": format!("remote: not reached within {} (local state shown)", deadline_text(REMOTE_DEADLINE)),
        })),
        Err(e) => Some(serde_json::json!({
            "error": runlog::run::ErrorChain(&e).to_string(),
            "line": format!("remote: cannot read it: {}", runlog::run::ErrorChain(&e).to_string()),
        })),
    }
}

/// The summary of a run a page shows and each live update carries: header,
/// counts, rate, ETA, phases, budgets, items, fingerprint. Costs the same at
/// any run size: no unit is read.
#[allow(clippy::too_many_arguments)]
pub fn summary(
    view: &RunView<'_>,
    seq: u64,
    health: &Assessment,
    rate: Option<f64>,
    remote: Option<&serde_json::Value>,
    lists: Option<&ListSet>,
    scanning: bool,
    tail: Option<&TailStats>,
) -> serde_json::Value {
    let d = view.header();
    let c = view.counts();
    let (rate, rate_from) = shown_rate(rate, d, c.done, now_ms());
    let eta = eta(rate, c.open(), health);
    let mut budgets: Vec<_> = d.budgets.iter().collect();
    // Exhausted ones first, then by name.
    budgets.sort_by_key(|(n, b)| (!b.is_exhausted(), n.as_str()));
    let budgets: Vec<_> = budgets
        .into_iter()
        .map(|(n, b)| {
            serde_json::json!({
                "name": n, "limit": b.limit, "spent": b.spent, "owner": b.owner,
                "exhaustedAt": b.exhausted_at, "exhausted": b.is_exhausted(),
                "remaining": b.remaining(),
            })
        })
        .collect();
    let phases: Vec<_> = d
        .phases
        .iter()
        .map(|(n, p)| {
            serde_json::json!({
                "name": n, "status": p.status, "startedAt": p.started_at,
                "updatedAt": p.updated_at, "finishedAt": p.finished_at,
            })
        })
        .collect();
    let items: Vec<_> = d.open_items.iter().take(ITEMS_SHOWN).collect();
    serde_json::json!({
        "id": d.id,
        "initialized": d.is_initialized(),
        "seq": seq,
        "task": d.task,
        "status": d.status,
        "closed": d.is_closed(),
        "createdAt": d.created_at,
        "updatedAt": d.updated_at,
        "finishedAt": d.finished_at,
        "result": d.result,
        "counts": c,
        "total": c.total(),
        "rate": rate,
        "rateFrom": rate_from,
        "etaSecs": eta,
        "health": health_json(health),
        "phases": phases,
        "budgets": budgets,
        "openItems": {"total": d.open_items.len(), "shown": items},
        "resolvedItems": d.resolved_items.len(),
        "fingerprint": d.fingerprint,
        "checkpoint": d.checkpoint.as_ref().map(|k| serde_json::json!({"at": k.at, "count": k.count})),
        "remote": remote,
        "lists": lists.map(|l| serde_json::json!({
            "seq": l.seq, "scanSeq": l.scan_seq, "scannedAtMs": l.scanned_at_ms, "tookMs": l.took_ms,
            "stuckAfterMs": l.stuck_after_ms, "totals": l.totals(),
            "resume": {"skip": l.done, "eligible": l.list(lists::Kind::Eligible).total,
                       "heldBack": l.list(lists::Kind::HeldBack).total},
            "chart": l.chart,
        })),
        "scanning": scanning,
        "tail": tail.map(TailStats::json),
    })
}

/// How a watcher's lists were kept: scans, steps from the tail, losses.
#[derive(Debug, Default)]
pub struct TailStats {
    /// Scans of every unit made (the first included).
    pub scans: AtomicU64,
    /// Steps that brought the lists forward from the tail.
    pub steps: AtomicU64,
    /// Units those steps applied.
    pub units: AtomicU64,
    /// The time those steps took, in all (µs).
    pub step_us: AtomicU64,
    /// The longest of them (µs).
    pub max_step_us: AtomicU64,
    /// Times the tail could not be followed (each followed by a rescan).
    pub lost: AtomicU64,
    /// Why, the last time.
    pub last_lost: Mutex<Option<String>>,
}

impl TailStats {
    /// As the summary carries them.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "scans": self.scans.load(Ordering::Relaxed),
            "steps": self.steps.load(Ordering::Relaxed),
            "units": self.units.load(Ordering::Relaxed),
            "stepUs": self.step_us.load(Ordering::Relaxed),
            "maxStepUs": self.max_step_us.load(Ordering::Relaxed),
            "lost": self.lost.load(Ordering::Relaxed),
            "lastLost": *lock(&self.last_lost),
        })
    }
}

/// One watched run.
pub struct Watcher {
    id: String,
    tx: watch::Sender<Arc<String>>,
    last_asked: Mutex<Instant>,
    lists: Mutex<Option<Arc<ListSet>>>,
    /// A scan's lists and the read it scanned, for the watcher's loop to take.
    fresh: Mutex<Option<(ListSet, RunRead)>>,
    /// The tail was lost: rescan without waiting for the gap.
    rescan_now: AtomicBool,
    tail: TailStats,
    scanning: AtomicBool,
    last_scan: Mutex<Option<Instant>>,
    remote: Mutex<Option<serde_json::Value>>,
    durable: AtomicU64,
    stop: AtomicBool,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Watcher {
    /// A receiver of this run's summaries (the latest is there at once).
    pub fn subscribe(&self) -> watch::Receiver<Arc<String>> {
        self.touch();
        self.tx.subscribe()
    }

    /// The latest summary, as JSON text.
    pub fn latest(&self) -> Arc<String> {
        self.touch();
        self.tx.borrow().clone()
    }

    /// The lists as last brought forward (`None` until the first scan is done).
    pub fn lists(&self) -> Option<Arc<ListSet>> {
        self.touch();
        lock(&self.lists).clone()
    }

    fn touch(&self) {
        *lock(&self.last_asked) = Instant::now();
    }

    /// A watcher of run `id` at `seq` whose first summary is `first`; its
    /// threads are not started here.
    fn new(id: &str, first: String, seq: u64) -> Watcher {
        let (tx, _) = watch::channel(Arc::new(first));
        Watcher {
            id: id.to_string(),
            tx,
            last_asked: Mutex::new(Instant::now()),
            lists: Mutex::new(None),
            fresh: Mutex::new(None),
            rescan_now: AtomicBool::new(false),
            tail: TailStats::default(),
            scanning: AtomicBool::new(false),
            last_scan: Mutex::new(None),
            remote: Mutex::new(None),
            durable: AtomicU64::new(seq),
            stop: AtomicBool::new(false),
        }
    }

    fn idle(&self) -> bool {
        self.tx.receiver_count() == 0 && lock(&self.last_asked).elapsed() > IDLE_AFTER
    }
}

/// Every watched run.
pub struct Watchers {
    runs: Runs,
    map: Arc<Mutex<HashMap<String, Arc<Watcher>>>>,
}

impl std::fmt::Debug for Watchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watchers").finish_non_exhaustive()
    }
}

impl Watchers {
    /// No run watched yet.
    pub fn new(runs: Runs) -> Watchers {
        Watchers {
            runs,
            map: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The watcher of run `id` (exact, validated), started if need be: the
    /// run is read once here, so a run that cannot be read is an error now.
    pub fn get(&self, id: &str) -> Result<Arc<Watcher>, RunError> {
        if let Some(w) = lock(&self.map).get(id) {
            w.touch();
            return Ok(w.clone());
        }
        let read = self.runs.read_run(id)?;
        let seq = read.recovery().last_seq;
        let health = self.runs.health(&read, now_ms());
        let first = summary(&read.view(), seq, &health, None, None, None, false, None).to_string();
        drop(read);
        let w = Arc::new(Watcher::new(id, first, seq));
        {
            let mut map = lock(&self.map);
            if let Some(existing) = map.get(id) {
                return Ok(existing.clone());
            }
            if map.len() >= MAX_WATCHED {
                let victim = map
                    .iter()
                    .filter(|(_, w)| w.tx.receiver_count() == 0)
                    .min_by_key(|(_, w)| *lock(&w.last_asked))
                    .map(|(k, _)| k.clone());
                match victim {
                    Some(k) => {
                        if let Some(v) = map.remove(&k) {
                            v.stop.store(true, Ordering::Relaxed);
                        }
                    }
                    None => {
                        return Err(RunError::Invalid(format!(
                            "this view already streams {MAX_WATCHED} runs; close a page first"
                        )));
                    }
                }
            }
            map.insert(id.to_string(), w.clone());
        }
        self.spawn(w.clone(), seq)?;
        Ok(w)
    }

    fn spawn(&self, w: Arc<Watcher>, seq: u64) -> Result<(), RunError> {
        let (runs, map) = (self.runs.clone(), self.map.clone());
        let dir = runs.run_dir(&w.id)?;
        let has_remote = matches!(
            runlog::remote::RemoteConfig::read(&runlog::run::RealFs, &dir),
            Ok(Some(_)) | Err(_)
        );
        if has_remote {
            let w2 = w.clone();
            let dir2 = dir.clone();
            std::thread::Builder::new()
                .name("runlog-ui-remote".into())
                .spawn(move || {
                    while !w2.stop.load(Ordering::Relaxed) {
                        let part = remote_part(&dir2, w2.durable.load(Ordering::Relaxed));
                        *lock(&w2.remote) = part;
                        std::thread::sleep(REMOTE_EVERY);
                    }
                })
                .map_err(|e| RunError::Io {
                    op: "start the remote reader",
                    path: (&dir).into(),
                    source: e,
                })?;
        }
        std::thread::Builder::new()
            .name("runlog-ui-watch".into())
            .spawn(move || poll(&runs, &map, &w, seq))
            .map(drop)
            .map_err(|e| RunError::Io {
                op: "start the run watcher",
                path: (&dir).into(),
                source: e,
            })
    }
}

/// The watcher's loop.
fn poll(runs: &Runs, map: &Mutex<HashMap<String, Arc<Watcher>>>, w: &Arc<Watcher>, first_seq: u64) {
    let mut samples = VecDeque::new();
    let mut last_seq = first_seq;
    let mut last_sent = Instant::now();
    let mut last_lists_seq = None;
    let mut last_remote: Option<serde_json::Value> = None;
    let mut follower = Follower::default();
    // The first scan is started at once: the failures lists are wanted first.
    maybe_scan(runs, w, first_seq);
    loop {
        if w.stop.load(Ordering::Relaxed) || w.idle() {
            w.stop.store(true, Ordering::Relaxed);
            let mut m = lock(map);
            if m.get(&w.id).is_some_and(|x| Arc::ptr_eq(x, w)) {
                m.remove(&w.id);
            }
            return;
        }
        std::thread::sleep(POLL_EVERY);
        let text = match runs.read_run(&w.id) {
            Ok(read) => {
                let seq = read.recovery().last_seq;
                w.durable.store(seq, Ordering::Relaxed);
                keep_lists(runs, w, &mut follower, &read);
                let view = read.view();
                sample(&mut samples, Instant::now(), view.counts().done);
                let lists = follower.lists();
                let lists_seq = lists.as_ref().map(|l| (l.seq, l.scan_seq));
                let remote = lock(&w.remote).clone();
                maybe_scan(runs, w, seq);
                let changed =
                    seq != last_seq || lists_seq != last_lists_seq || remote != last_remote;
                let text = (changed || last_sent.elapsed() >= RESEND_EVERY).then(|| {
                    summary(
                        &view,
                        seq,
                        &runs.health(&read, now_ms()),
                        rate_of(&samples),
                        remote.as_ref(),
                        lists.as_deref(),
                        w.scanning.load(Ordering::Relaxed),
                        Some(&w.tail),
                    )
                    .to_string()
                });
                follower.keep(read);
                let Some(text) = text else { continue };
                last_seq = seq;
                last_lists_seq = lists_seq;
                last_remote.clone_from(&remote);
                text
            }
            Err(e) => serde_json::json!({
                "id": w.id,
                "error": runlog::run::ErrorChain(&e).to_string(),
            })
            .to_string(),
        };
        last_sent = Instant::now();
        w.tx.send_replace(Arc::new(text));
    }
}

/// Takes a finished scan's lists, then brings the lists to `read`'s seq from
/// the tail and publishes them; a lost tail is counted, logged and rescanned.
fn keep_lists(runs: &Runs, w: &Watcher, follower: &mut Follower, read: &RunRead) {
    if let Some((l, r)) = lock(&w.fresh).take() {
        follower.rescanned(l, r);
    }
    let t0 = Instant::now();
    match follower.step(runs, read) {
        Step::Waiting | Step::Current => {}
        Step::Followed { units, .. } => {
            let us = t0.elapsed().as_micros() as u64;
            w.tail.steps.fetch_add(1, Ordering::Relaxed);
            w.tail.units.fetch_add(units as u64, Ordering::Relaxed);
            w.tail.step_us.fetch_add(us, Ordering::Relaxed);
            w.tail.max_step_us.fetch_max(us, Ordering::Relaxed);
        }
        Step::Lost(why) => {
            eprintln!(
                "runlog ui: run {}: the lists cannot follow the log's tail ({why}); scanning the units again",
                w.id
            );
            w.tail.lost.fetch_add(1, Ordering::Relaxed);
            *lock(&w.tail.last_lost) = Some(why);
            w.rescan_now.store(true, Ordering::Relaxed);
        }
    }
    *lock(&w.lists) = follower.lists();
}

/// Starts a background scan of the lists when none runs and either none was
/// made yet, or the tail was lost, or the run changed since the last scan and
/// the gap since it is past [`lists::min_rescan_gap`]. The scan hands its
/// lists and its read to the watcher's loop, which follows the tail from them.
fn maybe_scan(runs: &Runs, w: &Arc<Watcher>, seq: u64) {
    if w.scanning.load(Ordering::Relaxed) {
        return;
    }
    let last = lock(&w.lists).clone();
    let due = match (&last, *lock(&w.last_scan)) {
        (None, None) => true,
        (Some(_), _) if w.rescan_now.load(Ordering::Relaxed) => true,
        (Some(l), Some(at)) => {
            l.scan_seq != seq && at.elapsed() >= lists::min_rescan_gap(l.took_ms)
        }
        // A failed scan is retried after the shortest gap.
        (None, Some(at)) => at.elapsed() >= lists::min_rescan_gap(0),
        (Some(_), None) => false,
    };
    if !due {
        return;
    }
    w.scanning.store(true, Ordering::Relaxed);
    w.rescan_now.store(false, Ordering::Relaxed);
    *lock(&w.last_scan) = Some(Instant::now());
    let (runs, w2) = (runs.clone(), w.clone());
    let spawned = std::thread::Builder::new()
        .name("runlog-ui-scan".into())
        .spawn(move || {
            let result = runs.read_run(&w2.id).and_then(|read| {
                let seq = read.recovery().last_seq;
                let l = lists::scan(&read.view(), seq, now_ms())?;
                Ok((l, read))
            });
            match result {
                Ok(done) => {
                    w2.tail.scans.fetch_add(1, Ordering::Relaxed);
                    *lock(&w2.fresh) = Some(done);
                }
                Err(e) => eprintln!(
                    "runlog ui: run {}: cannot scan its units: {}",
                    w2.id,
                    runlog::run::ErrorChain(&e)
                ),
            }
            *lock(&w2.last_scan) = Some(Instant::now());
            w2.scanning.store(false, Ordering::Relaxed);
        });
    if spawned.is_err() {
        w.scanning.store(false, Ordering::Relaxed);
    }
}

/// `within` as status shows it: `2s`, `500ms` (the remote line of `runlog
/// status` and of the web view, when the remote was not reached in time).
pub fn deadline_text(within: Duration) -> String {
    if within.subsec_millis() == 0 {
        format!("{}s", within.as_secs())
    } else {
        format!("{}ms", within.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runlog::run::{InitSpec, UnitStatus};

    /// Waits (a generous deadline, not a speed claim) for the scan thread to
    /// hand its lists over and end.
    fn scanned(w: &Watcher) {
        let t0 = Instant::now();
        while lock(&w.fresh).is_none() || w.scanning.load(Ordering::Relaxed) {
            assert!(t0.elapsed() < Duration::from_secs(30), "no scan");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn blocked(w: &Watcher) -> Vec<String> {
        let l = lock(&w.lists).clone().expect("lists");
        let b = l.list(lists::Kind::Blocked);
        b.kept.iter().map(|e| e.name.clone()).collect()
    }

    #[test]
    fn the_watcher_follows_the_tail_then_rescans_at_once_when_compaction_took_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let runs = Runs::new(dir.path());
        let run = runs
            .init(InitSpec {
                id: "r1".into(),
                task: "t".into(),
                units: vec!["a".into(), "b".into(), "c".into()],
                ..Default::default()
            })
            .expect("init");
        run.set_unit("a", UnitStatus::Blocked, None, None)
            .expect("set");
        let seq = runs.read_run("r1").expect("read").recovery().last_seq;
        let w = Arc::new(Watcher::new("r1", String::new(), seq));
        let mut f = Follower::default();
        maybe_scan(&runs, &w, seq);
        scanned(&w);
        keep_lists(&runs, &w, &mut f, &runs.read_run("r1").expect("read"));
        assert_eq!(blocked(&w), ["a"]);

        // Followed from the tail: no scan.
        run.set_unit("b", UnitStatus::Blocked, None, None)
            .expect("set");
        let now = runs.read_run("r1").expect("read");
        keep_lists(&runs, &w, &mut f, &now);
        f.keep(now);
        assert_eq!(blocked(&w), ["a", "b"]);
        assert_eq!(w.tail.steps.load(Ordering::Relaxed), 1);
        let now_seq = runs.read_run("r1").expect("read").recovery().last_seq;
        maybe_scan(&runs, &w, now_seq);
        assert!(
            !w.scanning.load(Ordering::Relaxed),
            "no rescan within the gap"
        );
        assert_eq!(w.tail.scans.load(Ordering::Relaxed), 1);

        // Compacted twice under it: lost, counted, rescanned without the gap.
        run.set_unit("a", UnitStatus::Done, None, None)
            .expect("set");
        run.compact().expect("compact");
        run.set_unit("c", UnitStatus::Blocked, None, None)
            .expect("set");
        run.compact().expect("compact");
        let now = runs.read_run("r1").expect("read");
        let now_seq = now.recovery().last_seq;
        keep_lists(&runs, &w, &mut f, &now);
        f.keep(now);
        assert_eq!(w.tail.lost.load(Ordering::Relaxed), 1);
        let why = lock(&w.tail.last_lost).clone().expect("why");
        assert!(why.contains("compacted"), "{why}");
        assert_eq!(blocked(&w), ["a", "b"], "stale until the rescan");
        maybe_scan(&runs, &w, now_seq);
        scanned(&w);
        keep_lists(&runs, &w, &mut f, &runs.read_run("r1").expect("read"));
        assert_eq!(blocked(&w), ["b", "c"]);
        assert_eq!(w.tail.scans.load(Ordering::Relaxed), 2);
        assert!(f.following());
    }
}
