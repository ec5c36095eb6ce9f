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
use super::ops::{Line, MAX_OP_LINE_BYTES, op_line, read_line_capped};
use super::wait::{retry_while_locked, with_lock_notice};
use super::{EXIT_DONE, EXIT_FAILED};
use runlog::run::{Change, RunError, Runs, StopFlag};
use serde_json::{Value, json};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The socket's name in the run's directory.
pub const SOCKET_NAME: &str = "SERVE";
/// The protocol's version, in the greeting. 2: an `item`'s ack carries its
/// ids and a `spend`'s its budget (`ack.rs`), so those calls are served too.
const PROTOCOL: u64 = 2;
/// Threads serving connections at most; more connections wait their turn.
const MAX_CONNECTIONS: usize = 256;
/// A connection that sends nothing for this long is closed by the server.
const IDLE_CONNECTION: Duration = Duration::from_secs(10);
/// How long a client waits for the greeting before applying its change itself.
const GREETING_WAIT: Duration = Duration::from_secs(5);
/// Longest greeting a client reads.
const MAX_GREETING_BYTES: usize = 4096;
/// How often the server looks for a stop (a signal, its idle limit) while no
/// connection comes.
const STOP_POLL: Duration = Duration::from_millis(50);
/// The longest `--commit-delay`, in seconds (PostgreSQL caps its
/// `commit_delay` at the same 0.1 s): a longer one is surely a mistake.
pub const MAX_COMMIT_DELAY_SECS: f64 = 0.1;
/// Longest `sun_path` used as is (Linux's is 108 bytes with its NUL); a
/// longer path is reached through the directory's descriptor.
const MAX_SOCKET_PATH: usize = 100;

/// Where the socket is bound or reached: its path, or for a long one a path
/// through `/proc/self/fd` to the directory held open here.
struct Addr {
    path: PathBuf,
    _dir: Option<File>,
}

impl Addr {
    fn of(dir: &Path) -> io::Result<Addr> {
        let full = dir.join(SOCKET_NAME);
        if full.as_os_str().len() <= MAX_SOCKET_PATH {
            return Ok(Addr {
                path: full,
                _dir: None,
            });
        }
        let d = File::open(dir)?;
        let path = PathBuf::from(format!("/proc/self/fd/{}/{SOCKET_NAME}", d.as_raw_fd()));
        Ok(Addr {
            path,
            _dir: Some(d),
        })
    }
}

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
    let greeting = json!({"serve": id, "pid": std::process::id(), "protocol": PROTOCOL});
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

/// A server's answer to one change.
pub enum Answer {
    /// Durable: its ack.
    Done(Acked),
    /// Refused (2) or failed (1), with the server's report of why.
    Error { message: String, code: u8 },
}

/// How long a writer that found no server waits for the writer lock before
/// looking for a server again (one may have taken the lock to serve).
const SERVER_RECHECK: Duration = Duration::from_millis(100);

/// Applies `change` to run `id`: through the run's server when one greets
/// this process, else itself with `direct` (a one-shot writer). While the
/// writer lock is held, it looks for a server again every
/// [`SERVER_RECHECK`]: a server takes the lock before it binds its socket.
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
        SERVER_RECHECK,
        || hand_over(runs, id, change),
        |r| direct(r).map(Answer::Done),
    )
}

/// Hands `change` to the server of run `id`, if one is serving it.
/// `Ok(None)`: no server greeted this process, so none saw the change, and
/// the caller applies it itself. An error: the change was sent and its
/// outcome is unknown.
fn hand_over(runs: &Runs, id: &str, change: &Change) -> Result<Option<Answer>, RunError> {
    if runs.key().is_some() {
        return Ok(None);
    }
    let Ok(dir) = runs.run_dir(id) else {
        return Ok(None);
    };
    let Ok(addr) = Addr::of(&dir) else {
        return Ok(None);
    };
    let Ok(stream) = UnixStream::connect(&addr.path) else {
        return Ok(None);
    };
    let _ = stream.set_read_timeout(Some(GREETING_WAIT));
    let mut reader = BufReader::new(&stream);
    match read_line_capped(&mut reader, MAX_GREETING_BYTES) {
        Ok(Some(Line::Text(t))) if greets(&t, id) => {}
        _ => return Ok(None),
    }
    // The line is written only for a server: without one (the usual case),
    // a call pays a failed `connect` and nothing more.
    let Some(line) = op_line(change) else {
        return Ok(None);
    };
    // The ack comes after the server's fdatasync: no time limit, as a call
    // applying its change itself waits for its own.
    if stream.set_read_timeout(None).is_err() {
        return Ok(None);
    }
    // From here the server may read the change: never apply it again.
    let socket = dir.join(SOCKET_NAME);
    let unknown = |source: io::Error| RunError::Io {
        op: "hand the change to `runlog serve`, which may have applied it (see `runlog get`)",
        path: socket.clone(),
        // A server gone is reported: a broken pipe here is not stdout's,
        // which the CLI ends by SIGPIPE without a word.
        source: match source.kind() {
            io::ErrorKind::BrokenPipe => io::Error::new(io::ErrorKind::ConnectionAborted, source),
            _ => source,
        },
    };
    (&stream)
        .write_all(format!("{line}\n").as_bytes())
        .and_then(|_| stream.shutdown(std::net::Shutdown::Write))
        .map_err(unknown)?;
    let ack = read_line_capped(&mut reader, MAX_OP_LINE_BYTES).map_err(unknown)?;
    let text = match ack {
        Some(Line::Text(t)) => t,
        _ => {
            return Err(unknown(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection before acknowledging the change",
            )));
        }
    };
    answer(&text, change)
        .ok_or_else(|| {
            unknown(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the server's answer is not an ack: {:?}",
                    String::from_utf8_lossy(&text[..text.len().min(200)])
                ),
            ))
        })
        .map(Some)
}

