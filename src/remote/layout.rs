//! The remote layout (FORMAT.md, "Remote layout"): object names and the
//! manifest codec. Pure functions: no I/O, no panic on any input.

use super::error::{RemoteError, Result};
use serde::{Deserialize, Serialize};

/// The manifest format version written: 3 names its directory's `holder`
/// (FORMAT.md §13.2); 2 (records inline) and 1 are still read.
pub const MANIFEST_VERSION: u16 = 3;
/// The oldest manifest version still read: 1, without `inline`.
pub const MANIFEST_VERSION_V1: u16 = 1;
/// The most manifest PUTs one writer has in flight (FORMAT.md §13.4): a
/// writer sends slot `m` only once its slots up to `m − MAX_ROUNDS_IN_FLIGHT`
/// are settled, so a reader finds the chain head among the last this many
/// slots below the lowest empty one (§13.3).
pub const MAX_ROUNDS_IN_FLIGHT: u64 = 8;
/// Rounds in flight a writer keeps by default ([`super::Remote::with_rounds_in_flight`]).
pub const ROUNDS_IN_FLIGHT: u64 = 4;
/// A round whose new records' frames are at most this many bytes carries them
/// inline in its manifest (one PUT) instead of uploading a chunk first.
pub const INLINE_ROUND_MAX: u64 = 32 << 10;
/// A writer's manifest carries at most this many bytes of inline frames
/// (decoded); the round that would pass it ships them, with its new
/// records, as a chunk. Every round re-sends what the manifest carries, so
/// this trades the bytes of each PUT against how often a round is two PUTs.
pub const INLINE_MAX_BYTES: u64 = 64 << 10;
/// A manifest carrying more than this many bytes of inline frames is refused.
pub const MAX_INLINE_LEN: u64 = 1 << 20;
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
/// Folder of gc's floors: `floor/<20-digit n>`, written before gc deletes the
/// manifests below `n` (§13.5).
pub const FLOOR_DIR: &str = "floor";

/// `floor/<20-digit n>`.
pub fn floor_name(n: u64) -> String {
    format!("{FLOOR_DIR}/{n:020}")
}

/// The number of a floor object's name, if it is one.
pub fn parse_floor_name(name: &str) -> Option<u64> {
    parse_digits(name.strip_prefix(FLOOR_DIR)?.strip_prefix('/')?)
}

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

/// Records a manifest carries itself (version 2): their frames, byte for byte
/// as in a chunk, without a segment header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InlineRef {
    /// First seq it holds.
    pub first: u64,
    /// Last seq it holds.
    pub last: u64,
    /// The frames of records `first..=last`, back to back, in base64 (RFC
    /// 4648, standard alphabet, padded).
    pub frames: String,
    /// Hex BLAKE3 (first 16 bytes) of the frames (the bytes, not the base64).
    pub digest: String,
}

impl InlineRef {
    /// The entry for `frames` (records `first..=last`).
    pub fn new(first: u64, last: u64, frames: &[u8]) -> InlineRef {
        InlineRef {
            first,
            last,
            frames: to_base64(frames),
            digest: super::chunk::frame_digest(frames),
        }
    }

    /// The frames' bytes (`None`: not canonical base64). Checked by [`Manifest::decode`].
    pub fn bytes(&self) -> Option<Vec<u8>> {
        from_base64(self.frames.as_bytes())
    }

    /// Its length in bytes (decoded).
    pub fn len(&self) -> u64 {
        let t = self.frames.as_bytes();
        let pad = t.iter().rev().take(2).take_while(|&&c| c == b'=').count();
        (t.len() / 4 * 3).saturating_sub(pad) as u64
    }

