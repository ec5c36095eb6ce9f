//! A run's server (`runlog serve`, FORMAT.md §5.9) from a writer's side:
//! where its socket is, the greeting, the operation line and the ack, and
//! the hand-over of one change. [`Runs::change`] hands its change to the
//! run's server when one greets it, and applies it itself when none does.
//! The server is the command line's; it speaks this module's protocol.

use super::doc::Budget;
use super::error::{Result, RunError};
use super::runs::Runs;
use super::transition::Change;
use serde_json::{Value, json};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The socket's name in the run's directory.
pub const SOCKET_NAME: &str = "SERVE";
/// The protocol's version, in the greeting. 2: an `item`'s ack carries its
/// ids and a `spend`'s its budget.
pub const PROTOCOL: u64 = 2;
/// Longest operation line, and longest ack line, in bytes.
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// How long a writer waits for the greeting before applying its change itself.
const GREETING_WAIT: Duration = Duration::from_secs(5);
/// Longest greeting a writer reads.
const MAX_GREETING_BYTES: usize = 4096;
/// Longest `sun_path` used as is (Linux's is 108 bytes with its NUL); a
/// longer path is reached through the directory's descriptor.
const MAX_SOCKET_PATH: usize = 100;
/// What was being done when a change handed to a server has an unknown
/// outcome: the `op` of that [`RunError::Io`].
pub const HANDED_OVER: &str = "hand the change to the run's server, which may have applied it";
/// How long a writer that found no server waits for the writer lock before
/// looking for a server again (one may have taken the lock to serve).
pub const SERVER_RECHECK: Duration = Duration::from_millis(100);

/// Where a run's socket is bound or reached: its path, or for a long one a
/// path through `/proc/self/fd` to the directory, held open while this lives.
pub struct Addr {
    /// The path to bind or connect to.
    pub path: PathBuf,
    _dir: Option<File>,
}

impl Addr {
    /// The socket of the run whose directory is `dir`.
    pub fn of(dir: &Path) -> io::Result<Addr> {
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

/// The greeting a server of run `id` writes first on each connection.
pub fn greeting(id: &str) -> String {
    json!({"serve": id, "pid": std::process::id(), "protocol": PROTOCOL}).to_string()
}

/// True when `line` is a greeting of this protocol from a server of run `id`.
fn greets(line: &[u8], id: &str) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return false;
    };
    v["serve"].as_str() == Some(id) && v["protocol"].as_u64() == Some(PROTOCOL)
}

/// The operation line of `c` (docs/CLI.md, "apply"), written from the
/// change's own serde form: its fields, flat, beside `"op"`; an item's
/// items as `"item"`, a budget's declaration beside its name. `None` for
/// `Change::Init`, which is no operation.
pub fn op_line(c: &Change) -> Option<String> {
    if matches!(c, Change::Init(_)) {
        return None;
    }
    let Ok(Value::Object(tagged)) = serde_json::to_value(c) else {
        return None;
    };
    let (_, Value::Object(mut fields)) = tagged.into_iter().next()? else {
        return None;
    };
    fields.insert("op".into(), Value::String(c.op().into()));
    if let Some(Value::Array(items)) = fields.remove("items") {
        fields.insert("item".into(), Value::Array(items));
    }
    if let Some(Value::Object(spec)) = fields.remove("spec") {
        fields.extend(spec);
    }
    Some(Value::Object(fields).to_string())
}

/// An accepted change's ack.
#[derive(Debug, Clone, PartialEq)]
pub struct Acked {
    /// Its record's seq, durable.
    pub seq: u64,
    /// An `item`'s new ids, in order.
    pub ids: Option<Vec<String>>,
    /// The budget a `spend` was recorded against, as that spend left it.
    pub budget: Option<Budget>,
}

impl Acked {
    /// The ack of a change that reports nothing but its seq.
    pub fn seq(seq: u64) -> Self {
        Acked {
            seq,
            ids: None,
            budget: None,
        }
    }

    /// The ack line: `{"seq":N}`, with `"ids"` or `"budget"` when known.
    pub fn line(&self) -> String {
        let mut v = json!({ "seq": self.seq });
        if let Some(ids) = &self.ids {
            v["ids"] = json!(ids);
        }
        if let Some(b) = &self.budget {
            v["budget"] = json!(b);
        }
        v.to_string()
    }

    /// Reads an ack line's object; `None` when it is not one.
    pub fn parse(v: &Value) -> Option<Acked> {
        let ids = match v.get("ids") {
            None => None,
            Some(ids) => Some(
                ids.as_array()?
                    .iter()
                    .map(|id| id.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()?,
            ),
        };
        let budget = match v.get("budget") {
            None => None,
            Some(b) => Some(serde_json::from_value(b.clone()).ok()?),
        };
        Some(Acked {
            seq: v.get("seq")?.as_u64()?,
            ids,
            budget,
        })
    }
}

/// A server's answer to one change.
#[derive(Debug)]
pub enum Answer {
    /// Durable: its ack.
    Done(Acked),
    /// Refused (2) or failed (1), with the server's report of why.
    Error {
        /// The server's report.
        message: String,
        /// 2 refused (nothing written), 1 failed.
        code: u8,
    },
}

/// An ack line for `change`: `{"seq":N}` (with an `item`'s `"ids"`, one per
/// item, and a `spend`'s `"budget"`: an ack without them is not one) or
/// `{"error":"…","code":1|2}`.
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
    matches!(code, 1 | 2).then_some(Answer::Error { message, code })
}

/// One line of at most `max` bytes (its newline not included); `None` when
/// the stream ends first or the line is longer.
fn read_line(r: &mut impl BufRead, max: usize) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    r.take(max as u64 + 1).read_until(b'\n', &mut line)?;
    Ok(match line.pop() {
        Some(b'\n') => Some(line),
        _ => None,
    })
}

