//! The remote layout (FORMAT.md, "Remote layout"): object names and the
//! manifest codec. Pure functions: no I/O, no panic on any input.

use super::error::{RemoteError, Result};
use serde::{Deserialize, Serialize};

/// The manifest format version.
pub const MANIFEST_VERSION: u16 = 1;
/// A manifest larger than this is refused before it is parsed.
pub const MAX_MANIFEST_LEN: u64 = 16 << 20;
/// A manifest listing more live chunks than this is refused.
pub const MAX_LIVE_CHUNKS: usize = 100_000;
/// A chunk larger than this is refused before it is read (chunks are cut at 64 MiB).
pub const MAX_CHUNK_LEN: u64 = 1 << 30;
/// A chunk is cut after this many bytes of records.
pub const CHUNK_TARGET_BYTES: u64 = 64 << 20;
/// Once a manifest ends in this many small chunks the next round re-ships them as one.
pub const MERGE_AT_CHUNKS: usize = 64;
/// A chunk smaller than this is "small" (a candidate for merging).
pub const SMALL_CHUNK_BYTES: u64 = 1 << 20;
/// A merge re-ships at most this many bytes.
pub const MERGE_MAX_BYTES: u64 = 8 << 20;
/// Folder of the manifest chain.
pub const MANIFEST_DIR: &str = "manifest";
/// Folder of log chunks.
pub const CHUNK_DIR: &str = "chunks";
/// Folder of snapshots.
pub const SNAPSHOT_DIR: &str = "snapshots";

/// `manifest/<20-digit number>.json`.
pub fn manifest_name(number: u64) -> String {
    format!("{MANIFEST_DIR}/{number:020}.json")
}

/// The number of a manifest object's name (relative to the prefix), if it is one.
pub fn parse_manifest_name(name: &str) -> Option<u64> {
    let digits = name
        .strip_prefix(MANIFEST_DIR)?
        .strip_prefix('/')?
        .strip_suffix(".json")?;
    parse_digits(digits)
}

/// `chunks/<first>-<last>-e<epoch>-m<number>.chunk`: seqs `first..=last`,
/// uploaded by the writer of `epoch` for manifest `number`.
pub fn chunk_name(first: u64, last: u64, epoch: u64, number: u64) -> String {
    format!("{CHUNK_DIR}/{first:020}-{last:020}-e{epoch:020}-m{number:020}.chunk")
}

/// `snapshots/<seq>-e<epoch>-m<number>.snap`.
pub fn snapshot_object_name(seq: u64, epoch: u64, number: u64) -> String {
    format!("{SNAPSHOT_DIR}/{seq:020}-e{epoch:020}-m{number:020}.snap")
}

/// The manifest number a chunk or snapshot object was uploaded for.
pub fn object_manifest_number(name: &str) -> Option<u64> {
    let stem = name
        .strip_prefix(CHUNK_DIR)
        .and_then(|r| r.strip_prefix('/'))
        .and_then(|r| r.strip_suffix(".chunk"))
        .or_else(|| {
            name.strip_prefix(SNAPSHOT_DIR)
                .and_then(|r| r.strip_prefix('/'))
                .and_then(|r| r.strip_suffix(".snap"))
        })?;
    parse_digits(stem.rsplit_once("-m")?.1)
}

fn parse_digits(s: &str) -> Option<u64> {
    if s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}

/// A snapshot object a manifest references.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRef {
    /// The state after every record up to this seq.
    pub seq: u64,
    /// Its object name, relative to the prefix.
    pub object: String,
    /// Its length in bytes.
    pub len: u64,
}

/// A chunk object a manifest references.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChunkRef {
    /// First seq it holds.
    pub first: u64,
    /// Last seq it holds.
    pub last: u64,
    /// Its object name, relative to the prefix.
    pub object: String,
    /// Its length in bytes.
    pub len: u64,
}

/// One link of the manifest chain: immutable, written create-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Manifest {
    /// Always `"manifest"`.
    pub runlog: String,
    /// [`MANIFEST_VERSION`].
    pub version: u16,
    /// Its number in the chain (equal to the number in its name).
    pub number: u64,
    /// The epoch of the writer that wrote it.
    pub epoch: u64,
    /// Who wrote it (host and pid), for messages only.
    pub writer: String,
    /// The store's codec name (`binary`, `jsonl`).
    pub codec: String,
    /// A keyed store's id (hex, FORMAT.md §10.1); empty when unkeyed.
    #[serde(default)]
    pub store_id: String,
    /// The base snapshot, if any.
    pub snapshot: Option<SnapshotRef>,
    /// The live chunks in seq order: contiguous from the snapshot's seq + 1.
    pub chunks: Vec<ChunkRef>,
    /// The highest seq the chain holds.
    pub shipped: u64,
    /// Hex BLAKE3 (first 16 bytes) of the frame of record `shipped`, so a writer
    /// can tell its local log continues the remote one; empty when `shipped` is 0.
    pub tail: String,
}

