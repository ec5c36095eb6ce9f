//! `runlog serve RUN`: one long-lived writer of a run, to which one-shot
//! writer processes hand their change over a Unix socket instead of each
//! opening the run itself (docs/CLI.md, "serve").
//!
//! The server is an ordinary writer: it holds the run's writer lock for its
//! life, and its connections' changes go through the run's group commit, so
//! many processes' changes share one write and one fdatasync. Each
//! connection speaks `apply`'s protocol (an operation line in, an ack line
//! out once durable) after a greeting line from the server. A client sends
//! its change only after the greeting: a connection that was never greeted
//! never reached a server that could read it, so the client applies the
//! change itself (the socket is a dead server's, or the server is stopping).
//! After the change is sent, anything but an ack is an unknown outcome, said
//! as such, never retried: the server may have made it durable.

use super::ack::Acked;
use super::apply::apply_stream;
use super::commit::{Committer, Connection};
use super::wait::{retry_while_locked, with_lock_notice};
use super::{EXIT_DONE, EXIT_FAILED};
use runlog::run::served::{self, Addr, Answer, SOCKET_NAME};
use runlog::run::{Change, RunError, Runs, StopFlag};
use serde_json::json;
use std::io::{self, BufReader, BufWriter, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Threads serving connections at most; more connections wait their turn.
const MAX_CONNECTIONS: usize = 256;
/// A connection that sends nothing for this long is closed by the server.
const IDLE_CONNECTION: Duration = Duration::from_secs(10);
/// How often the server looks for a stop (a signal, its idle limit) while no
/// connection comes.
const STOP_POLL: Duration = Duration::from_millis(50);
/// The longest `--commit-delay`, in seconds (PostgreSQL caps its
/// `commit_delay` at the same 0.1 s): a longer one is surely a mistake.
pub const MAX_COMMIT_DELAY_SECS: f64 = 0.1;

/// What the server's threads share.
#[derive(Default)]
struct State {
    connections: AtomicU64,
    acked: AtomicU64,
    /// A change failed (not refused): the store accepts no more writes.
    failed: AtomicBool,
    last_activity: Mutex<Option<Instant>>,
}

impl State {
    fn touch(&self) {
        *self.last_activity.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }

    fn idle_for(&self) -> Duration {
        self.last_activity
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map_or(Duration::ZERO, |t| t.elapsed())
    }
}

fn io_error<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> RunError + 'a {
    move |source| RunError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// `runlog serve RUN [--idle SECS] [--commit-delay SECS]`: serves the run
/// until SIGTERM, SIGINT, `idle` without a connection, or a failed change.
/// One committer thread applies the changes, holding a batch up to
/// `commit_delay` while another connection is open (`commit.rs`).
pub fn serve(
    runs: &Runs,
    json: bool,
    id: &str,
    idle: Option<Duration>,
    commit_delay: Duration,
) -> Result<u8, RunError> {
    if runs.key().is_some() {
        return Err(RunError::Invalid(format!(
            "run {id}: a tagged run is not served: a process on the socket could not prove it holds the key (its writers open the run themselves)"
        )));
    }
    let stop = StopFlag::watching_sigterm();
    crate::sys::install_sigint_handler();
    let run = with_lock_notice(runs, |r| r.open(id))?;
    let dir = runs.run_dir(id)?;
    let socket = dir.join(SOCKET_NAME);
    let addr = Addr::of(&dir).map_err(io_error("open the run directory for its socket", &dir))?;
    // Only the writer lock's holder binds the socket, and this process holds
    // it: a socket already there is a dead server's.
    match std::fs::remove_file(&addr.path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            return Err(io_error("remove a dead server's socket", &socket)(e));
        }
        _ => {}
    }
    let listener = UnixListener::bind(&addr.path).map_err(io_error("bind the socket", &socket))?;
    // Whoever may connect may write the run: the owner only, as its files.
    std::fs::set_permissions(
        &addr.path,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .map_err(io_error("set the socket's mode", &socket))?;
    let pid = std::process::id();
    let ready = if json {
        json!({"serving": id, "socket": socket, "pid": pid}).to_string()
    } else {
        format!("serving run {id} at {} (pid {pid})", socket.display())
    };
    if let Err(e) = super::write_out(&format!("{ready}\n")) {
        // Nobody learns of this server: leave no socket behind it.
        let _ = std::fs::remove_file(&addr.path);
        return Err(e);
    }

    let state = State::default();
    state.touch();
    // Connections go to a pool of threads, started as needed and kept: a
    // thread started for each connection cost more than its change.
    let committer = Committer::new(&run, commit_delay);
    let (send, receive) = std::sync::mpsc::channel::<(UnixStream, Connection)>();
    let receive = Mutex::new(receive);
    listener
        .set_nonblocking(true)
        .map_err(io_error("make the socket's accept non-blocking", &socket))?;
    // The accepting loop decides alone when to stop, and says why.
    let reason = std::thread::scope(|s| {
        s.spawn(|| committer.run());
        let mut threads = 0usize;
        let reason = loop {
            if let Some(why) = stop_reason(&state, committer.open(), &stop, idle) {
                break why;
            }
            if !crate::sys::readable_within(listener.as_fd(), STOP_POLL) {
                continue;
            }
            let stream = match listener.accept() {
                Ok((st, _)) => st,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                    ) =>
                {
                    continue;
                }
                Err(e) => break format!("accepting a connection failed: {e}"),
            };
            if stream.set_nonblocking(false).is_err() {
                continue;
            }
            state.connections.fetch_add(1, Ordering::SeqCst);
            // Registered at its accept, so that the committer outlives it.
            let registered = committer.connection();
            if committer.open() > threads && threads < MAX_CONNECTIONS {
                threads += 1;
                let (state, receive) = (&state, &receive);
                s.spawn(move || {
                    loop {
                        let next = receive.lock().unwrap_or_else(|p| p.into_inner()).recv();
                        let Ok((stream, registered)) = next else {
                            return;
                        };
                        connection(&registered, id, stream, state);
                        // Touched before it stops counting as open: the
                        // idle limit runs from the last connection's end.
                        state.touch();
                        drop(registered);
                    }
                });
            }
            if send.send((stream, registered)).is_err() {
                break "the connection queue closed".to_string();
            }
        };
        // No new connection from here: a client that connects now is never
        // greeted, or finds no socket, and applies its change itself once
        // this process lets the writer lock go. Greeted ones finish first:
        // the pool drains the channel, then the scope waits for its threads.
        let _ = std::fs::remove_file(&addr.path);
        drop(listener);
        drop(send);
        committer.close();
        reason
    });
    // The log's fdatasyncs for acknowledgement: this process's own, and
    // those another writer's covered (FORMAT.md §5.8).
    let fsyncs = run.stats().fsyncs.load(Ordering::Relaxed)
        + run.stats().fsyncs_covered.load(Ordering::Relaxed);
    eprintln!(
        "runlog: serve: run {id}: {} changes acknowledged over {} connections in {fsyncs} fdatasyncs; stopped: {reason}",
        state.acked.load(Ordering::SeqCst),
        state.connections.load(Ordering::SeqCst),
    );
    // The lock goes with the run, after every connection has finished.
    drop(receive);
    drop(committer);
    drop(run);
    Ok(if state.failed.load(Ordering::SeqCst) {
        EXIT_FAILED
    } else {
        EXIT_DONE
    })
}

