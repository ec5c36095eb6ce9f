//! A run's server (`runlog serve`, [`Runs::serve`]): one long-lived writer
//! of a run, to which one-shot writer processes hand their change over a
//! Unix socket instead of each opening the run itself (FORMAT.md §5.9;
//! docs/CLI.md, "serve").
//!
//! The server is an ordinary writer: it holds the run's writer lock for its
//! life, and its connections' changes go through one committer
//! (`committer.rs`), so many processes' changes share one write and one
//! fdatasync. Each connection speaks `apply`'s protocol (an operation line
//! in, an ack line out once durable) after a greeting line from the server.
//! A client sends its change only after the greeting: a connection that was
//! never greeted never reached a server that could read it, so the client
//! applies the change itself (the socket is a dead server's, or the server
//! is stopping). After the change is sent, anything but an ack is an
//! unknown outcome, said as such, never retried: the server may have made
//! it durable.

use super::committer::{Committer, Connection};
use super::protocol::{Addr, SOCKET_NAME, greeting};
use super::stream::{Notice, apply_stream};
use crate::engine::ErrorChain;
use crate::run::error::{Result, RunError};
use crate::run::handle::Run;
use crate::run::open::Warning;
use crate::run::runs::Runs;
use std::io::{self, BufReader, BufWriter, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Threads serving connections at most; more connections wait their turn.
const MAX_CONNECTIONS: usize = 256;
/// A connection that sends nothing for this long is closed by the server.
const IDLE_CONNECTION: Duration = Duration::from_secs(10);
/// How often the server looks for a stop (its `stop` callback, its idle
/// limit) while no connection comes.
const STOP_POLL: Duration = Duration::from_millis(50);

/// A run's server, bound to its socket and not yet serving: made by
/// [`Runs::serve`], run by [`Server::run`]. It holds the run's writer lock;
/// dropped, it removes its socket and lets the lock go.
pub struct Server {
    run: Run,
    socket: PathBuf,
    addr: Addr,
    listener: UnixListener,
    commit_delay: Duration,
}

/// How a server's run went ([`Server::run`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeReport {
    /// Changes acknowledged durable.
    pub acked: u64,
    /// Connections accepted.
    pub connections: u64,
    /// The log's fdatasyncs for acknowledgement: the server's own, and those
    /// another writer's covered (FORMAT.md §5.8).
    pub fsyncs: u64,
    /// Why it stopped: what `stop` said, its idle limit, or a failure.
    pub stopped: String,
    /// A change failed (not refused): the run accepts no more writes until
    /// it is opened again.
    pub failed: bool,
}

impl Runs {
    /// Opens run `id` as its server: takes the writer lock (waiting
    /// [`Runs::lock_wait`]) and binds the run's socket, `SERVE` in its
    /// directory, mode 0600. Changes handed to it are held up to
    /// `commit_delay` (at most 0.1 s) while another connection is open, so
    /// that more share an fdatasync. Refused for a tagged run: a process on
    /// the socket could not prove it holds the key.
    pub fn serve(&self, id: &str, commit_delay: Duration) -> Result<Server> {
        if self.key().is_some() {
            return Err(RunError::Invalid(format!(
                "run {id}: a tagged run is not served: a process on the socket could not prove it holds the key (its writers open the run themselves)"
            )));
        }
        if commit_delay > Server::MAX_COMMIT_DELAY {
            return Err(RunError::Invalid(format!(
                "a commit delay of {:.3} s is longer than the {:.1} s allowed",
                commit_delay.as_secs_f64(),
                Server::MAX_COMMIT_DELAY.as_secs_f64()
            )));
        }
        let run = self.open(id)?;
        let dir = self.run_dir(id)?;
        let socket = dir.join(SOCKET_NAME);
        let addr =
            Addr::of(&dir).map_err(io_error("open the run directory for its socket", &dir))?;
        // Only the writer lock's holder binds the socket, and this process
        // holds it: a socket already there is a dead server's.
        match std::fs::remove_file(&addr.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(io_error("remove a dead server's socket", &socket)(e));
            }
            _ => {}
        }
        let listener =
            UnixListener::bind(&addr.path).map_err(io_error("bind the socket", &socket))?;
        let server = Server {
            run,
            socket,
            addr,
            listener,
            commit_delay,
        };
        // Whoever may connect may write the run: the owner only, as its files.
        std::fs::set_permissions(
            &server.addr.path,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .map_err(io_error("set the socket's mode", &server.socket))?;
        server.listener.set_nonblocking(true).map_err(io_error(
            "make the socket's accept non-blocking",
            &server.socket,
        ))?;
        Ok(server)
    }
}

fn io_error<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> RunError + 'a {
    move |source| RunError::io(op, path, source)
}

/// What the server's threads share.
struct State {
    connections: AtomicU64,
    acked: AtomicU64,
    /// The first change that failed (not refused): the store accepts no
    /// more writes.
    failed: Mutex<Option<String>>,
    last_activity: Mutex<Instant>,
}