impl Manifest {
    /// The empty chain's first link.
    pub fn genesis(epoch: u64, writer: String, codec: &str, store_id: String) -> Manifest {
        Manifest {
            runlog: "manifest".into(),
            version: MANIFEST_VERSION,
            number: 1,
            epoch,
            writer,
            codec: codec.into(),
            store_id,
            snapshot: None,
            chunks: vec![],
            shipped: 0,
            tail: String::new(),
        }
    }

    /// Every object it references.
    pub fn objects(&self) -> impl Iterator<Item = &str> {
        self.snapshot
            .iter()
            .map(|s| s.object.as_str())
            .chain(self.chunks.iter().map(|c| c.object.as_str()))
    }

    /// Encodes it (compact JSON, one line).
    pub fn encode(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).unwrap_or_default();
        v.push(b'\n');
        v
    }

    /// Decodes and checks the manifest stored as `manifest_name(number)`.
    pub fn decode(number: u64, bytes: &[u8]) -> Result<Manifest> {
        let name = manifest_name(number);
        let bad = |reason: String| RemoteError::corrupt(&name, 0, reason);
        if bytes.len() as u64 > MAX_MANIFEST_LEN {
            return Err(bad(format!(
                "{} bytes, more than MAX_MANIFEST_LEN {MAX_MANIFEST_LEN}",
                bytes.len()
            )));
        }
        let m: Manifest =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("not a manifest: {e}")))?;
        if m.runlog != "manifest" || m.version != MANIFEST_VERSION {
            return Err(bad(format!(
                "kind {:?} version {}, expected \"manifest\" version {MANIFEST_VERSION}",
                m.runlog, m.version
            )));
        }
        if m.number != number {
            return Err(bad(format!(
                "carries number {}, its name says {number}",
                m.number
            )));
        }
        if m.chunks.len() > MAX_LIVE_CHUNKS {
            return Err(bad(format!(
                "{} chunks, more than MAX_LIVE_CHUNKS {MAX_LIVE_CHUNKS}",
                m.chunks.len()
            )));
        }
        if let Some(s) = &m.snapshot
            && (!s.object.starts_with(&format!("{SNAPSHOT_DIR}/"))
                || object_manifest_number(&s.object).is_none())
        {
            return Err(bad(format!(
                "snapshot object name {:?} is not a snapshot's",
                s.object
            )));
        }
        let mut prev_last = None;
        for c in &m.chunks {
            if !c.object.starts_with(&format!("{CHUNK_DIR}/"))
                || object_manifest_number(&c.object).is_none()
            {
                return Err(bad(format!(
                    "chunk object name {:?} is not a chunk's",
                    c.object
                )));
            }
            if c.first == 0 || c.first > c.last || c.len > MAX_CHUNK_LEN {
                return Err(bad(format!(
                    "chunk {} covers {}..={} in {} bytes",
                    c.object, c.first, c.last, c.len
                )));
            }
            if prev_last.is_some_and(|p: u64| c.first <= p) {
                return Err(bad(format!("chunk {} is out of seq order", c.object)));
            }
            prev_last = Some(c.last);
        }
        let top = prev_last
            .max(m.snapshot.as_ref().map(|s| s.seq))
            .unwrap_or(0);
        if top != m.shipped {
            return Err(bad(format!(
                "says {} shipped but its objects end at seq {top}",
                m.shipped
            )));
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(parse_manifest_name(&manifest_name(42)), Some(42));
        assert_eq!(parse_manifest_name("manifest/42.json"), None);
        assert_eq!(object_manifest_number(&chunk_name(1, 9, 3, 17)), Some(17));
        assert_eq!(
            object_manifest_number(&snapshot_object_name(9, 3, 18)),
            Some(18)
        );
        assert_eq!(object_manifest_number("chunks/x.chunk"), None);
    }

    #[test]
    fn manifest_checks_its_claims() {
        let mut m = Manifest::genesis(1, "h".into(), "binary", String::new());
        assert_eq!(Manifest::decode(1, &m.encode()).unwrap(), m);
        assert!(
            Manifest::decode(2, &m.encode()).is_err(),
            "number must match the name"
        );
        m.chunks.push(ChunkRef {
            first: 1,
            last: 5,
            object: chunk_name(1, 5, 1, 1),
            len: 10,
        });
        assert!(
            Manifest::decode(1, &m.encode()).is_err(),
            "shipped must match the chunks"
        );
        m.shipped = 5;
        assert!(Manifest::decode(1, &m.encode()).is_ok());
        m.chunks.push(ChunkRef {
            first: 5,
            last: 6,
            object: chunk_name(5, 6, 1, 1),
            len: 10,
        });
        m.shipped = 6;
        assert!(
            Manifest::decode(1, &m.encode()).is_err(),
            "overlapping chunks"
        );
        assert!(Manifest::decode(1, b"{").is_err());
        assert!(Manifest::decode(1, &vec![b' '; MAX_MANIFEST_LEN as usize + 1]).is_err());
    }
}