impl Runs {
    /// Hands `change` to the server of run `id` (`runlog serve`), if one is
    /// serving it. `Ok(None)`: no server greeted this process, so none saw
    /// the change, and the caller applies it itself (a tagged run is never
    /// served). An error: the change was sent and its outcome is unknown.
    pub fn hand_over(&self, id: &str, change: &Change) -> Result<Option<Answer>> {
        if self.key().is_some() {
            return Ok(None);
        }
        let Ok(dir) = self.run_dir(id) else {
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
                io::ErrorKind::BrokenPipe => {
                    io::Error::new(io::ErrorKind::ConnectionAborted, source)
                }
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

    /// Applies one change to run `id` and returns its seq once durable:
    /// through the run's server (`runlog serve`) when one greets this
    /// process, else itself as a one-shot writer ([`Runs::change_direct`]).
    /// While the writer lock is held it looks for a server again every
    /// [`SERVER_RECHECK`] (a server takes the lock before it listens),
    /// within the lock wait. A change the server refused or failed is
    /// [`RunError::Served`], with the server's report.
    pub fn change(&self, id: &str, change: Change) -> Result<u64> {
        let started = Instant::now();
        let total = self.lock_wait().unwrap_or(Duration::ZERO);
        loop {
            match self.hand_over(id, &change)? {
                Some(Answer::Done(a)) => return Ok(a.seq),
                Some(Answer::Error { message, code }) => {
                    return Err(RunError::Served {
                        id: id.to_string(),
                        message,
                        refused: code == 2,
                    });
                }
                None => {}
            }
            let left = total.saturating_sub(started.elapsed());
            let slice = left.min(SERVER_RECHECK);
            match self
                .clone()
                .with_lock_wait(Some(slice))
                .change_direct(id, change.clone())
            {
                Err(e) if left > slice && e.is_locked() => {}
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ack_line_reads_back_as_what_it_says() {
        let b = Budget {
            limit: Some(2.0),
            owner: "ops".into(),
            spent: 2.5,
            exhausted_at: Some("2026-12-05T00:00:00Z".into()),
        };
        for a in [
            Acked::seq(7),
            Acked {
                ids: Some(vec!["item-3".into(), "item-4".into()]),
                ..Acked::seq(8)
            },
            Acked {
                budget: Some(b),
                ..Acked::seq(9)
            },
        ] {
            let v: Value = serde_json::from_str(&a.line()).unwrap();
            assert_eq!(Acked::parse(&v), Some(a));
        }
        for bad in [
            json!({}),
            json!({"seq": -1}),
            json!({"seq": 1, "ids": "item-1"}),
            json!({"seq": 1, "ids": [1]}),
            json!({"seq": 1, "budget": {"limit": 1}}),
        ] {
            assert_eq!(Acked::parse(&bad), None, "{bad}");
        }
    }

    fn unit() -> Change {
        Change::Unit {
            unit: "u".into(),
            status: super::super::doc::UnitStatus::Done,
            note: None,
            deps: None,
        }
    }

    #[test]
    fn acks_and_greetings_are_read_strictly() {
        assert!(matches!(answer(br#"{"seq":7}"#, &unit()), Some(Answer::Done(a)) if a.seq == 7));
        assert!(matches!(
            answer(br#"{"error":"refused: x","code":2}"#, &unit()),
            Some(Answer::Error { code: 2, .. })
        ));
        for bad in [
            &b"{}"[..],
            b"seq 7",
            br#"{"error":"x"}"#,
            br#"{"error":"x","code":300}"#,
            br#"{"error":"x","code":0}"#,
            br#"{"seq":"7"}"#,
            br#"{"seq":7,"ids":[7]}"#,
        ] {
            assert!(
                answer(bad, &unit()).is_none(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(greets(greeting("r").as_bytes(), "r"));
        assert!(!greets(br#"{"serve":"other","pid":1,"protocol":2}"#, "r"));
        // A server of protocol 1 would answer an `item` without its ids.
        assert!(!greets(br#"{"serve":"r","pid":1,"protocol":1}"#, "r"));
        assert!(!greets(b"not json", "r"));
    }

    #[test]
    fn an_item_or_spend_ack_without_what_the_caller_needs_is_not_an_ack() {
        let item = Change::Items {
            items: vec![
                super::super::json::Json(json!({"a": 1})),
                super::super::json::Json(json!({"b": 2})),
            ],
        };
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
    fn a_line_longer_than_its_cap_or_cut_short_is_no_line() {
        let mut r = BufReader::new(&b"abc\nabcdef\nxy"[..]);
        assert_eq!(read_line(&mut r, 5).unwrap(), Some(b"abc".to_vec()));
        assert_eq!(read_line(&mut r, 5).unwrap(), None, "longer than 5");
        let mut r = BufReader::new(&b"xy"[..]);
        assert_eq!(read_line(&mut r, 5).unwrap(), None, "no newline");
    }

    #[test]
    fn a_long_directory_is_reached_through_its_descriptor() {
        let short = Addr::of(Path::new("/tmp/r")).unwrap();
        assert_eq!(short.path, Path::new("/tmp/r/SERVE"));
        let dir =
            std::env::temp_dir().join(format!("served-{}-{}", std::process::id(), "x".repeat(120)));
        std::fs::create_dir_all(&dir).unwrap();
        let long = Addr::of(&dir).unwrap();
        assert!(long.path.starts_with("/proc/self/fd/"), "{:?}", long.path);
        let l = std::os::unix::net::UnixListener::bind(&long.path).unwrap();
        assert!(dir.join(SOCKET_NAME).exists());
        UnixStream::connect(&Addr::of(&dir).unwrap().path).unwrap();
        drop(l);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
