//! The JSON-lines operations `runlog apply` reads on stdin, and their
//! conversion to [`Change`]s. Parsing caps line length and nesting first.

use crate::run::json::parse_json_limited;
use crate::run::{BudgetSpec, Change, Json, PhaseStatus, RunStatus, UnitStatus};
use serde::Deserialize;

/// Longest operation line accepted, in bytes.
pub const MAX_OP_LINE_BYTES: usize = 1 << 20;

/// One operation as written on a line: `{"op":"unit","unit":"u1","status":"done"}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Op {
    /// Set a unit's status.
    Unit {
        /// The unit.
        unit: String,
        /// Its new status.
        status: UnitStatus,
        /// A new note.
        #[serde(default)]
        note: Option<String>,
        /// New dependencies.
        #[serde(default)]
        deps: Option<Vec<String>>,
    },
    /// Set a phase's status.
    Phase {
        /// The phase.
        phase: String,
        /// Its new status.
        status: PhaseStatus,
    },
    /// Add an open item (an array adds each element).
    Item {
        /// The item(s).
        item: serde_json::Value,
    },
    /// Resolve an open item.
    Resolve {
        /// Its id.
        id: String,
        /// Why or how.
        #[serde(default)]
        note: Option<String>,
    },
    /// Declare a budget.
    Budget {
        /// Its name.
        name: String,
        /// Its limit (absent: unlimited).
        #[serde(default)]
        limit: Option<f64>,
        /// Its owner.
        owner: String,
    },
    /// Record spending.
    Spend {
        /// The budget.
        budget: String,
        /// The amount.
        amount: f64,
    },
    /// Save a whole-state checkpoint.
    Checkpoint {
        /// The state.
        state: serde_json::Value,
    },
    /// Close the run.
    Finalize {
        /// `done`, `needs_attention` or `aborted`.
        status: RunStatus,
        /// A result text.
        #[serde(default)]
        result: Option<String>,
    },
}

/// Items from a JSON value: an object is one item, an array each of its
/// elements (which must be objects); anything else is refused.
pub fn items_from_json(v: serde_json::Value) -> Result<Vec<Json>, String> {
    match v {
        serde_json::Value::Object(_) => Ok(vec![Json(v)]),
        serde_json::Value::Array(a) if !a.is_empty() => a
            .into_iter()
            .map(|e| match e {
                serde_json::Value::Object(_) => Ok(Json(e)),
                _ => Err("every element of an item array must be a JSON object".to_string()),
            })
            .collect(),
        serde_json::Value::Array(_) => Err("an item array must not be empty".into()),
        _ => Err("an item must be a JSON object or an array of objects".into()),
    }
}

impl Op {
    /// The change this operation asks for.
    pub fn into_change(self) -> Result<Change, String> {
        Ok(match self {
            Op::Unit {
                unit,
                status,
                note,
                deps,
            } => Change::Unit {
                unit,
                status,
                note,
                deps,
            },
            Op::Phase { phase, status } => Change::Phase { phase, status },
            Op::Item { item } => Change::Items {
                items: items_from_json(item)?,
            },
            Op::Resolve { id, note } => Change::Resolve { id, note },
            Op::Budget { name, limit, owner } => Change::Budget {
                name,
                spec: BudgetSpec { limit, owner },
            },
            Op::Spend { budget, amount } => Change::Spend { budget, amount },
            Op::Checkpoint { state } => Change::Checkpoint { state: Json(state) },
            Op::Finalize { status, result } => Change::Finalize { status, result },
        })
    }
}

/// The `op` names, as a line spells them.
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

/// What every operation error ends with: the shape of a line, and where to look.
const OP_SHAPE: &str = r#"a line is one JSON object such as {"op":"unit","unit":"u1","status":"done"}; see: runlog apply --help"#;

/// Parses one line into a change (length and nesting capped). Errors say what
/// is wrong with the line in runlog's words, and what a line looks like.
pub fn parse_op_line(line: &str) -> Result<Change, String> {
    if line.len() > MAX_OP_LINE_BYTES {
        return Err(format!(
            "line of {} bytes exceeds the limit of {MAX_OP_LINE_BYTES}",
            line.len()
        ));
    }
    let v = parse_json_limited(line).map_err(|e| format!("not JSON ({e}); {OP_SHAPE}"))?;
    let name = match v.as_object().map(|o| o.get("op")) {
        None => return Err(format!("not a JSON object; {OP_SHAPE}")),
        Some(None) => return Err(format!("no \"op\" field; {OP_SHAPE}")),
        Some(Some(serde_json::Value::String(n))) => n.clone(),
        Some(Some(_)) => return Err(format!("\"op\" must be a string; {OP_SHAPE}")),
    };
    if !OP_NAMES.contains(&name.as_str()) {
        return Err(format!(
            "unknown op {name:?}; the ops are {}; {OP_SHAPE}",
            OP_NAMES.join(", ")
        ));
    }
    let op: Op = serde_json::from_value(v)
        .map_err(|e| format!("op {name:?}: {}; {OP_SHAPE}", plain_serde_error(&e)))?;
    op.into_change().map_err(|e| format!("op {name:?}: {e}"))
}

/// serde's message without its Rust spelling: backticks become quotes.
fn plain_serde_error(e: &serde_json::Error) -> String {
    e.to_string().replace('`', "\"")
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert!(e.contains("runlog apply --help"), "{line}: {e}");
            assert!(
                !e.contains("internally tagged") && !e.contains('`'),
                "{line}: {e}"
            );
        }
    }
}
