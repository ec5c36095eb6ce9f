//! Framing of segment headers and records, for both codecs. Pure functions over
//! bytes: no I/O, no allocation beyond the output buffer, no panic on any input.

use crate::engine::format::*;
use crate::engine::tag::{
    KEY_CHECK_LEN, Key, KeyCheck, STORE_ID_LEN, StoreId, TAG_LEN, Tag, from_hex, record_tag, tags_equal,
    to_hex,
};
use serde::{Deserialize, Serialize};

/// Why the bytes at some offset are not a valid frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameProblem {
    /// The bytes end before the frame does (`need` bytes from the frame start, `have` present).
    Incomplete {
        /// Bytes the frame needs from its start.
        need: u64,
        /// Bytes present from its start.
        have: u64,
    },
    /// The header checksum (length + seq) does not match.
    HeaderChecksum,
    /// The payload checksum does not match.
    Checksum,
    /// A length larger than `MAX_RECORD_LEN`.
    TooLong {
        /// The size found.
        len: u64,
    },
    /// Seq 0 is never written; an all-zero header would carry it.
    ZeroSeq,
    /// A JSONL line that is not a record object.
    Malformed(String),
}

impl std::fmt::Display for FrameProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameProblem::Incomplete { need, have } => {
                write!(f, "incomplete frame ({have} of {need} bytes present)")
            }
            FrameProblem::HeaderChecksum => f.write_str("record header checksum mismatch"),
            FrameProblem::Checksum => f.write_str("record checksum mismatch"),
            FrameProblem::TooLong { len } => {
                write!(
                    f,
                    "record length {len} exceeds MAX_RECORD_LEN {MAX_RECORD_LEN}"
                )
            }
            FrameProblem::ZeroSeq => f.write_str("record seq 0 (zero-filled bytes)"),
            FrameProblem::Malformed(why) => write!(f, "malformed record line: {why}"),
        }
    }
}

/// What a decoder found at an offset.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A valid record; `next` is the offset just past it.
    Record {
        /// The record's seq.
        seq: u64,
        /// Every record up to this seq was durable when this one was written.
        synced: u64,
        /// The payload bytes.
        payload: &'a [u8],
        /// Offset just past the record.
        next: usize,
    },
    /// Exactly at the end of the bytes.
    End,
    /// Not a valid frame.
    Bad(FrameProblem),
}

// ---- segment headers -----------------------------------------------------------

/// A decoded segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The codec.
    pub codec: Codec,
    /// The seq of the first record.
    pub first_seq: u64,
    /// Bytes the header occupies; records start here.
    pub len: usize,
    /// The store id of a tagged store's segment (version 2); `None` when untagged.
    pub store_id: Option<StoreId>,
    /// A tagged store's key check (FORMAT.md §10.6); `None` in a segment
    /// written before key checks (or untagged).
    pub key_check: Option<KeyCheck>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonSegmentHeader {
    runlog: String,
    version: u16,
    codec: String,
    #[serde(rename = "firstSeq")]
    first_seq: u64,
    #[serde(rename = "storeId", default, skip_serializing_if = "Option::is_none")]
    store_id: Option<String>,
    #[serde(rename = "keyCheck", default, skip_serializing_if = "Option::is_none")]
    key_check: Option<String>,
    crc: u32,
}

/// The checksum of a JSONL segment header: first seq, then a tagged store's id
/// and its key check when written.
fn jsonl_header_crc(first_seq: u64, id: Option<&StoreId>, check: Option<&KeyCheck>) -> u32 {
    match (id, check) {
        (None, _) => masked_crc(&[&first_seq.to_le_bytes()]),
        (Some(id), None) => masked_crc(&[&first_seq.to_le_bytes(), id]),
        (Some(id), Some(c)) => masked_crc(&[&first_seq.to_le_bytes(), id, c]),
    }
}

/// What every JSONL file header holds besides its own fields (FORMAT.md):
/// what the file is, the format version, the codec, and a tagged store's id.
pub(crate) trait JsonlHeader: serde::de::DeserializeOwned {
    /// `(runlog, version, codec, storeId)`.
    fn common(&self) -> (&str, u16, &str, Option<&str>);
}

