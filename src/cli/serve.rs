//! `runlog serve RUN`: the library's server of a run (`Runs::serve`, docs/CLI.md
//! "serve"), started, announced on stdout, stopped by SIGTERM, SIGINT or
//! `--idle`, and summed up on stderr.

use super::wait::with_lock_notice;
use super::{EXIT_DONE, EXIT_FAILED};
use runlog::run::{RunError, Runs, StopFlag, Warning};
use serde_json::json;
use std::time::Duration;

/// `runlog serve RUN [--idle SECS] [--commit-delay SECS]`: serves the run
/// until SIGTERM, SIGINT, `idle` without a connection, or a failed change.
pub fn serve(
    runs: &Runs,
    json: bool,
    id: &str,
    idle: Option<Duration>,
    commit_delay: Duration,
) -> Result<u8, RunError> {
    let stop = StopFlag::watching_sigterm();
    crate::sys::install_sigint_handler();
    let server = with_lock_notice(runs, |r| r.serve(id, commit_delay))?;
    let socket = server.socket().to_path_buf();
    let pid = std::process::id();
    let ready = if json {
        json!({"serving": id, "socket": socket, "pid": pid}).to_string()
    } else {
        format!("serving run {id} at {} (pid {pid})", socket.display())
    };
    // Nobody learns of a server that cannot say so: dropped, it leaves no socket.
    super::write_out(&format!("{ready}\n"))?;
    let asked = || {
        if stop.requested().is_some() {
            Some("SIGTERM".to_string())
        } else if crate::sys::sigint_received() {
            Some("SIGINT".to_string())
        } else {
            None
        }
    };
    let warn = |w: &Warning| eprintln!("runlog: warning {}: {}", w.code, w.message);
    let report = server.run(idle, &asked, &warn);
    let stopped = match idle {
        Some(_) if report.stopped.starts_with("idle for") => format!("{} (--idle)", report.stopped),
        _ => report.stopped.clone(),
    };
    eprintln!(
        "runlog: serve: run {id}: {} changes acknowledged over {} connections in {} fdatasyncs; stopped: {stopped}",
        report.acked, report.connections, report.fsyncs,
    );
    Ok(if report.failed {
        EXIT_FAILED
    } else {
        EXIT_DONE
    })
}
