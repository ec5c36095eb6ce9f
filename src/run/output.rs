//! A unit's output reference: where the result of a `done` unit lives when
//! it went to an object store rather than into the run (FORMAT.md §12.2).
//! Its home is the unit's `done` note, a JSON object a driver writes
//! (`runlog.drive` does): `{"output": {"store", "name", "len", "digest",
//! "kind"}, "claim", "attempt"}`. The library reads it ([`Unit::output`]);
//! the web view shows it and Python's `runlog.output` fetches it.

use super::doc::{Unit, UnitStatus};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a `done` unit's result is kept (FORMAT.md §12.2), from its note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct OutputRef {
    /// The object store's URL (`s3://bucket/prefix`, `file:///dir`).
    pub store: String,
    /// The object's name under it.
    pub name: String,
    /// Its length in bytes, when recorded.
    pub len: Option<u64>,
    /// Its digest (`blake3:<hex>`), when recorded.
    pub digest: Option<String>,
    /// What its bytes are (`bytes`, `json`), when recorded.
    pub kind: Option<String>,
    /// The attempt that wrote it, when recorded.
    pub attempt: Option<u64>,
    /// The claim of the coordinator that committed it, when recorded.
    pub claim: Option<String>,
}

impl Unit {
    /// The output reference this unit's note records (FORMAT.md §12.2):
    /// `None` unless the unit is done and its note is a JSON object whose
    /// `output` object has a string `store` and `name` (a result a driver
    /// kept inline, `{"value": …}`, has none).
    pub fn output(&self) -> Option<OutputRef> {
        if self.status != UnitStatus::Done || !self.note.starts_with('{') {
            return None;
        }
        let note: Value = serde_json::from_str(&self.note).ok()?;
        let out = note.get("output")?.as_object()?;
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        Some(OutputRef {
            store: text(out.get("store"))?,
            name: text(out.get("name"))?,
            len: out.get("len").and_then(Value::as_u64),
            digest: text(out.get("digest")),
            kind: text(out.get("kind")),
            attempt: note.get("attempt").and_then(Value::as_u64),
            claim: text(note.get("claim")),
        })
    }
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
        let r = unit(UnitStatus::Done, note).output().expect("a reference");
        assert_eq!(
            r,
            OutputRef {
                store: "file:///o".into(),
                name: "r/u/1-c".into(),
                len: Some(12),
                digest: Some("ab".into()),
                kind: Some("bytes".into()),
                attempt: Some(1),
                claim: Some("c".into()),
            }
        );
    }

    #[test]
    fn inline_values_other_notes_and_units_not_done_have_no_reference() {
        let out = r#"{"output":{"store":"s","name":"n"}}"#;
        for (status, note) in [
            (UnitStatus::Done, r#"{"value":3,"claim":"c"}"#),
            (UnitStatus::Done, "plain text"),
            (UnitStatus::Done, "{not json"),
            (UnitStatus::Done, r#"{"output":{"store":1,"name":"n"}}"#),
            (UnitStatus::Done, r#"{"output":"s/n"}"#),
            (UnitStatus::Blocked, out),
        ] {
            assert_eq!(unit(status, note).output(), None, "{status:?} {note}");
        }
        let r = unit(UnitStatus::Done, out).output().unwrap();
        assert_eq!((r.len, r.digest, r.attempt), (None, None, None));
    }
}