impl JsonlHeader for JsonSegmentHeader {
    fn common(&self) -> (&str, u16, &str, Option<&str>) {
        let h = self;
        (&h.runlog, h.version, &h.codec, h.store_id.as_deref())
    }
}

/// Decodes the JSONL header line at the start of `buf`, of a file that is a
/// `what` ("segment" or "snapshot"): the line is found within
/// `MAX_JSONL_HEADER_LEN`, and its kind, version, codec and store id are
/// checked. Returns the header, the line's length without its newline, and the
/// store id. The caller checks the fields of its own kind (and the checksum).
pub(crate) fn decode_jsonl_header<H: JsonlHeader>(
    buf: &[u8],
    what: &str,
) -> Result<(H, usize, Option<StoreId>), String> {
    let window = &buf[..buf.len().min(MAX_JSONL_HEADER_LEN)];
    let nl = window
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| format!("JSONL {what} header line is incomplete"))?;
    let h: H = serde_json::from_slice(&buf[..nl])
        .map_err(|e| format!("JSONL {what} header unreadable: {e}"))?;
    let (runlog, version, codec, store_id) = h.common();
    if runlog != what {
        return Err(format!("not a {what} header (runlog = {runlog:?})"));
    }
    check_version(version)?;
    if codec.parse::<Codec>() != Ok(Codec::Jsonl) {
        return Err(format!("JSONL {what} header names codec {codec:?}"));
    }
    let store_id = tagged_field(version, store_id, "storeId")?
        .map(parse_store_id)
        .transpose()?;
    Ok((h, nl, store_id))
}

/// Parses a store id written as hex.
pub(crate) fn parse_store_id(hex: &str) -> Result<StoreId, String> {
    from_hex::<STORE_ID_LEN>(hex.as_bytes())
        .ok_or_else(|| format!("store id {hex:?} is not {} hex digits", 2 * STORE_ID_LEN))
}

#[cfg(any(test, feature = "sim"))]
/// Encodes the header of a segment whose first record will be `first_seq`.
pub fn encode_segment_header(codec: Codec, first_seq: u64) -> Vec<u8> {
    encode_segment_header_tagged(codec, first_seq, None)
}

/// Encodes a segment header; with a store id, the header of a tagged store
/// (version 2, FORMAT.md §10).
#[cfg(any(test, feature = "sim", feature = "remote"))]
pub fn encode_segment_header_tagged(codec: Codec, first_seq: u64, id: Option<&StoreId>) -> Vec<u8> {
    encode_segment_header_checked(codec, first_seq, id, None)
}

