//! The JSON-lines operations `runlog apply` reads on stdin. An operation is a
//! [`Change`] itself, written flat and named by an `"op"` field
//! (`{"op":"unit","unit":"u1","status":"done"}` is `Change::Unit`), with two
//! conveniences: `item` takes one object or an array of them, and `budget`
//! gives `limit` and `owner` beside `name`. There is no second schema to keep
//! in step: a field added to a `Change` is an operation field at once.
//! Parsing caps line length and nesting first. The `apply_input` fuzz target
//! runs it (public under the `sim` feature, as `runlog::run::ops`).

use crate::run::{Change, Json};
use serde_json::{Map, Value};
use std::io::BufRead;

/// Longest operation line accepted, in bytes: the serve protocol's.
pub const MAX_OP_LINE_BYTES: usize = super::protocol::MAX_LINE_BYTES;

/// One line read with a length cap.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// A complete line (without its newline).
    Text(Vec<u8>),
    /// A line longer than the cap (its bytes were discarded).
    TooLong(usize),
}

/// Reads one line of at most `max` bytes; `None` at end of input. A longer
/// line is consumed and reported, never held in memory.
pub fn read_line_capped(r: &mut impl BufRead, max: usize) -> std::io::Result<Option<Line>> {
    let mut buf = Vec::new();
    let mut seen = 0usize;
    let mut any = false;
    loop {
        let avail = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            break;
        }
        any = true;
        let (chunk, used, done) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (&avail[..i], i + 1, true),
            None => (avail, avail.len(), false),
        };
        seen += chunk.len();
        if seen <= max {
            buf.extend_from_slice(chunk);
        }
        r.consume(used);
        if done {
            break;
        }
    }
    if !any {
        return Ok(None);
    }
    Ok(Some(if seen > max {
        Line::TooLong(seen)
    } else {
        Line::Text(buf)
    }))
}

/// The `op` names, as a line spells them: [`Change::op`] of every change but
/// `init` (a run is created by `init` or `start`, never by `apply`).
pub const OP_NAMES: [&str; 8] = [
    "unit",
    "phase",
    "item",
    "resolve",
    "budget",
    "spend",
    "checkpoint",
    "finalize",
];