/// Why the server should stop now, if it should: a signal, a failed
/// change, or `idle` without a connection (`open`: the connections open now).
fn stop_reason(
    state: &State,
    open: usize,
    stop: &StopFlag,
    idle: Option<Duration>,
) -> Option<String> {
    if stop.requested().is_some() {
        Some("SIGTERM".into())
    } else if crate::sys::sigint_received() {
        Some("SIGINT".into())
    } else if state.failed.load(Ordering::SeqCst) {
        Some("a change failed; the run accepts no more writes".into())
    } else if let Some(limit) = idle
        && open == 0
        && state.idle_for() >= limit
    {
        Some(format!("idle for {:.1} s (--idle)", limit.as_secs_f64()))
    } else {
        None
    }
}

/// One client: the greeting, then `apply`'s protocol until it closes, its
/// changes applied by the committer.
fn connection(registered: &Connection, id: &str, stream: UnixStream, state: &State) {
    let _ = stream.set_read_timeout(Some(IDLE_CONNECTION));
    let greeting = served::greeting(id);
    if (&stream)
        .write_all(format!("{greeting}\n").as_bytes())
        .is_err()
    {
        return;
    }
    let mut input = BufReader::new(&stream);
    let mut out = BufWriter::new(&stream);
    // An error here is the client's connection (gone, or silent too long):
    // there is no one to acknowledge.
    let commit = |changes| registered.commit(changes);
    if let Ok(EXIT_FAILED) = apply_stream(&commit, &mut input, &mut out, false, &state.acked) {
        state.failed.store(true, Ordering::SeqCst);
    }
}

/// Applies `change` to run `id`: through the run's server when one greets
/// this process, else itself with `direct` (a one-shot writer). While the
/// writer lock is held, it looks for a server again every
/// [`served::SERVER_RECHECK`]: a server takes the lock before it binds its socket.
/// After [`NOTICE_AFTER`] it says who holds the lock, once, as every writer
/// does; it waits `--lock-timeout` in all.
pub fn change(
    runs: &Runs,
    id: &str,
    change: &Change,
    direct: impl Fn(&Runs) -> Result<Acked, RunError>,
) -> Result<Answer, RunError> {
    retry_while_locked(
        runs,
        served::SERVER_RECHECK,
        || runs.hand_over(id, change),
        |r| direct(r).map(Answer::Done),
    )
}