/// [`encode_segment_header_tagged`] with the store's key check (§10.6), as
/// every tagged segment is written now.
pub fn encode_segment_header_checked(
    codec: Codec,
    first_seq: u64,
    id: Option<&StoreId>,
    check: Option<&KeyCheck>,
) -> Vec<u8> {
    let check = check.filter(|_| id.is_some());
    match (codec, id) {
        (Codec::Binary, Some(id)) => {
            let mut h = vec![0u8; TAGGED_SEGMENT_HEADER_LEN];
            h[..SEG_MAGIC_END].copy_from_slice(&SEGMENT_MAGIC);
            h[SEG_MAGIC_END..SEG_VERSION_END].copy_from_slice(&TAGGED_FORMAT_VERSION.to_le_bytes());
            h[SEG_CODEC_AT] = CODEC_BINARY;
            h[SEG_FIRST_SEQ_AT..SEG_RESERVED_AT].copy_from_slice(&first_seq.to_le_bytes());
            // The untagged layout's reserved field holds the key check.
            if let Some(c) = check {
                h[SEG_RESERVED_AT..SEG_STORE_ID_AT].copy_from_slice(c);
            }
            h[SEG_STORE_ID_AT..SEG_TAGGED_CRC_AT].copy_from_slice(id);
            let crc = masked_crc(&[&h[..SEG_TAGGED_CRC_AT]]);
            h[SEG_TAGGED_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
            h
        }
        (Codec::Binary, None) => {
            let mut h = vec![0u8; SEGMENT_HEADER_LEN];
            h[..SEG_MAGIC_END].copy_from_slice(&SEGMENT_MAGIC);
            h[SEG_MAGIC_END..SEG_VERSION_END].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
            h[SEG_CODEC_AT] = CODEC_BINARY;
            h[SEG_FIRST_SEQ_AT..SEG_RESERVED_AT].copy_from_slice(&first_seq.to_le_bytes());
            let crc = masked_crc(&[&h[..SEG_CRC_AT]]);
            h[SEG_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
            h
        }
        (Codec::Jsonl, _) => {
            let head = JsonSegmentHeader {
                runlog: "segment".into(),
                version: if id.is_some() {
                    TAGGED_FORMAT_VERSION
                } else {
                    FORMAT_VERSION
                },
                codec: Codec::Jsonl.name().into(),
                first_seq,
                store_id: id.map(|i| to_hex(i)),
                key_check: check.map(|c| to_hex(c)),
                crc: jsonl_header_crc(first_seq, id, check),
            };
            let mut v = serde_json::to_vec(&head).expect("header serializes");
            v.push(b'\n');
            v
        }
    }
}

/// Decodes a segment header from the start of a file's bytes.
pub fn decode_segment_header(buf: &[u8]) -> Result<SegmentHeader, String> {
    if buf.starts_with(JSONL_HEADER_PREFIX) {
        let (h, nl, store_id) = decode_jsonl_header::<JsonSegmentHeader>(buf, "segment")?;
        if store_id.is_none() && h.key_check.is_some() {
            return Err(format!("version {} header with keyCheck", h.version));
        }
        let key_check = match h.key_check.as_deref() {
            None => None,
            Some(hex) => Some(from_hex::<KEY_CHECK_LEN>(hex.as_bytes()).ok_or_else(|| {
                format!("key check {hex:?} is not {} hex digits", 2 * KEY_CHECK_LEN)
            })?),
        };
        if h.crc != jsonl_header_crc(h.first_seq, store_id.as_ref(), key_check.as_ref()) {
            return Err("segment header checksum mismatch".into());
        }
        return Ok(SegmentHeader {
            codec: Codec::Jsonl,
            first_seq: h.first_seq,
            len: nl + 1,
            store_id,
            key_check,
        });
    }
    if buf.len() < SEGMENT_HEADER_LEN {
        return Err(format!(
            "segment header incomplete ({} of {SEGMENT_HEADER_LEN} bytes)",
            buf.len()
        ));
    }
    if buf[..SEG_MAGIC_END] != SEGMENT_MAGIC {
        return Err("bad segment magic".into());
    }
    // The version says which layout the checksum is at; the checksum then covers it.
    let tagged = le_u16(buf, SEG_MAGIC_END) == TAGGED_FORMAT_VERSION;
    let (crc_at, len) = if tagged {
        (SEG_TAGGED_CRC_AT, TAGGED_SEGMENT_HEADER_LEN)
    } else {
        (SEG_CRC_AT, SEGMENT_HEADER_LEN)
    };
    if buf.len() < len {
        return Err(format!(
            "segment header incomplete ({} of {len} bytes)",
            buf.len()
        ));
    }
    if le_u32(buf, crc_at) != masked_crc(&[&buf[..crc_at]]) {
        return Err("segment header checksum mismatch".into());
    }
    check_version(le_u16(buf, SEG_MAGIC_END))?;
    match Codec::from_id(buf[SEG_CODEC_AT]) {
        Some(Codec::Binary) => {}
        _ => {
            return Err(format!(
                "binary segment header names codec {}",
                buf[SEG_CODEC_AT]
            ));
        }
    }
    let store_id = tagged.then(|| {
        let mut id = [0u8; STORE_ID_LEN];
        id.copy_from_slice(&buf[SEG_STORE_ID_AT..SEG_TAGGED_CRC_AT]);
        id
    });
    let mut check = [0u8; KEY_CHECK_LEN];
    check.copy_from_slice(&buf[SEG_RESERVED_AT..SEG_STORE_ID_AT]);
    // Zeros: a tagged segment written before key checks (or an untagged one).
    let key_check = (tagged && check != [0u8; KEY_CHECK_LEN]).then_some(check);
    Ok(SegmentHeader {
        codec: Codec::Binary,
        first_seq: le_u64(buf, SEG_FIRST_SEQ_AT),
        len,
        store_id,
        key_check,
    })
}

pub(crate) fn check_version(v: u16) -> Result<(), String> {
    if v == FORMAT_VERSION || v == TAGGED_FORMAT_VERSION {
        Ok(())
    } else {
        Err(format!(
            "format version {v} is not supported (this build reads versions {FORMAT_VERSION} and {TAGGED_FORMAT_VERSION})"
        ))
    }
}

/// A tagged store's header field of a JSONL header: required in version 2,
/// refused in version 1.
pub(crate) fn tagged_field<'a>(
    version: u16,
    field: Option<&'a str>,
    name: &str,
) -> Result<Option<&'a str>, String> {
    match (version == TAGGED_FORMAT_VERSION, field) {
        (true, Some(f)) => Ok(Some(f)),
        (false, None) => Ok(None),
        (true, None) => Err(format!("version {version} header without {name}")),
        (false, Some(_)) => Err(format!("version {version} header with {name}")),
    }
}