/// An operation's fields as the [`Change`] variant's fields: the variant's
/// serde name, and its fields with the two conveniences undone.
fn as_change_fields(op: &str, mut fields: Map<String, Value>) -> Result<(&str, Value), String> {
    // The two conveniences have their own fields; every other op has exactly
    // its change's, which serde checks (unknown and missing fields alike).
    let own: &[&str] = match op {
        "item" => &["item"],
        "budget" => &["name", "limit", "owner"],
        _ => &[],
    };
    if !own.is_empty() {
        if let Some(k) = fields.keys().find(|k| !own.contains(&k.as_str())) {
            return Err(format!(
                "unknown field {k:?}, expected {}; {OP_SHAPE}",
                own.iter()
                    .map(|f| format!("{f:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if op == "item" && !fields.contains_key("item") {
            return Err(format!("missing field \"item\"; {OP_SHAPE}"));
        }
    }
    let variant = match op {
        "item" => {
            if let Some(item) = fields.remove("item") {
                let items = Json::items(item)?;
                let items = items.into_iter().map(|j| j.0).collect();
                fields.insert("items".into(), Value::Array(items));
            }
            "items"
        }
        "budget" => {
            let mut spec = Map::new();
            for k in ["limit", "owner"] {
                if let Some(v) = fields.remove(k) {
                    spec.insert(k.into(), v);
                }
            }
            fields.insert("spec".into(), Value::Object(spec));
            "budget"
        }
        _ => op,
    };
    Ok((variant, Value::Object(fields)))
}

/// What every operation error ends with: the shape of a line, and where to look.
pub const OP_SHAPE: &str =
    r#"a line is one JSON object such as {"op":"unit","unit":"u1","status":"done"}"#;

/// Parses one line into a change (length and nesting capped). Errors say what
/// is wrong with the line in runlog's words, and what a line looks like.
pub fn parse_op_line(line: &str) -> Result<Change, String> {
    if line.len() > MAX_OP_LINE_BYTES {
        return Err(format!(
            "line of {} bytes exceeds the limit of {MAX_OP_LINE_BYTES}",
            line.len()
        ));
    }
    let v = Json::parse_limited(line).map_err(|e| format!("not JSON ({e}); {OP_SHAPE}"))?;
    let Value::Object(mut fields) = v else {
        return Err(format!("not a JSON object; {OP_SHAPE}"));
    };
    let name = match fields.remove("op") {
        None => return Err(format!("no \"op\" field; {OP_SHAPE}")),
        Some(Value::String(n)) => n,
        Some(_) => return Err(format!("\"op\" must be a string; {OP_SHAPE}")),
    };
    if !OP_NAMES.contains(&name.as_str()) {
        return Err(format!(
            "unknown op {name:?}; the ops are {}; {OP_SHAPE}",
            OP_NAMES.join(", ")
        ));
    }
    let (variant, fields) =
        as_change_fields(&name, fields).map_err(|e| format!("op {name:?}: {e}"))?;
    let mut tagged = Map::new();
    tagged.insert(variant.to_string(), fields);
    serde_json::from_value(Value::Object(tagged))
        .map_err(|e| format!("op {name:?}: {}; {OP_SHAPE}", plain_serde_error(&e)))
}

/// serde's message without its Rust spelling: backticks become quotes.
fn plain_serde_error(e: &serde_json::Error) -> String {
    e.to_string().replace('`', "\"")
}

#[cfg(test)]
mod tests {
    use super::super::protocol::op_line;
    use super::*;
    use crate::run::{BudgetSpec, PhaseStatus, RunStatus, UnitStatus};

    #[test]
    fn every_change_but_init_is_an_op_with_the_changes_own_fields() {
        let changes = [
            Change::Unit {
                unit: "u1".into(),
                status: UnitStatus::Blocked,
                note: Some("n".into()),
                deps: Some(vec!["u0".into()]),
            },
            Change::Phase {
                phase: "p".into(),
                status: PhaseStatus::Done,
            },
            Change::Items {
                items: vec![
                    Json(serde_json::json!({"a": 1})),
                    Json(serde_json::json!({"b": 2})),
                ],
            },
            Change::Resolve {
                id: "item-1".into(),
                note: None,
            },
            Change::Budget {
                name: "b".into(),
                spec: BudgetSpec {
                    limit: Some(2.5),
                    owner: "o".into(),
                },
            },
            Change::Spend {
                budget: "b".into(),
                amount: 1.0,
            },
            Change::Checkpoint {
                state: Json(serde_json::json!({"k": [1, 2]})),
            },
            Change::Finalize {
                status: RunStatus::Aborted,
                result: Some("r".into()),
            },
        ];
        let mut names: Vec<&str> = changes.iter().map(|c| c.op()).collect();
        names.sort_unstable();
        let mut ops = OP_NAMES.to_vec();
        ops.sort_unstable();
        assert_eq!(names, ops, "one op per change but init");
        for c in &changes {
            let line = op_line(c).unwrap();
            assert_eq!(parse_op_line(&line).as_ref(), Ok(c), "{line}");
        }
        let e = parse_op_line(r#"{"op":"init","id":"x","task":"t"}"#).unwrap_err();
        assert!(e.contains("unknown op \"init\""), "{e}");
    }

    #[test]
    fn the_conveniences_name_their_own_fields() {
        for (line, says) in [
            (r#"{"op":"item"}"#, "missing field \"item\""),
            (
                r#"{"op":"item","items":[{"a":1}]}"#,
                "unknown field \"items\"",
            ),
            (
                r#"{"op":"budget","name":"b","spec":{}}"#,
                "unknown field \"spec\"",
            ),
            (r#"{"op":"budget","name":"b"}"#, "missing field \"owner\""),
            (
                r#"{"op":"unit","unit":"u","status":"done","x":1}"#,
                "unknown field \"x\"",
            ),
        ] {
            let e = parse_op_line(line).unwrap_err();
            assert!(e.contains(says), "{line}: {e}");
            assert!(e.ends_with(OP_SHAPE), "{line}: {e}");
        }
    }

    #[test]
    fn parses_each_op_and_refuses_junk() {
        let c = parse_op_line(r#"{"op":"unit","unit":"u1","status":"done"}"#).unwrap();
        assert!(matches!(
            c,
            Change::Unit {
                status: UnitStatus::Done,
                ..
            }
        ));
        assert!(parse_op_line(r#"{"op":"item","item":[{"a":1},{"b":2}]}"#).is_ok());
        assert!(parse_op_line(r#"{"op":"finalize","status":"aborted"}"#).is_ok());
        assert!(parse_op_line(r#"{"op":"unit","unit":"u1","status":"bogus"}"#).is_err());
        assert!(parse_op_line(r#"{"op":"item","item":"x"}"#).is_err());
        assert!(parse_op_line(r#"{"op":"nope"}"#).is_err());
        assert!(parse_op_line(&"[".repeat(100)).is_err());
        assert!(parse_op_line("not json").is_err());
    }

    #[test]
    fn errors_say_what_a_line_looks_like_in_runlogs_words() {
        for (line, says) in [
            ("[]", "not a JSON object"),
            ("{}", "no \"op\" field"),
            (r#"{"op":1}"#, "must be a string"),
            (r#"{"op":"nope"}"#, "unknown op \"nope\""),
            (r#"{"op":"unit","unit":"u"}"#, "missing field \"status\""),
            ("{", "not JSON"),
        ] {
            let e = parse_op_line(line).unwrap_err();
            assert!(e.contains(says), "{line}: {e}");
            assert!(e.ends_with(OP_SHAPE), "{line}: {e}");
            assert!(
                !e.contains("internally tagged") && !e.contains('`'),
                "{line}: {e}"
            );
        }
    }
}
