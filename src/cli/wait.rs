//! Waiting for another writer, visibly: a writer first tries for the lock for
//! [`NOTICE_AFTER`]; if another process holds it, runlog says on stderr who
//! (pid, and its command line when /proc shows it) and how long it will wait,
//! then waits the rest of `--lock-timeout`, trying again every
//! [`NOTICE_AFTER`] (a one-shot call every 0.1 s, looking for a server in
//! between). A try that meets a held lock writes nothing, so trying again is
//! safe.

use runlog::engine;
use runlog::run::{RunError, Runs};
use std::time::{Duration, Instant};

/// How long a writer waits silently before saying who holds the lock.
pub const NOTICE_AFTER: Duration = Duration::from_secs(1);
/// Longest command line quoted in the notice, in bytes.
const MAX_CMDLINE_BYTES: usize = 200;

/// Runs `f` with `runs`, saying on stderr who holds the writer lock if it
/// is still held after [`NOTICE_AFTER`].
pub fn with_lock_notice<T>(
    runs: &Runs,
    f: impl Fn(&Runs) -> Result<T, RunError>,
) -> Result<T, RunError> {
    retry_while_locked(runs, NOTICE_AFTER, || Ok(None), f)
}

/// Runs `f` in tries that wait at most `every` for the writer lock, until
/// one gets it or `--lock-timeout` has passed; once the lock has been held
/// for [`NOTICE_AFTER`], says on stderr who holds it, once. Before each try,
/// `settle` may answer in `f`'s place (a one-shot call handing its change to
/// the run's server, which holds the lock to serve).
pub fn retry_while_locked<T>(
    runs: &Runs,
    every: Duration,
    mut settle: impl FnMut() -> Result<Option<T>, RunError>,
    f: impl Fn(&Runs) -> Result<T, RunError>,
) -> Result<T, RunError> {
    let started = Instant::now();
    // No wait given: fail at once, as `Runs::with_lock_wait(None)` says.
    let total = runs.lock_wait().unwrap_or(Duration::ZERO);
    let mut noticed = false;
    loop {
        if let Some(t) = settle()? {
            return Ok(t);
        }
        let left = total.saturating_sub(started.elapsed());
        let slice = left.min(every);
        match f(&runs.clone().with_lock_wait(Some(slice))) {
            Err(e) if left > slice && holder_of(&e).is_some() => {
                if !noticed && started.elapsed() >= NOTICE_AFTER {
                    let (path, holder) = holder_of(&e).unwrap_or_default();
                    let rest = left - slice;
                    eprintln!("{}", notice(&path, holder.as_deref(), rest));
                    noticed = true;
                }
            }
            // A lock still held says how long this call waited in all, not
            // its last slice.
            other => {
                return other.map_err(|mut e| {
                    if let RunError::Engine {
                        source: engine::Error::Locked { waited, .. },
                        ..
                    } = &mut e
                    {
                        *waited = Some(started.elapsed());
                    }
                    e
                });
            }
        }
    }
}

/// The lock's path and recorded holder, when `e` is a held writer lock.
pub fn holder_of(e: &RunError) -> Option<(String, Option<String>)> {
    match e {
        RunError::Engine {
            source: engine::Error::Locked { path, holder, .. },
            ..
        } => Some((path.display().to_string(), holder.clone())),
        _ => None,
    }
}

/// The notice: who holds `lock` and how much longer this process waits.
pub fn notice(lock: &str, holder: Option<&str>, rest: Duration) -> String {
    let who = match holder {
        Some(h) => match pid_of(h).and_then(command_of) {
            Some(cmd) => format!("{h} ({cmd})"),
            None => h.to_string(),
        },
        None => "another process".to_string(),
    };
    format!(
        "runlog: waiting for the writer lock {lock}, held by {who}; waiting up to {:.1} s more (--lock-timeout)",
        rest.as_secs_f64()
    )
}

/// The pid in a holder text such as `pid 4242`.
fn pid_of(holder: &str) -> Option<u32> {
    holder.trim().strip_prefix("pid ")?.trim().parse().ok()
}

/// The command line of process `pid`, from /proc (Linux), capped.
fn command_of(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let raw = &raw[..raw.len().min(MAX_CMDLINE_BYTES)];
    let text: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    (!text.is_empty()).then(|| text.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notice_names_the_holder_and_the_wait() {
        let n = notice("/r/LOCK", Some("pid 4294967295"), Duration::from_secs(29));
        assert!(n.contains("/r/LOCK") && n.contains("pid 4294967295") && n.contains("29.0 s"));
        let me = format!("pid {}", std::process::id());
        assert!(
            notice("L", Some(&me), Duration::ZERO).contains('('),
            "own cmdline"
        );
        assert!(notice("L", None, Duration::ZERO).contains("another process"));
        assert_eq!(pid_of("pid 12"), Some(12));
        assert_eq!(pid_of("a simulated holder"), None);
    }
}