    /// No frames (never in a checked manifest).
    #[cfg_attr(not(feature = "sim"), allow(dead_code))] // beside `len`, for clippy
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Base64 (RFC 4648, standard alphabet, `=` padding).
pub fn to_base64(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let at = |i: usize| c.get(i).copied().unwrap_or(0) as u32;
        let n = (at(0) << 16) | (at(1) << 8) | at(2);
        for i in 0..4 {
            if i <= c.len() {
                s.push(BASE64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// The bytes of canonical base64 ([`to_base64`]'s output and nothing else:
/// padding only at the end, the bits it drops zero); `None` otherwise.
pub fn from_base64(text: &[u8]) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let groups = text.len() / 4;
    let mut out = Vec::with_capacity(groups * 3);
    for (g, q) in text.chunks_exact(4).enumerate() {
        let pad = if g + 1 == groups {
            q.iter().rev().take_while(|&&c| c == b'=').count()
        } else {
            0
        };
        if pad > 2 {
            return None;
        }
        let mut n = 0u32;
        for (i, &c) in q.iter().enumerate() {
            let v = if i >= 4 - pad { 0 } else { value(c)? };
            n = (n << 6) | v as u32;
        }
        if (pad == 1 && n & 0xff != 0) || (pad == 2 && n & 0xffff != 0) {
            return None;
        }
        out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8][..3 - pad]);
    }
    Some(out)
}

/// One link of the manifest chain: immutable, written create-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Manifest {
    /// Always `"manifest"`.
    pub runlog: String,
    /// [`MANIFEST_VERSION`] when written; [`MANIFEST_VERSION_V1`] is read too.
    pub version: u16,
    /// Its number in the chain (equal to the number in its name).
    pub number: u64,
    /// The epoch of the writer that wrote it.
    pub epoch: u64,
    /// Who wrote it (host and pid), for messages only.
    pub writer: String,
    /// Version 3: the directory its writer shipped from (the `holder` of
    /// that directory's `REMOTE` file, FORMAT.md §13.6); absent before.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub holder: String,
    /// The store's codec name (`binary`, `jsonl`).
    pub codec: String,
    /// A tagged store's id (hex, FORMAT.md §10.1); empty when untagged.
    #[serde(default)]
    pub store_id: String,
    /// The base snapshot, if any: a full one (a table, or a whole-state file).
    pub snapshot: Option<SnapshotRef>,
    /// Version 3: the delta tables over `snapshot` (FORMAT.md §14), oldest
    /// first, each over the one before it; the state is the newest one's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deltas: Vec<SnapshotRef>,
    /// The live chunks in seq order: contiguous from the snapshot's seq + 1.
    pub chunks: Vec<ChunkRef>,
    /// Version 2: records carried in the manifest itself, in seq order after
    /// the chunks (absent in version 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inline: Vec<InlineRef>,
    /// The highest seq the chain holds.
    pub shipped: u64,
    /// Hex BLAKE3 (first 16 bytes) of the frame of record `shipped`, so a writer
    /// can tell its local log continues the remote one; empty when `shipped` is 0.
    pub tail: String,
}

impl Manifest {
    /// The empty chain's first link.
    pub fn genesis(
        number: u64,
        epoch: u64,
        (writer, holder): (String, String),
        codec: &str,
        store_id: String,
    ) -> Manifest {
        Manifest {
            runlog: "manifest".into(),
            version: MANIFEST_VERSION,
            number,
            epoch,
            writer,
            holder,
            codec: codec.into(),
            store_id,
            snapshot: None,
            deltas: vec![],
            chunks: vec![],
            inline: vec![],
            shipped: 0,
            tail: String::new(),
        }
    }

    /// Whether the directory with this `REMOTE` holder and held epoch wrote
    /// it: its holder (version 3), or, before version 3, its epoch (one
    /// writer per epoch, a directory's processes resuming it).
    pub fn held_by(&self, holder: &str, epoch: u64) -> bool {
        if self.holder.is_empty() {
            epoch > 0 && self.epoch == epoch
        } else {
            !holder.is_empty() && self.holder == holder
        }
    }

    /// Bytes of inline frames it carries (decoded).
    pub fn inline_bytes(&self) -> u64 {
        self.inline.iter().map(InlineRef::len).sum()
    }

