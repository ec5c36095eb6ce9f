//! The runs page: every run under the root with its status, task, progress,
//! rate over the last minute, ETA, last change and remote lag; finished and
//! archived runs apart. Each run's health ([`runlog::run::Health`]: needs
//! attention, failed, idle, running, done) orders the lists, trouble first,
//! then the newest change first; only a running run has an ETA. Each run costs one lock-free read of its header and
//! counts. The page asks every [`REFRESH_EVERY`]; a snapshot younger than
//! that is served as it is, so any number of pages cost one refresh. The rate
//! is measured by this view between refreshes (it has no earlier history):
//! until two refreshes a second apart have been made, the page shows the
//! run's average since it started (its done count over its age, from the
//! header: no unit read), marked as such (`rateFrom`).

use super::feed::{
    RATE_WINDOW, eta, health_json, lock, now_ms, rate_of, remote_part, sample, shown_rate,
};
use runlog::run::{RunError, Runs};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A snapshot younger than this is served as it is.
pub const REFRESH_EVERY: Duration = Duration::from_secs(2);
/// Runs listed at most (the newest by last change; the rest are counted).
pub const MAX_LISTED: usize = 1000;
/// Archived runs listed at most.
pub const MAX_ARCHIVED: usize = 200;
/// A run's remote lag is re-read at most this often.
pub const REMOTE_EVERY: Duration = Duration::from_secs(10);

/// What the runs page is built from, kept between refreshes.
#[derive(Default)]
pub struct Fleet {
    snapshot: Mutex<Option<(Instant, Arc<String>)>>,
    samples: Mutex<HashMap<String, VecDeque<(Instant, u64)>>>,
    remotes: Mutex<HashMap<String, (Instant, Option<serde_json::Value>)>>,
    // One refresh at a time: concurrent pages wait for it and share it.
    refreshing: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet").finish_non_exhaustive()
    }
}

impl Fleet {
    /// The runs page's JSON, refreshed when older than [`REFRESH_EVERY`].
    pub async fn get(self: &Arc<Self>, runs: &Runs) -> Result<Arc<String>, RunError> {
        let _one = self.refreshing.lock().await;
        if let Some((at, s)) = &*lock(&self.snapshot)
            && at.elapsed() < REFRESH_EVERY
        {
            return Ok(s.clone());
        }
        let (me, runs, runs_root) = (self.clone(), runs.clone(), runs.root().to_path_buf());
        let text = tokio::task::spawn_blocking(move || me.build(&runs))
            .await
            // A refresh that panicked is a failure of this process, not a refusal.
            .map_err(|e| RunError::Io {
                op: "refresh the runs page",
                path: runs_root.clone(),
                source: std::io::Error::other(e.to_string()),
            })??;
        let text = Arc::new(text);
        *lock(&self.snapshot) = Some((Instant::now(), text.clone()));
        Ok(text)
    }

    fn build(&self, runs: &Runs) -> Result<String, RunError> {
        let now = Instant::now();
        let mut rows = Vec::new();
        let ids = runs.ids()?;
        let mut seen = std::collections::HashSet::new();
        for id in &ids {
            seen.insert(id.clone());
            rows.push(self.row(runs, id, now));
        }
        // Forget what belongs to runs no longer there.
        lock(&self.samples).retain(|k, _| seen.contains(k));
        lock(&self.remotes).retain(|k, _| seen.contains(k));
        // Trouble first (needs attention, failed, idle: `Health::rank`), then
        // the newest change first.
        rows.sort_by(|a, b| {
            let rank = |r: &serde_json::Value| r["rank"].as_u64().unwrap_or(0);
            let k = |r: &serde_json::Value| r["updatedAt"].as_str().unwrap_or("").to_string();
            rank(a).cmp(&rank(b)).then_with(|| k(b).cmp(&k(a)))
        });
        let total = rows.len();
        rows.truncate(MAX_LISTED);
        let (finished, live): (Vec<_>, Vec<_>) = rows
            .into_iter()
            .partition(|r| r["closed"].as_bool() == Some(true));
        let archived = match runs.list_archived() {
            Ok(mut a) => {
                let n = a.len();
                a.truncate(MAX_ARCHIVED);
                serde_json::json!({"total": n, "shown": a})
            }
            Err(e) => serde_json::json!({"error": runlog::run::ErrorChain(&e).to_string()}),
        };
        Ok(serde_json::json!({
            "root": runs.root().display().to_string(),
            "nowMs": now_ms(),
            "total": total,
            "listedLimit": MAX_LISTED,
            "live": live,
            "finished": finished,
            "archived": archived,
            "rateWindowSecs": RATE_WINDOW.as_secs(),
        })
        .to_string())
    }

    fn row(&self, runs: &Runs, id: &str, now: Instant) -> serde_json::Value {
        let read = match runs.read_run(id) {
            Ok(r) => r,
            Err(e) => {
                // An unreadable run is trouble: listed first.
                return serde_json::json!({
                    "id": id, "error": runlog::run::ErrorChain(&e).to_string(),
                    "closed": false, "updatedAt": "", "rank": 0,
                });
            }
        };
        let seq = read.recovery().last_seq;
        let view = read.view();
        let d = view.header();
        let c = view.counts();
        let rate = {
            let mut all = lock(&self.samples);
            let s = all.entry(id.to_string()).or_default();
            sample(s, now, c.done);
            rate_of(s)
        };
        let now_ms = now_ms();
        let health = runs.health(&read, now_ms);
        let (rate, rate_from) = shown_rate(rate, d, c.done, now_ms);
        let eta = eta(rate, c.open(), &health);
        let remote = self.remote(runs, id, seq, now);
        serde_json::json!({
            "id": id,
            "initialized": d.is_initialized(),
            "status": d.status,
            "closed": d.is_closed(),
            "task": d.task,
            "createdAt": d.created_at,
            "updatedAt": d.updated_at,
            "done": c.done,
            "total": c.total(),
            "counts": c,
            "rate": rate,
            "rateFrom": rate_from,
            "etaSecs": eta,
            "health": health_json(&health),
            "rank": health.health.rank(),
            "remote": remote,
            "seq": seq,
        })
    }

    fn remote(&self, runs: &Runs, id: &str, seq: u64, now: Instant) -> Option<serde_json::Value> {
        if let Some((at, v)) = lock(&self.remotes).get(id)
            && now.duration_since(*at) < REMOTE_EVERY
        {
            return v.clone();
        }
        let v = runs.run_dir(id).ok().and_then(|dir| remote_part(&dir, seq));
        lock(&self.remotes).insert(id.to_string(), (now, v.clone()));
        v
    }
}
