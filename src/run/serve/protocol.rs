//! The serve protocol's pieces (FORMAT.md §5.9; docs/CLI.md, "serve" and
//! "apply"): where a run's socket is, the greeting, the operation line a
//! client sends and the ack line it gets back, with a refused or failed
//! change's error typed (`wire.rs`). The client (`client.rs`) and the
//! server (`server.rs`) both speak it through this file.

use super::wire;
use crate::run::doc::Budget;
use crate::run::error::RunError;
use crate::run::open::Warning;
use crate::run::transition::Change;
use serde_json::{Value, json};
use std::fs::File;
use std::io::{self, BufRead, Read};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The socket's name in the run's directory.
pub(crate) const SOCKET_NAME: &str = "SERVE";
/// The protocol's version, in the greeting. 2: an `item`'s ack carries its
/// ids and a `spend`'s its budget. (An error ack's `detail`, the typed
/// error, is an addition a client of version 2 ignores.)
pub(crate) const PROTOCOL: u64 = 2;
/// Longest operation line, and longest ack line, in bytes.
pub(crate) const MAX_LINE_BYTES: usize = 1 << 20;
/// How long a writer waits for the greeting before applying its change itself.
pub(super) const GREETING_WAIT: Duration = Duration::from_secs(5);
/// Longest greeting a writer reads.
pub(super) const MAX_GREETING_BYTES: usize = 4096;
/// Longest `sun_path` used as is (Linux's is 108 bytes with its NUL); a
/// longer path is reached through the directory's descriptor.
const MAX_SOCKET_PATH: usize = 100;
/// What was being done when a change handed to a server has an unknown
/// outcome: the `op` of that [`RunError::Io`] ([`RunError::outcome_unknown`]).
pub(crate) const HANDED_OVER: &str =
    "hand the change to the run's server, which may have applied it";

/// Where a run's socket is bound or reached: its path, or for a long one a
/// path through `/proc/self/fd` to the directory, held open while this lives.
pub(super) struct Addr {
    /// The path to bind or connect to.
    pub(super) path: PathBuf,
    _dir: Option<File>,
}

impl Addr {
    /// The socket of the run whose directory is `dir`.
    pub(super) fn of(dir: &Path) -> io::Result<Addr> {
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
pub(super) fn greeting(id: &str) -> String {
    json!({"serve": id, "pid": std::process::id(), "protocol": PROTOCOL}).to_string()
}

/// True when `line` is a greeting of this protocol from a server of run `id`.
pub(super) fn greets(line: &[u8], id: &str) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return false;
    };
    v["serve"].as_str() == Some(id) && v["protocol"].as_u64() == Some(PROTOCOL)
}

/// The operation line of `c` (docs/CLI.md, "apply"), written from the
/// change's own serde form: its fields, flat, beside `"op"`; an item's
/// items as `"item"`, a budget's declaration beside its name. `None` for
/// `Change::Init`, which is no operation.
pub(crate) fn op_line(c: &Change) -> Option<String> {
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

/// What an accepted change came to, once durable: its seq, and for an
/// `item` or a `spend` the state it left (the new items' ids, the budget as
/// the spend left it). The same whether the change was applied by this
/// process or by the run's server ([`Runs::change_waiting`]).
///
/// [`Runs::change_waiting`]: crate::run::Runs::change_waiting
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Acked {
    /// Its record's seq, durable.
    pub seq: u64,
    /// An `item`'s new ids, in order.
    pub ids: Option<Vec<String>>,
    /// The budget a `spend` was recorded against, as that spend left it.
    pub budget: Option<Budget>,
    /// What the change warns of: [`Warning::BUDGET_EXCEEDED`] after a
    /// `spend` that reached its budget's limit. Not on the ack line: the
    /// writer reads it from the budget.
    pub warnings: Vec<Warning>,
}

impl Acked {
    /// The ack of a change that reports nothing but its seq.
    pub(crate) fn seq(seq: u64) -> Self {
        Acked {
            seq,
            ids: None,
            budget: None,
            warnings: vec![],
        }
    }

    /// The ack line: `{"seq":N}`, with `"ids"` or `"budget"` when known.
    pub(crate) fn line(&self) -> String {
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
    pub(crate) fn parse(v: &Value) -> Option<Acked> {
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
            warnings: vec![],
        })
    }
}