// ---- records ---------------------------------------------------------------

#[cfg(any(test, feature = "sim"))]
/// Appends one framed record to `out`. `synced` is the writer's durable watermark
/// when it writes the record: every record up to it had been fsynced (`synced < seq`).
/// The caller has checked `payload.len() <= MAX_RECORD_LEN`.
pub fn encode_record(codec: Codec, seq: u64, synced: u64, payload: &[u8], out: &mut Vec<u8>) {
    encode_record_tagged(codec, seq, synced, payload, None, out)
}

/// Appends one framed record of a tagged store (with `tag`) or of an untagged one.
/// Binary: the tag follows the payload inside the frame and `len` counts it; the
/// checksum covers it. JSONL: a `"mac"` field before `t`, its 16 bytes appended to
/// the checksummed bytes. The caller has checked the length, tag included.
pub fn encode_record_tagged(
    codec: Codec,
    seq: u64,
    synced: u64,
    payload: &[u8],
    tag: Option<&Tag>,
    out: &mut Vec<u8>,
) {
    let tag: &[u8] = tag.map_or(&[], |t| &t[..]);
    debug_assert!((payload.len() + tag.len()) as u64 <= u64::from(MAX_RECORD_LEN));
    debug_assert!(seq > 0 && synced < seq);
    let seq_b = seq.to_le_bytes();
    let synced_b = synced.to_le_bytes();
    match codec {
        Codec::Binary => {
            let len = ((payload.len() + tag.len()) as u32).to_le_bytes();
            let crc = masked_crc(&[&len, &seq_b, &synced_b, payload, tag]);
            out.extend_from_slice(&len);
            out.extend_from_slice(&seq_b);
            out.extend_from_slice(&synced_b);
            out.extend_from_slice(&masked_crc(&[&len, &seq_b, &synced_b]).to_le_bytes());
            out.extend_from_slice(payload);
            out.extend_from_slice(tag);
            out.extend_from_slice(&crc.to_le_bytes());
        }
        Codec::Jsonl => {
            use std::io::Write;
            let len = (payload.len() as u32).to_le_bytes();
            let crc = masked_crc(&[&len, &seq_b, &synced_b, payload, tag]);
            // `t` comes last so its bytes can be checked exactly as written.
            let _ = write!(
                out,
                "{{\"seq\":{seq},\"synced\":{synced},\"len\":{},\"crc\":{crc},",
                payload.len()
            );
            if !tag.is_empty() {
                let _ = write!(out, "\"mac\":\"{}\",", to_hex(tag));
            }
            out.extend_from_slice(b"\"t\":");
            out.extend_from_slice(payload);
            out.extend_from_slice(b"}\n");
        }
    }
}