/// True when `line` is a greeting of this protocol from a server of run `id`.
fn greets(line: &[u8], id: &str) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return false;
    };
    v["serve"].as_str() == Some(id) && v["protocol"].as_u64() == Some(PROTOCOL)
}

/// An ack line for `change`: `{"seq":N}` (with an `item`'s `"ids"`, a
/// `spend`'s `"budget"`: an ack without them is not one) or
/// `{"error":"…","code":C}`.
fn answer(line: &[u8], change: &Change) -> Option<Answer> {
    let v: Value = serde_json::from_slice(line).ok()?;
    if v.get("seq").is_some() {
        let a = Acked::parse(&v)?;
        let complete = match change {
            Change::Items { items } => a.ids.as_ref().is_some_and(|ids| ids.len() == items.len()),
            Change::Spend { .. } => a.budget.is_some(),
            _ => true,
        };
        return complete.then_some(Answer::Done(a));
    }
    let message = v["error"].as_str()?.to_string();
    let code = u8::try_from(v["code"].as_u64()?).ok()?;
    Some(Answer::Error { message, code })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit() -> Change {
        super::super::ops::parse_op_line(r#"{"op":"unit","unit":"u","status":"done"}"#).unwrap()
    }

    #[test]
    fn an_item_or_spend_ack_without_what_the_call_prints_is_not_an_ack() {
        let item =
            super::super::ops::parse_op_line(r#"{"op":"item","item":[{"a":1},{"b":2}]}"#).unwrap();
        assert!(answer(br#"{"seq":3,"ids":["item-1","item-2"]}"#, &item).is_some());
        for bad in [&br#"{"seq":3}"#[..], br#"{"seq":3,"ids":["item-2"]}"#] {
            assert!(
                answer(bad, &item).is_none(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let spend = Change::Spend {
            budget: "usd".into(),
            amount: 1.0,
        };
        assert!(answer(br#"{"seq":3}"#, &spend).is_none());
        let with =
            br#"{"seq":3,"budget":{"limit":2.0,"owner":"o","spent":1.0,"exhaustedAt":null}}"#;
        assert!(answer(with, &spend).is_some());
    }

    #[test]
    fn acks_and_greetings_are_read_strictly() {
        assert!(matches!(answer(br#"{"seq":7}"#, &unit()), Some(Answer::Done(a)) if a.seq == 7));
        assert!(matches!(
            answer(br#"{"seq":8,"ids":["item-1"]}"#, &unit()),
            Some(Answer::Done(a)) if a.ids == Some(vec!["item-1".to_string()])
        ));
        assert!(matches!(
            answer(br#"{"error":"refused: x","code":2}"#, &unit()),
            Some(Answer::Error { code: 2, .. })
        ));
        for bad in [
            &b"{}"[..],
            b"seq 7",
            br#"{"error":"x"}"#,
            br#"{"error":"x","code":300}"#,
            br#"{"seq":"7"}"#,
            br#"{"seq":7,"ids":[7]}"#,
        ] {
            assert!(
                answer(bad, &unit()).is_none(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(greets(br#"{"serve":"r","pid":1,"protocol":2}"#, "r"));
        assert!(!greets(br#"{"serve":"other","pid":1,"protocol":2}"#, "r"));
        // A server of protocol 1 would answer an `item` without its ids.
        assert!(!greets(br#"{"serve":"r","pid":1,"protocol":1}"#, "r"));
        assert!(!greets(b"not json", "r"));
    }

    #[test]
    fn a_long_directory_is_reached_through_its_descriptor() {
        let short = Addr::of(Path::new("/tmp/r")).unwrap();
        assert_eq!(short.path, Path::new("/tmp/r/SERVE"));
        let dir = std::env::temp_dir().join("x".repeat(120));
        std::fs::create_dir_all(&dir).unwrap();
        let long = Addr::of(&dir).unwrap();
        assert!(long.path.starts_with("/proc/self/fd/"), "{:?}", long.path);
        let l = UnixListener::bind(&long.path).unwrap();
        assert!(dir.join(SOCKET_NAME).exists());
        UnixStream::connect(&Addr::of(&dir).unwrap().path).unwrap();
        drop(l);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
