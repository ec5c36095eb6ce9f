//! A unit's output reference, where the cluster driver records one
//! (`python/runlog/drive.py`): its `done` note is the JSON
//! `{"output": {"store", "name", "len", "digest", "kind"}, "claim", "attempt"}`
//! when the result went to an output store (a result small enough to keep
//! inline is `{"value": …}` instead, and has no reference). The unit page
//! shows the reference as text; nothing here reads the store.

use runlog::run::{Unit, UnitStatus};
use serde_json::Value;

/// The output reference in `u`'s note: `{store, name, len, digest, kind,
/// attempt, claim}` (`len`, `digest`, `kind`, `attempt` and `claim` `null`
/// when absent), or `None` when `u` is not done or its note names no output
/// (not JSON, no `output` object, or one without a string `store` and `name`).
pub fn output_ref(u: &Unit) -> Option<Value> {
    if u.status != UnitStatus::Done || !u.note.starts_with('{') {
        return None;
    }
    let note: Value = serde_json::from_str(&u.note).ok()?;
    let out = note.get("output")?.as_object()?;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    let store = text(out.get("store"))?;
    let name = text(out.get("name"))?;
    Some(serde_json::json!({
        "store": store,
        "name": name,
        "len": out.get("len").and_then(Value::as_u64),
        "digest": text(out.get("digest")),
        "kind": text(out.get("kind")),
        "attempt": note.get("attempt").and_then(Value::as_u64),
        "claim": text(note.get("claim")),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(status: UnitStatus, note: &str) -> Unit {
        Unit {
            status,
            depends_on: vec![],
            note: note.into(),
            attempts: 1,
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:00Z".into(),
            started_at: None,
            finished_at: None,
        }
    }

    #[test]
    fn a_done_note_naming_an_output_gives_its_reference() {
        let note = r#"{"output":{"store":"file:///o","name":"r/u/1-c","len":12,"digest":"ab","kind":"bytes"},"claim":"c","attempt":1}"#;
        let r = output_ref(&unit(UnitStatus::Done, note)).expect("a reference");
        assert_eq!(r["store"], "file:///o");
        assert_eq!(r["name"], "r/u/1-c");
        assert_eq!(r["len"], 12);
        assert_eq!(r["digest"], "ab");
        assert_eq!(r["attempt"], 1);
    }

    #[test]
    fn inline_values_other_notes_and_units_not_done_have_no_reference() {
        let out = r#"{"output":{"store":"s","name":"n"}}"#;
        assert!(output_ref(&unit(UnitStatus::Done, r#"{"value":3,"claim":"c"}"#)).is_none());
        assert!(output_ref(&unit(UnitStatus::Done, "plain text")).is_none());
        assert!(output_ref(&unit(UnitStatus::Done, "{not json")).is_none());
        assert!(
            output_ref(&unit(
                UnitStatus::Done,
                r#"{"output":{"store":1,"name":"n"}}"#
            ))
            .is_none()
        );
        assert!(output_ref(&unit(UnitStatus::Blocked, out)).is_none());
        assert!(output_ref(&unit(UnitStatus::Done, out)).is_some());
    }
}