/// Decodes the record starting at `at`.
pub fn decode_record(codec: Codec, buf: &[u8], at: usize) -> Frame<'_> {
    match codec {
        Codec::Binary => decode_binary(buf, at),
        Codec::Jsonl => decode_jsonl(buf, at),
    }
}

fn decode_binary(buf: &[u8], at: usize) -> Frame<'_> {
    let rest = buf.get(at..).unwrap_or(&[]);
    if rest.is_empty() {
        return Frame::End;
    }
    if rest.len() < RECORD_HEADER_LEN {
        return Frame::Bad(FrameProblem::Incomplete {
            need: RECORD_HEADER_LEN as u64,
            have: rest.len() as u64,
        });
    }
    let len_b = &rest[..REC_SEQ_AT];
    let seq_b = &rest[REC_SEQ_AT..REC_SYNCED_AT];
    let synced_b = &rest[REC_SYNCED_AT..REC_HCRC_AT];
    if le_u32(rest, REC_HCRC_AT) != masked_crc(&[len_b, seq_b, synced_b]) {
        return Frame::Bad(FrameProblem::HeaderChecksum);
    }
    let len = le_u32(rest, 0);
    let seq = le_u64(rest, REC_SEQ_AT);
    let synced = le_u64(rest, REC_SYNCED_AT);
    if seq == 0 {
        return Frame::Bad(FrameProblem::ZeroSeq);
    }
    if synced >= seq {
        return Frame::Bad(FrameProblem::Malformed(format!(
            "synced {synced} is not below seq {seq}"
        )));
    }
    if len > MAX_RECORD_LEN {
        return Frame::Bad(FrameProblem::TooLong { len: len.into() });
    }
    let total = RECORD_HEADER_LEN + len as usize + RECORD_TRAILER_LEN;
    if rest.len() < total {
        return Frame::Bad(FrameProblem::Incomplete {
            need: total as u64,
            have: rest.len() as u64,
        });
    }
    let payload = &rest[RECORD_HEADER_LEN..RECORD_HEADER_LEN + len as usize];
    if le_u32(rest, total - RECORD_TRAILER_LEN) != masked_crc(&[len_b, seq_b, synced_b, payload]) {
        return Frame::Bad(FrameProblem::Checksum);
    }
    Frame::Record {
        seq,
        synced,
        payload,
        next: at + total,
    }
}

/// The longest JSONL record line: the payload plus its fixed fields.
const MAX_JSONL_LINE: usize = MAX_RECORD_LEN as usize + 128;

fn decode_jsonl(buf: &[u8], at: usize) -> Frame<'_> {
    let rest = buf.get(at..).unwrap_or(&[]);
    if rest.is_empty() {
        return Frame::End;
    }
    let window = &rest[..rest.len().min(MAX_JSONL_LINE + 1)];
    let Some(nl) = window.iter().position(|&b| b == b'\n') else {
        if rest.len() > MAX_JSONL_LINE {
            return Frame::Bad(FrameProblem::TooLong {
                len: rest.len() as u64,
            });
        }
        return Frame::Bad(FrameProblem::Incomplete {
            need: rest.len() as u64 + 1,
            have: rest.len() as u64,
        });
    };
    let line = &rest[..nl];
    // One parser: the fields in the one form the writer puts them (FORMAT.md §3).
    let Some(rec) = jsonl_fixed_fields(line) else {
        return Frame::Bad(FrameProblem::Malformed(
            "not a record line: the fields seq, synced, len, crc, [mac,] t in this order, compact".into(),
        ));
    };
    if rec.seq == 0 {
        return Frame::Bad(FrameProblem::ZeroSeq);
    }
    if rec.synced >= rec.seq {
        return Frame::Bad(FrameProblem::Malformed(format!(
            "synced {} is not below seq {}",
            rec.synced, rec.seq
        )));
    }
    if rec.len > u64::from(MAX_RECORD_LEN) {
        return Frame::Bad(FrameProblem::TooLong { len: rec.len });
    }
    // `t` is the last field: its bytes are those between `"t":` and the final `}`.
    let Some(payload) = rec.t.strip_suffix(b"}") else {
        return Frame::Bad(FrameProblem::Malformed("record line does not end in '}'".into()));
    };
    if rec.len != payload.len() as u64 {
        return Frame::Bad(FrameProblem::Checksum);
    }
    let mac = rec.mac;
    let len_b = (payload.len() as u32).to_le_bytes();
    let parts: [&[u8]; 5] = [
        &len_b,
        &rec.seq.to_le_bytes(),
        &rec.synced.to_le_bytes(),
        payload,
        mac.as_ref().map_or(&[], |m| &m[..]),
    ];
    if rec.crc != u64::from(masked_crc(&parts)) {
        return Frame::Bad(FrameProblem::Checksum);
    }
    // The payload is a sub-slice of `line`, so its position in `buf` is exact.
    Frame::Record {
        seq: rec.seq,
        synced: rec.synced,
        payload,
        next: at + nl + 1,
    }
}