/// A server's answer to one change.
#[derive(Debug)]
pub(super) enum Answer {
    /// Durable: its ack.
    Done(Acked),
    /// Refused (nothing written) or failed: the server's error, typed as it
    /// was there when the ack carries it (`wire.rs`), else
    /// [`RunError::Served`] with the server's report.
    Error(RunError),
}

/// The error ack of `e`: `{"error":"…","code":1|2,"detail":{…}}`, where
/// `message` is the error as the writer of the ack reports it and `detail`
/// the error itself (`wire.rs`), when it has a wire form.
pub(crate) fn error_line(message: &str, code: u8, e: Option<&RunError>) -> String {
    let mut v = json!({ "error": message, "code": code });
    if let Some(detail) = e.and_then(wire::to_wire) {
        v["detail"] = detail;
    }
    v.to_string()
}

/// An ack line of run `id` for `change`: `{"seq":N}` (with an `item`'s
/// `"ids"`, one per item, and a `spend`'s `"budget"`: an ack without them is
/// not one) or an error ack.
pub(super) fn answer(line: &[u8], id: &str, change: &Change) -> Option<Answer> {
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
    if !matches!(code, 1 | 2) {
        return None;
    }
    // The typed error, when it says the same as the code: a detail that
    // disagrees with its code is not trusted over it.
    let typed = v
        .get("detail")
        .and_then(wire::from_wire)
        .filter(|e| e.exit_code() == code);
    Some(Answer::Error(typed.unwrap_or(RunError::Served {
        id: id.to_string(),
        message,
        refused: code == 2,
    })))
}

/// One line of at most `max` bytes (its newline not included); `None` when
/// the stream ends first or the line is longer.
pub(super) fn read_line(r: &mut impl BufRead, max: usize) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    r.take(max as u64 + 1).read_until(b'\n', &mut line)?;
    Ok(match line.pop() {
        Some(b'\n') => Some(line),
        _ => None,
    })
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
            status: crate::run::UnitStatus::Done,
            note: None,
            deps: None,
        }
    }

    #[test]
    fn acks_and_greetings_are_read_strictly() {
        assert!(
            matches!(answer(br#"{"seq":7}"#, "r", &unit()), Some(Answer::Done(a)) if a.seq == 7)
        );
        // An error ack without a detail is the server's report, untyped.
        assert!(matches!(
            answer(br#"{"error":"refused: x","code":2}"#, "r", &unit()),
            Some(Answer::Error(RunError::Served { refused: true, .. }))
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
                answer(bad, "r", &unit()).is_none(),
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
                crate::run::Json(json!({"a": 1})),
                crate::run::Json(json!({"b": 2})),
            ],
        };
        assert!(answer(br#"{"seq":3,"ids":["item-1","item-2"]}"#, "r", &item).is_some());
        for bad in [&br#"{"seq":3}"#[..], br#"{"seq":3,"ids":["item-2"]}"#] {
            assert!(
                answer(bad, "r", &item).is_none(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let spend = Change::Spend {
            budget: "usd".into(),
            amount: 1.0,
        };
        assert!(answer(br#"{"seq":3}"#, "r", &spend).is_none());
        let with =
            br#"{"seq":3,"budget":{"limit":2.0,"owner":"o","spent":1.0,"exhaustedAt":null}}"#;
        assert!(answer(with, "r", &spend).is_some());
    }

    #[test]
    fn a_line_longer_than_its_cap_or_cut_short_is_no_line() {
        let mut r = std::io::BufReader::new(&b"abc\nabcdef\nxy"[..]);
        assert_eq!(read_line(&mut r, 5).unwrap(), Some(b"abc".to_vec()));
        assert_eq!(read_line(&mut r, 5).unwrap(), None, "longer than 5");
        let mut r = std::io::BufReader::new(&b"xy"[..]);
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
        std::os::unix::net::UnixStream::connect(&Addr::of(&dir).unwrap().path).unwrap();
        drop(l);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