impl State {
    fn touch(&self) {
        *self.last_activity.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.last_activity
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed()
    }

    fn failure(&self) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Server {
    /// The longest commit delay (PostgreSQL caps its `commit_delay` at the
    /// same 0.1 s): a longer one is surely a mistake.
    pub const MAX_COMMIT_DELAY: Duration = Duration::from_millis(100);

    /// The socket's path (in the run's directory).
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Serves the run until `stop` gives a reason (it is asked every 50 ms),
    /// `idle` passes without a connection, or a change fails. Connections
    /// greeted before the stop are finished first; then the socket is
    /// removed and the writer lock let go. `warn` hears the writer's
    /// warnings (a compaction deferred), from the committer's thread.
    pub fn run(
        self,
        idle: Option<Duration>,
        stop: &dyn Fn() -> Option<String>,
        warn: &(dyn Fn(&Warning) + Sync),
    ) -> ServeReport {
        let state = State {
            connections: AtomicU64::new(0),
            acked: AtomicU64::new(0),
            failed: Mutex::new(None),
            last_activity: Mutex::new(Instant::now()),
        };
        let id = self.run.id().to_string();
        // Connections go to a pool of threads, started as needed and kept: a
        // thread started for each connection cost more than its change.
        let committer = Committer::new(&self.run, self.commit_delay, warn);
        let (send, receive) = std::sync::mpsc::channel::<(UnixStream, Connection)>();
        let receive = Mutex::new(receive);
        // The accepting loop decides alone when to stop, and says why.
        let stopped = std::thread::scope(|s| {
            s.spawn(|| committer.run());
            let mut threads = 0usize;
            let reason = loop {
                if let Some(why) = stop_reason(&state, committer.open(), stop, idle) {
                    break why;
                }
                if !crate::sys::readable_within(self.listener.as_fd(), STOP_POLL) {
                    continue;
                }
                let stream = match self.listener.accept() {
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
                    let (state, receive, id) = (&state, &receive, id.as_str());
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
            // No new connection from here: a client that connects now is
            // never greeted, or finds no socket, and applies its change
            // itself once this process lets the writer lock go. Greeted
            // ones finish first: the pool drains the channel, then the scope
            // waits for its threads.
            let _ = std::fs::remove_file(&self.addr.path);
            drop(send);
            committer.close();
            reason
        });
        let stats = self.run.stats();
        ServeReport {
            acked: state.acked.load(Ordering::SeqCst),
            connections: state.connections.load(Ordering::SeqCst),
            fsyncs: stats.fsyncs.load(Ordering::Relaxed)
                + stats.fsyncs_covered.load(Ordering::Relaxed),
            stopped,
            failed: state.failure().is_some(),
        }
        // The lock goes with the run, after every connection has finished.
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Only this process's socket: it holds the writer lock until the run
        // below is dropped, after this.
        let _ = std::fs::remove_file(&self.addr.path);
    }
}

/// Why the server should stop now, if it should: `stop`'s reason, a failed
/// change, or `idle` without a connection (`open`: the connections open now).
fn stop_reason(
    state: &State,
    open: usize,
    stop: &dyn Fn() -> Option<String>,
    idle: Option<Duration>,
) -> Option<String> {
    if let Some(why) = stop() {
        Some(why)
    } else if let Some(why) = state.failure() {
        Some(format!(
            "a change failed ({why}); the run accepts no more writes"
        ))
    } else if let Some(limit) = idle
        && open == 0
        && state.idle_for() >= limit
    {
        Some(format!("idle for {:.1} s", limit.as_secs_f64()))
    } else {
        None
    }
}

/// One client: the greeting, then `apply`'s protocol until it closes, its
/// changes applied by the committer. Its errors cross typed; a refusal is
/// the client's to report, a failure is the server's too.
fn connection(registered: &Connection, id: &str, stream: UnixStream, state: &State) {
    let _ = stream.set_read_timeout(Some(IDLE_CONNECTION));
    if (&stream)
        .write_all(format!("{}\n", greeting(id)).as_bytes())
        .is_err()
    {
        return;
    }
    let mut input = BufReader::new(&stream);
    let mut out = BufWriter::new(&stream);
    let commit = |changes| registered.commit(changes);
    let render = |e: &RunError| ErrorChain(e).to_string();
    let mut notice = |n: Notice<'_>| {
        if let Notice::Line {
            message,
            refused: false,
            ..
        } = n
        {
            let mut failed = state.failed.lock().unwrap_or_else(|p| p.into_inner());
            failed.get_or_insert_with(|| message.to_string());
        }
    };
    // An error here is the client's connection (gone, or silent too long):
    // there is no one to acknowledge.
    let _ = apply_stream(
        &commit,
        &mut input,
        &mut out,
        &render,
        "",
        &mut notice,
        &state.acked,
    );
}