/// How every JSONL record line starts (see `encode_record`).
const JSONL_RECORD_PREFIX: &[u8] = b"{\"seq\":";

/// Where the next frame may start after a bad one, when scanning ahead for
/// valid records (every byte for binary, every line start for JSONL).
pub fn next_candidate(codec: Codec, buf: &[u8], at: usize) -> Option<usize> {
    match codec {
        Codec::Binary => (at + 1 < buf.len()).then_some(at + 1),
        Codec::Jsonl => {
            let nl = buf.get(at..)?.iter().position(|&b| b == b'\n')?;
            let line_end = at + nl;
            // Damage may have destroyed the newline before a valid record, which
            // then starts inside this line and ends exactly at its newline. Only
            // such positions are candidates, so a line of look-alikes stays cheap.
            let mut from = at + 1;
            while let Some(i) = buf
                .get(from..line_end)
                .unwrap_or(&[])
                .windows(JSONL_RECORD_PREFIX.len())
                .position(|w| w == JSONL_RECORD_PREFIX)
            {
                let p = from + i;
                if jsonl_record_fills(&buf[p..line_end]) {
                    return Some(p);
                }
                from = p + 1;
            }
            let next = line_end + 1;
            (next < buf.len()).then_some(next)
        }
    }
}

/// The fields of a JSONL record line as `encode_record_tagged` writes them.
struct JsonlFields<'a> {
    seq: u64,
    synced: u64,
    len: u64,
    crc: u64,
    mac: Option<Tag>,
    /// The bytes after `"t":` to the end of the line (the payload, then `}`).
    t: &'a [u8],
}

/// The JSONL record parser: the fixed fields `encode_record_tagged` writes at the
/// start of a record line, in their order and form (decimal numbers without
/// leading zeros, the mac if any), and the bytes after `"t":`. `None` when
/// `line` does not start that way.
fn jsonl_fixed_fields(line: &[u8]) -> Option<JsonlFields<'_>> {
    let mut rest = line;
    let mut n = [0u64; 4];
    for (i, key) in [
        &b"{\"seq\":"[..],
        b",\"synced\":",
        b",\"len\":",
        b",\"crc\":",
    ]
    .into_iter()
    .enumerate()
    {
        let r = rest.strip_prefix(key)?;
        let digits = r.iter().take(20).take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || (digits > 1 && r[0] == b'0') {
            return None;
        }
        n[i] = std::str::from_utf8(&r[..digits]).ok()?.parse().ok()?;
        rest = &r[digits..];
    }
    let mut mac = None;
    if let Some(r) = rest.strip_prefix(b",\"mac\":\"") {
        mac = Some(from_hex::<TAG_LEN>(r.get(..2 * TAG_LEN)?)?);
        rest = r[2 * TAG_LEN..].strip_prefix(b"\"")?;
    }
    let [seq, synced, len, crc] = n;
    Some(JsonlFields {
        seq,
        synced,
        len,
        crc,
        mac,
        t: rest.strip_prefix(b",\"t\":")?,
    })
}

