//! [`VerifyReport`] as data: one serialized form that every front end
//! renders (`runlog verify --json` prints it, Python's `Runs.verify` returns
//! it as a dict), so no front end decides what the report says.
//!
//! ```json
//! {"integrity":"torn_tail","path":"…/seg-…log","offset":4096,"bytes":12,
//!  "reason":"…","lastSeq":9,"snapshotFallbacks":[],"leftovers":[],
//!  "quarantined":[],"tornTail":{"path":"…","offset":4096,"bytes":12,
//!  "firstSeq":10,"validFramesDropped":0}}
//! ```
//!
//! `integrity` is `clean`, `torn_tail`, `append_in_progress` (with `path`,
//! `offset`, `bytes`, `reason`), or `corrupt` / `tampered` (with `path`,
//! `offset`, `seq`, `reason`). `fellBackTo` (the snapshot seq every open
//! falls back to, 0 for none) is there when `snapshotFallbacks` is not empty.

use super::verify::{Integrity, VerifyReport};
use crate::engine::error::{Error, ErrorChain};
use serde::ser::{Serialize, SerializeMap, Serializer};

impl VerifyReport {
    /// True when the store needs attention: damage that is not a torn tail,
    /// or a damaged snapshot every open skips (`runlog verify` exits 1).
    pub fn needs_attention(&self) -> bool {
        matches!(self.integrity, Integrity::Damaged(_))
            || !self.recovery.snapshot_fallbacks.is_empty()
    }
}

impl Serialize for VerifyReport {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        match &self.integrity {
            Integrity::Clean => m.serialize_entry("integrity", "clean")?,
            Integrity::TornTail {
                path,
                offset,
                bytes,
                reason,
            }
            | Integrity::AppendInProgress {
                path,
                offset,
                bytes,
                reason,
            } => {
                let kind = match self.integrity {
                    Integrity::TornTail { .. } => "torn_tail",
                    _ => "append_in_progress",
                };
                m.serialize_entry("integrity", kind)?;
                m.serialize_entry("path", path)?;
                m.serialize_entry("offset", offset)?;
                m.serialize_entry("bytes", bytes)?;
                m.serialize_entry("reason", reason)?;
            }
            Integrity::Damaged(e) => {
                let (kind, path, offset, seq, reason) = match e {
                    Error::Tampered {
                        path,
                        offset,
                        seq,
                        what,
                    } => ("tampered", Some(path), *offset, *seq, what.clone()),
                    Error::Corrupt {
                        path,
                        offset,
                        seq,
                        reason,
                    } => ("corrupt", Some(path), *offset, *seq, reason.clone()),
                    // `Integrity::from_damage` makes only the two above; any
                    // other is still damage, said whole, with no place.
                    other => ("corrupt", None, None, None, ErrorChain(other).to_string()),
                };
                m.serialize_entry("integrity", kind)?;
                m.serialize_entry("path", &path)?;
                m.serialize_entry("offset", &offset)?;
                m.serialize_entry("seq", &seq)?;
                m.serialize_entry("reason", &reason)?;
            }
        }
        let r = &self.recovery;
        m.serialize_entry("lastSeq", &r.last_seq)?;
        let fallbacks: Vec<_> = r
            .snapshot_fallbacks
            .iter()
            .map(|(path, reason)| serde_json::json!({"path": path, "reason": reason}))
            .collect();
        m.serialize_entry("snapshotFallbacks", &fallbacks)?;
        if !fallbacks.is_empty() {
            m.serialize_entry("fellBackTo", &r.snapshot_seq.unwrap_or(0))?;
        }
        m.serialize_entry("leftovers", &self.leftovers)?;
        m.serialize_entry("quarantined", &self.quarantined)?;
        let torn = r.torn_tail.as_ref().map(|t| {
            serde_json::json!({
                "path": t.path, "offset": t.offset, "bytes": t.bytes,
                "firstSeq": t.first_seq, "validFramesDropped": t.valid_frames_dropped,
            })
        });
        m.serialize_entry("tornTail", &torn)?;
        m.end()
    }
}
