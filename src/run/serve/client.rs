//! A writer's side of a run's server, and the one lock-retry loop every
//! writer uses. A change goes to the run's server when one greets this
//! process, else is applied here as a one-shot writer; while the writer
//! lock is held, the loop tries again in slices, looking for a server in
//! between (a server takes the lock before it binds its socket), and tells
//! its caller who holds the lock (`Waiting`) after each slice. A try that
//! meets a held lock writes nothing, so trying again is safe.

use super::batch::{After, budget_warning};
use super::protocol::{
    Acked, Addr, Answer, GREETING_WAIT, HANDED_OVER, MAX_GREETING_BYTES, MAX_LINE_BYTES,
    SOCKET_NAME, answer, greets, op_line, read_line,
};
use crate::engine;
use crate::run::error::{Result, RunError};
use crate::run::runs::Runs;
use crate::run::transition::Change;
use std::io::{self, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a change that found no server waits for the writer lock before
/// looking for a server again (one may have taken the lock to serve).
const SERVER_RECHECK: Duration = Duration::from_millis(100);
/// How long any other writer waits for the lock in one try: how often it
/// tells its caller it is waiting.
const LOCK_SLICE: Duration = Duration::from_secs(1);

/// A writer waiting for the run's writer lock, which another process
/// holds: what the `waiting` callback of [`Runs::change_waiting`] and
/// [`Runs::waiting_for_lock`] hears after each try.
#[derive(Debug)]
#[non_exhaustive]
pub struct Waiting<'a> {
    /// The lock file.
    pub lock: &'a Path,
    /// Who holds it, as its lock file says (e.g. `pid 4242`).
    pub holder: Option<&'a str>,
    /// How long this call has waited so far.
    pub waited: Duration,
    /// How much longer it waits ([`Runs::lock_wait`] in all).
    pub left: Duration,
}

impl Runs {
    /// Runs `f` with these runs in tries that each wait for the writer lock
    /// at most a second, until one gets it or [`Runs::lock_wait`] has passed;
    /// after each try that met the lock held, `waiting` hears who holds it.
    /// A lock still held after the whole wait is [`engine::Error::Locked`]
    /// saying how long this call waited in all.
    pub fn waiting_for_lock<T>(
        &self,
        waiting: &mut dyn FnMut(&Waiting<'_>),
        f: impl Fn(&Runs) -> Result<T>,
    ) -> Result<T> {
        retry_locked(self, LOCK_SLICE, waiting, || Ok(None), f)
    }

    /// Applies one change to run `id` and returns its seq once durable:
    /// [`Runs::change_waiting`] without a `waiting` callback.
    pub fn change(&self, id: &str, change: Change) -> Result<u64> {
        self.change_waiting(id, change, &mut |_| {}).map(|a| a.seq)
    }

    /// Applies one change to run `id` and returns what it came to once
    /// durable: through the run's server (`runlog serve`, [`Runs::serve`])
    /// when one greets this process, else itself as a one-shot writer. While
    /// the writer lock is held it looks for a server again every 0.1 s
    /// within [`Runs::lock_wait`], and `waiting` hears who holds the lock.
    ///
    /// Its errors are the same either way: a server sends its error typed,
    /// and it reads back as the same variant. A change sent to a server
    /// that did not answer is an unknown outcome
    /// ([`RunError::outcome_unknown`]): the server may have applied it, and
    /// it is never sent again.
    pub fn change_waiting(
        &self,
        id: &str,
        change: Change,
        waiting: &mut dyn FnMut(&Waiting<'_>),
    ) -> Result<Acked> {
        let after = After::of(&change);
        let mut acked = retry_locked(
            self,
            SERVER_RECHECK,
            waiting,
            || match hand_over(self, id, &change)? {
                None => Ok(None),
                Some(Answer::Done(a)) => Ok(Some(a)),
                Some(Answer::Error(e)) => Err(e),
            },
            |r| {
                let run = r.open_store_as(id, false, true)?;
                let seq = run.apply(change.clone())?;
                Ok(run.read(|v| after.ack(seq, v)))
            },
        )?;
        if let (Change::Spend { budget, .. }, Some(b)) = (&change, &acked.budget) {
            acked.warnings.extend(budget_warning(id, budget, b));
        }
        Ok(acked)
    }
}

/// Runs `f` in tries that wait at most `every` for the writer lock, until
/// one gets it or the lock wait has passed. Before each try, `settle` may
/// answer in `f`'s place (a change handed to the run's server).
fn retry_locked<T>(
    runs: &Runs,
    every: Duration,
    waiting: &mut dyn FnMut(&Waiting<'_>),
    mut settle: impl FnMut() -> Result<Option<T>>,
    f: impl Fn(&Runs) -> Result<T>,
) -> Result<T> {
    let started = Instant::now();
    // No wait given: fail at once, as `Runs::with_lock_wait(None)` says.
    let total = runs.lock_wait().unwrap_or(Duration::ZERO);
    loop {
        if let Some(t) = settle()? {
            return Ok(t);
        }
        let left = total.saturating_sub(started.elapsed());
        let slice = left.min(every);
        match f(&runs.clone().with_lock_wait(Some(slice))) {
            Err(RunError::Engine {
                source: engine::Error::Locked { path, holder, .. },
                ..
            }) if left > slice => waiting(&Waiting {
                lock: &path,
                holder: holder.as_deref(),
                waited: started.elapsed(),
                left: left - slice,
            }),
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

/// Hands `change` to the server of run `id`, if one is serving it.
/// `Ok(None)`: no server greeted this process, so none saw the change, and
/// the caller applies it itself (a tagged run is never served). An error:
/// the change was sent and its outcome is unknown.
fn hand_over(runs: &Runs, id: &str, change: &Change) -> Result<Option<Answer>> {
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
    match read_line(&mut reader, MAX_GREETING_BYTES) {
        Ok(Some(t)) if greets(&t, id) => {}
        _ => return Ok(None),
    }
    // The line is written only for a server: without one (the usual
    // case), a writer pays a failed `connect` and nothing more.
    let Some(line) = op_line(change) else {
        return Ok(None);
    };
    // The ack comes after the server's fdatasync: no time limit, as a
    // writer applying its change itself waits for its own.
    if stream.set_read_timeout(None).is_err() {
        return Ok(None);
    }
    // From here the server may read the change: never apply it again.
    let socket = dir.join(SOCKET_NAME);
    let unknown = |source: io::Error| RunError::Io {
        op: HANDED_OVER,
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
    let Some(text) = read_line(&mut reader, MAX_LINE_BYTES).map_err(unknown)? else {
        return Err(unknown(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the server closed the connection before acknowledging the change",
        )));
    };
    answer(&text, id, change)
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