/// True when `line` (without its newline) has the fixed fields `encode_record`
/// writes and the length it declares ends the record exactly at the line's end.
fn jsonl_record_fills(line: &[u8]) -> bool {
    jsonl_fixed_fields(line).is_some_and(|f| {
        f.t.len() as u64 == f.len.saturating_add(1) && f.t.ends_with(b"}")
    })
}

/// The mac of the JSONL record line starting at `at`, read from the fixed fields
/// in the form the writer puts them (a tagged store's line in any other form is
/// not one its writer wrote). `None` when absent or not in that form.
pub fn jsonl_record_mac(buf: &[u8], at: usize) -> Option<Tag> {
    let rest = buf.get(at..)?;
    let window = &rest[..rest.len().min(MAX_JSONL_LINE + 1)];
    let nl = window.iter().position(|&b| b == b'\n')?;
    jsonl_fixed_fields(&rest[..nl])?.mac
}

/// Splits a binary record body into payload and tag (the tag is its last 16 bytes).
pub fn split_body(body: &[u8]) -> Option<(&[u8], Tag)> {
    let at = body.len().checked_sub(TAG_LEN)?;
    let mut t = [0u8; TAG_LEN];
    t.copy_from_slice(&body[at..]);
    Some((&body[..at], t))
}

/// Checks the tag of the record at `at` of a tagged store's segment `buf` whose
/// frame decoded to `seq` and `body`, and returns its payload. Binary: the tag is
/// the body's last 16 bytes. JSONL: the line's `mac` field, which must stand where
/// the writer puts it. An error says what failed.
pub fn open_record<'a>(
    key: &Key,
    id: &StoreId,
    codec: Codec,
    buf: &[u8],
    at: u64,
    seq: u64,
    body: &'a [u8],
) -> Result<&'a [u8], String> {
    let (payload, tag) = match codec {
        Codec::Binary => {
            split_body(body).ok_or("record too short to carry a tag")?
        }
        Codec::Jsonl => {
            let mac = usize::try_from(at)
                .ok()
                .and_then(|at| jsonl_record_mac(buf, at))
                .ok_or("record line carries no mac where a tagged store's writer puts it")?;
            (body, mac)
        }
    };
    if tags_equal(&record_tag(key, id, seq, payload), &tag) {
        Ok(payload)
    } else {
        Err("record tag mismatch".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_body_splits_into_payload_and_its_last_16_bytes_of_tag() {
        assert_eq!(split_body(&[1; 15]), None);
        let body = [[2u8; 3].as_slice(), &[1u8; 16]].concat();
        let (p, t) = split_body(&body).unwrap();
        assert_eq!((p, t), (&[2u8, 2, 2][..], [1u8; 16]));
    }

    fn rec(codec: Codec, seq: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        encode_record(codec, seq, seq - 1, payload, &mut v);
        v
    }

    #[test]
    fn binary_round_trip() {
        let b = rec(Codec::Binary, 9, b"hello");
        assert_eq!(
            decode_record(Codec::Binary, &b, 0),
            Frame::Record {
                seq: 9,
                synced: 8,
                payload: b"hello",
                next: b.len()
            }
        );
        assert_eq!(decode_record(Codec::Binary, &b, b.len()), Frame::End);
    }

    #[test]
    fn jsonl_round_trip_is_plain_json() {
        let b = rec(Codec::Jsonl, 3, br#"{"a":[1,2]}"#);
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["t"]["a"][1], 2);
        assert_eq!(
            decode_record(Codec::Jsonl, &b, 0),
            Frame::Record {
                seq: 3,
                synced: 2,
                payload: br#"{"a":[1,2]}"#,
                next: b.len()
            }
        );
    }

    #[test]
    fn all_zero_bytes_are_never_a_record() {
        for n in 1..64 {
            let z = vec![0u8; n];
            assert!(matches!(decode_record(Codec::Binary, &z, 0), Frame::Bad(_)));
            assert!(matches!(decode_record(Codec::Jsonl, &z, 0), Frame::Bad(_)));
        }
    }

    #[test]
    fn huge_length_in_valid_header_is_rejected_without_allocating() {
        let len = u32::MAX.to_le_bytes();
        let seq = 1u64.to_le_bytes();
        let synced = 0u64.to_le_bytes();
        let mut b = Vec::new();
        b.extend_from_slice(&len);
        b.extend_from_slice(&seq);
        b.extend_from_slice(&synced);
        b.extend_from_slice(&masked_crc(&[&len, &seq, &synced]).to_le_bytes());
        b.extend_from_slice(&[0; 8]);
        assert_eq!(
            decode_record(Codec::Binary, &b, 0),
            Frame::Bad(FrameProblem::TooLong {
                len: u32::MAX.into()
            })
        );
    }

    #[test]
    fn headers_round_trip() {
        for codec in [Codec::Binary, Codec::Jsonl] {
            let h = encode_segment_header(codec, 77);
            let d = decode_segment_header(&h).unwrap();
            assert_eq!((d.codec, d.first_seq, d.len), (codec, 77, h.len()));
            assert_eq!(d.store_id, None);
            let id = [0x5au8; STORE_ID_LEN];
            let k = encode_segment_header_tagged(codec, 77, Some(&id));
            let d = decode_segment_header(&k).unwrap();
            assert_eq!((d.codec, d.first_seq, d.len), (codec, 77, k.len()));
            assert_eq!(d.store_id, Some(id));
            for cut in 0..k.len() {
                assert!(decode_segment_header(&k[..cut]).is_err(), "{codec:?} {cut}");
            }
        }
    }

    #[test]
    fn tagged_headers_carry_version_2_and_untagged_stay_version_1() {
        let id = [7u8; STORE_ID_LEN];
        let k = encode_segment_header_tagged(Codec::Binary, 1, Some(&id));
        assert_eq!(k.len(), TAGGED_SEGMENT_HEADER_LEN);
        assert_eq!(le_u16(&k, 8), 2);
        assert_eq!(&k[28..44], &id);
        let u = encode_segment_header(Codec::Binary, 1);
        assert_eq!(le_u16(&u, 8), 1);
        let j = encode_segment_header_tagged(Codec::Jsonl, 1, Some(&id));
        assert!(j.starts_with(b"{\"runlog\":\"segment\",\"version\":2,"));
    }

    #[test]
    fn tagged_records_round_trip_and_the_checksum_covers_the_tag() {
        let tag = [0xeeu8; TAG_LEN];
        for codec in [Codec::Binary, Codec::Jsonl] {
            let mut b = Vec::new();
            encode_record_tagged(codec, 4, 3, b"{\"v\":1}", Some(&tag), &mut b);
            let Frame::Record { payload, next, .. } = decode_record(codec, &b, 0) else {
                panic!("{codec:?}: not a record")
            };
            assert_eq!(next, b.len());
            match codec {
                // The binary body is payload ‖ tag.
                Codec::Binary => assert_eq!(payload, [&b"{\"v\":1}"[..], &tag].concat()),
                Codec::Jsonl => {
                    assert_eq!(payload, b"{\"v\":1}");
                    assert_eq!(jsonl_record_mac(&b, 0), Some(tag));
                    assert!(jsonl_record_fills(&b[..b.len() - 1]));
                }
            }
            // Any change to the tag is a checksum mismatch, not a valid record.
            let at = match codec {
                Codec::Binary => b.len() - RECORD_TRAILER_LEN - 3,
                Codec::Jsonl => b.windows(7).position(|w| w == b"\"mac\":\"").unwrap() + 9,
            };
            let mut d = b.clone();
            d[at] = if d[at] == b'e' { b'f' } else { d[at] ^ 1 };
            assert!(
                matches!(decode_record(codec, &d, 0), Frame::Bad(_)),
                "{codec:?}"
            );
        }
        let mut u = Vec::new();
        encode_record(Codec::Jsonl, 4, 3, b"1", &mut u);
        assert_eq!(jsonl_record_mac(&u, 0), None);
    }
}
