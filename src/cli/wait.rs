//! Waiting for another writer, visibly: the library's lock-retry loop
//! (`Runs::waiting_for_lock`, `Runs::change_waiting`) says who holds the lock
//! after each try; once it has been held for [`NOTICE_AFTER`], this says on
//! stderr who (pid, and its command line when /proc shows it) and how much
//! longer this call waits, once.

use runlog::run::{RunError, Runs, Waiting};
use std::time::Duration;

/// How long a writer waits silently before saying who holds the lock.
pub const NOTICE_AFTER: Duration = Duration::from_secs(1);
/// Longest command line quoted in the notice, in bytes.
const MAX_CMDLINE_BYTES: usize = 200;

/// A `waiting` callback that prints the notice once, after [`NOTICE_AFTER`].
pub fn lock_notice() -> impl FnMut(&Waiting<'_>) {
    let mut noticed = false;
    move |w| {
        if !noticed && w.waited >= NOTICE_AFTER {
            eprintln!(
                "{}",
                notice(&w.lock.display().to_string(), w.holder, w.left)
            );
            noticed = true;
        }
    }
}

/// Runs `f` with `runs`, saying on stderr who holds the writer lock if it
/// is still held after [`NOTICE_AFTER`].
pub fn with_lock_notice<T>(
    runs: &Runs,
    f: impl Fn(&Runs) -> Result<T, RunError>,
) -> Result<T, RunError> {
    runs.waiting_for_lock(&mut lock_notice(), f)
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