    /// Every object it references (inline records reference none).
    pub fn objects(&self) -> impl Iterator<Item = &str> {
        self.snapshot
            .iter()
            .chain(&self.deltas)
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
        let bad = |reason: String| RemoteError::corrupt(&name, None, reason);
        if bytes.len() as u64 > MAX_MANIFEST_LEN {
            return Err(bad(format!(
                "{} bytes, more than MAX_MANIFEST_LEN {MAX_MANIFEST_LEN}",
                bytes.len()
            )));
        }
        let m: Manifest =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("not a manifest: {e}")))?;
        if m.runlog != "manifest" || !(MANIFEST_VERSION_V1..=MANIFEST_VERSION).contains(&m.version)
        {
            return Err(bad(format!(
                "kind {:?} version {}, expected \"manifest\" version {MANIFEST_VERSION_V1} to {MANIFEST_VERSION}",
                m.runlog, m.version
            )));
        }
        if m.version == MANIFEST_VERSION_V1 && !m.inline.is_empty() {
            return Err(bad("version 1 carries no inline records".into()));
        }
        if (m.version == MANIFEST_VERSION) == m.holder.is_empty() {
            return Err(bad(format!(
                "version {} with holder {:?}: version 3 names its holder, earlier ones none",
                m.version, m.holder
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
        for s in m.snapshot.iter().chain(&m.deltas) {
            if !s.object.starts_with(&format!("{SNAPSHOT_DIR}/"))
                || object_manifest_number(&s.object).is_none()
            {
                return Err(bad(format!(
                    "snapshot object name {:?} is not a snapshot's",
                    s.object
                )));
            }
        }
        if !m.deltas.is_empty() && m.version != MANIFEST_VERSION {
            return Err(bad(format!(
                "version {} carries no delta tables",
                m.version
            )));
        }
        let mut below = m.snapshot.as_ref().map(|s| s.seq);
        for d in &m.deltas {
            match below {
                Some(b) if d.seq > b => below = Some(d.seq),
                _ => {
                    return Err(bad(format!(
                        "delta table {} (seq {}) is not over a snapshot below it",
                        d.object, d.seq
                    )));
                }
            }
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
        let mut inline_bytes = 0u64;
        for (i, r) in m.inline.iter().enumerate() {
            if r.first == 0 || r.first > r.last || r.frames.is_empty() {
                return Err(bad(format!(
                    "inline entry {i} covers {}..={} in {} base64 digits",
                    r.first,
                    r.last,
                    r.frames.len()
                )));
            }
            if prev_last.is_some_and(|p: u64| r.first <= p) {
                return Err(bad(format!(
                    "inline entry {i} ({}..={}) is out of seq order",
                    r.first, r.last
                )));
            }
            prev_last = Some(r.last);
            inline_bytes = inline_bytes.saturating_add(r.len());
            if inline_bytes > MAX_INLINE_LEN {
                return Err(bad(format!(
                    "inline entries hold more than MAX_INLINE_LEN {MAX_INLINE_LEN} bytes"
                )));
            }
            let Some(bytes) = r.bytes() else {
                return Err(bad(format!(
                    "inline entry {i}: frames are not canonical base64"
                )));
            };
            if super::chunk::frame_digest(&bytes) != r.digest {
                return Err(bad(format!(
                    "inline entry {i} ({}..={}): its frames do not match digest {:?}",
                    r.first, r.last, r.digest
                )));
            }
        }
        let top = prev_last.max(below).unwrap_or(0);
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
        let mut m = Manifest::genesis(1, 1, ("h".into(), "d".into()), "binary", String::new());
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

    /// A version 3 manifest: chunk 1..=5, then inline records 6..=6 and 7..=8.
    fn with_inline() -> Manifest {
        let mut m = Manifest::genesis(1, 1, ("h".into(), "d".into()), "binary", String::new());
        m.chunks.push(ChunkRef {
            first: 1,
            last: 5,
            object: chunk_name(1, 5, 1, 1),
            len: 10,
        });
        m.inline.push(InlineRef::new(6, 6, b"frame six"));
        m.inline
            .push(InlineRef::new(7, 8, b"frames seven and eight"));
        m.shipped = 8;
        m
    }

    #[test]
    fn a_manifest_checks_its_inline_records() {
        let m = with_inline();
        assert_eq!(m.version, MANIFEST_VERSION);
        assert_eq!(Manifest::decode(1, &m.encode()).unwrap(), m);
        assert_eq!(m.inline[0].bytes().unwrap(), b"frame six");
        assert_eq!(m.inline_bytes(), 9 + 22);
        assert_eq!(m.objects().count(), 1, "inline records reference no object");
        let refused = |f: &dyn Fn(&mut Manifest), why: &str| {
            let mut bad = with_inline();
            f(&mut bad);
            let e = Manifest::decode(1, &bad.encode()).expect_err(why);
            assert!(e.to_string().contains("manifest/"), "{why}: {e}");
        };
        refused(&|m| m.shipped = 7, "shipped must match the inline top");
        refused(&|m| m.inline[1].first = 6, "overlapping inline entries");
        refused(&|m| m.inline[0].first = 5, "inline overlapping the chunks");
        refused(&|m| m.inline[0].first = 0, "seq 0");
        refused(&|m| m.inline[1].first = 9, "first after last");
        refused(
            &|m| m.inline[0].frames.push('A'),
            "length not a multiple of 4",
        );
        refused(
            &|m| m.inline[0].frames.replace_range(0..1, "!"),
            "not base64",
        );
        refused(
            &|m| m.inline[0].frames.replace_range(0..1, "="),
            "padding first",
        );
        refused(
            &|m| m.inline[0].frames.replace_range(0..2, "00"),
            "digest mismatch",
        );
        refused(&|m| m.inline[0].frames.clear(), "empty entry");
        refused(
            &|m| {
                m.version = 1;
                m.holder.clear()
            },
            "version 1 carries no inline records",
        );
        refused(&|m| m.version = 4, "unknown version");
        refused(
            &|m| {
                m.inline
                    .push(InlineRef::new(9, 9, &vec![0; MAX_INLINE_LEN as usize]));
                m.shipped = 9;
            },
            "more than MAX_INLINE_LEN inline",
        );
        // Unknown fields stay refused, inside an entry too.
        let text = String::from_utf8(with_inline().encode()).unwrap();
        let extra = text.replacen("\"digest\"", "\"x\":1,\"digest\"", 1);
        assert!(Manifest::decode(1, extra.as_bytes()).is_err());
    }

    #[test]
    fn base64_round_trips_and_refuses_what_it_does_not_write() {
        for n in 0..40usize {
            let b: Vec<u8> = (0..n).map(|i| (i * 37 + n) as u8).collect();
            let t = to_base64(&b);
            assert_eq!(from_base64(t.as_bytes()), Some(b.clone()), "{n}");
            let r = InlineRef::new(1, 1, &b);
            assert_eq!(r.len(), n as u64);
        }
        assert_eq!(to_base64(b"frame six"), "ZnJhbWUgc2l4");
        assert_eq!(to_base64(b"ab"), "YWI=");
        assert_eq!(to_base64(b"a"), "YQ==");
        for bad in [
            "YWJ=", "YR==", "Y===", "YQ=A", "Y=Q=", "YWI", "YW I", "YQ==YQ==",
        ] {
            assert_eq!(from_base64(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn a_version_1_manifest_still_reads() {
        let v1 = br#"{"runlog":"manifest","version":1,"number":3,"epoch":2,"writer":"h","codec":"binary","storeId":"","snapshot":null,"chunks":[{"first":1,"last":4,"object":"chunks/00000000000000000001-00000000000000000004-e00000000000000000002-m00000000000000000003.chunk","len":99}],"shipped":4,"tail":"ab"}"#;
        let m = Manifest::decode(3, v1).unwrap();
        assert_eq!((m.version, m.shipped, m.inline.len()), (1, 4, 0));
    }

    #[test]
    fn a_manifest_names_its_holder_from_version_3_and_none_before() {
        let mut m = with_inline();
        assert_eq!((m.version, m.holder.as_str()), (3, "d"));
        assert!(Manifest::decode(1, &m.encode()).is_ok());
        m.holder.clear();
        let e = Manifest::decode(1, &m.encode()).unwrap_err().to_string();
        assert!(e.contains("version 3 names its holder"), "{e}");
        m.version = 2;
        assert!(
            Manifest::decode(1, &m.encode()).is_ok(),
            "version 2 has none"
        );
        m.holder = "d".into();
        assert!(Manifest::decode(1, &m.encode()).is_err());
        // Version 2's own holder rule, and the epoch rule before it.
        let mut v2 = with_inline();
        (v2.version, v2.holder) = (2, String::new());
        assert!(v2.held_by("", 1) && v2.held_by("x", 1) && !v2.held_by("x", 2));
        assert!(!v2.held_by("", 0));
        let v3 = with_inline();
        assert!(v3.held_by("d", 0) && !v3.held_by("e", 1) && !v3.held_by("", 1));
    }

    #[test]
    fn delta_tables_stand_over_the_snapshot_in_seq_order_from_version_3() {
        let table = |seq| SnapshotRef {
            seq,
            object: snapshot_object_name(seq, 1, 1),
            len: 10,
        };
        let mut m = Manifest::genesis(1, 1, ("h".into(), "d".into()), "binary", String::new());
        m.snapshot = Some(table(10));
        m.deltas = vec![table(20), table(30)];
        m.shipped = 30;
        let ok = Manifest::decode(1, &m.encode()).unwrap();
        assert_eq!(ok.objects().count(), 3, "the deltas are objects gc keeps");
        for (why, f) in [
            (
                "shipped below the newest delta",
                &(|m: &mut Manifest| m.shipped = 20) as &dyn Fn(&mut Manifest),
            ),
            ("no snapshot under them", &|m: &mut Manifest| {
                m.snapshot = None
            }),
            ("out of seq order", &|m: &mut Manifest| m.deltas.swap(0, 1)),
            ("a delta at the snapshot's seq", &|m: &mut Manifest| {
                m.deltas[0].seq = 10
            }),
            ("not a snapshot object", &|m: &mut Manifest| {
                m.deltas[1].object = "chunks/x".into()
            }),
            ("version 2", &|m: &mut Manifest| {
                m.version = 2;
                m.holder.clear();
            }),
        ] {
            let mut bad = m.clone();
            f(&mut bad);
            assert!(Manifest::decode(1, &bad.encode()).is_err(), "{why}");
        }
    }

    #[test]
    fn no_byte_change_of_a_version_3_manifest_panics_and_every_accepted_one_is_consistent() {
        // Inline records after a chunk; and a snapshot with delta tables
        // over it, then inline records.
        let mut tables = with_inline();
        tables.chunks.clear();
        tables.snapshot = Some(SnapshotRef {
            seq: 3,
            object: snapshot_object_name(3, 1, 1),
            len: 10,
        });
        tables.deltas = vec![SnapshotRef {
            seq: 5,
            object: snapshot_object_name(5, 1, 1),
            len: 12,
        }];
        for good in [with_inline().encode(), tables.encode()] {
            assert!(Manifest::decode(1, &good).is_ok());
            for i in 0..good.len() {
                for b in [b'0', b'9', b'a', b'"', b',', b'}', 0xff] {
                    let mut bad = good.clone();
                    bad[i] = b;
                    if let Ok(m) = Manifest::decode(1, &bad) {
                        for r in &m.inline {
                            let bytes = r.bytes().expect("accepted inline frames are base64");
                            assert_eq!(crate::remote::chunk::frame_digest(&bytes), r.digest);
                        }
                        let seqs: Vec<u64> =
                            m.snapshot.iter().chain(&m.deltas).map(|s| s.seq).collect();
                        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{m:?}");
                    }
                    let cut = &good[..i];
                    let _ = Manifest::decode(1, cut);
                }
            }
        }
    }
}
