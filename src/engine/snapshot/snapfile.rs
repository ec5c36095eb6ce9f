//! The snapshot file format: encode and decode, pure functions over bytes.

use crate::engine::format::*;
use crate::engine::log::frame::{JsonlHeader, check_version, decode_jsonl_header, tagged_field};
use crate::engine::tag::{STORE_ID_LEN, StoreId, TAG_LEN, Tag, from_hex, to_hex};
use serde::{Deserialize, Serialize};

/// A decoded snapshot: the seq it covers and its payload bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct SnapshotView<'a> {
    /// The codec.
    pub codec: Codec,
    /// The seq involved, where known.
    pub seq: u64,
    /// The payload bytes.
    pub payload: &'a [u8],
    /// A tagged store's snapshot (version 2): its store id and tag.
    pub tagging: Option<(StoreId, Tag)>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonSnapshotHeader {
    runlog: String,
    version: u16,
    codec: String,
    seq: u64,
    len: u64,
    #[serde(rename = "storeId", default, skip_serializing_if = "Option::is_none")]
    store_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mac: Option<String>,
    crc: u32,
}

impl JsonlHeader for JsonSnapshotHeader {
    fn common(&self) -> (&str, u16, &str, Option<&str>) {
        let h = self;
        (&h.runlog, h.version, &h.codec, h.store_id.as_deref())
    }
}

fn payload_crc(seq: u64, payload: &[u8]) -> u32 {
    masked_crc(&[
        &seq.to_le_bytes(),
        &(payload.len() as u64).to_le_bytes(),
        payload,
    ])
}

/// The checksum of a JSONL snapshot: the payload checksum's input, then a tagged
/// store's id and tag (a JSONL header has no checksum of its own).
fn jsonl_crc(seq: u64, payload: &[u8], tagging: Option<(&StoreId, &Tag)>) -> u32 {
    let len = (payload.len() as u64).to_le_bytes();
    match tagging {
        None => masked_crc(&[&seq.to_le_bytes(), &len, payload]),
        Some((id, tag)) => masked_crc(&[&seq.to_le_bytes(), &len, payload, id, tag]),
    }
}

#[cfg(any(test, feature = "sim"))]
/// Encodes a whole snapshot file.
pub fn encode_snapshot(codec: Codec, seq: u64, payload: &[u8]) -> Vec<u8> {
    encode_snapshot_tagged(codec, seq, payload, None)
}

/// Encodes a whole snapshot file; with a store id and tag, a tagged store's
/// snapshot (version 2, FORMAT.md §10).
pub fn encode_snapshot_tagged(
    codec: Codec,
    seq: u64,
    payload: &[u8],
    tagging: Option<(&StoreId, &Tag)>,
) -> Vec<u8> {
    let crc = payload_crc(seq, payload);
    match (codec, tagging) {
        (Codec::Binary, Some((id, tag))) => {
            let mut h = vec![0u8; TAGGED_SNAPSHOT_HEADER_LEN];
            h[..SNAPSHOT_MAGIC.len()].copy_from_slice(&SNAPSHOT_MAGIC);
            h[SNAPSHOT_MAGIC.len()..SNAP_CODEC_AT]
                .copy_from_slice(&TAGGED_FORMAT_VERSION.to_le_bytes());
            h[SNAP_CODEC_AT] = CODEC_BINARY;
            h[SNAP_SEQ_AT..SNAP_LEN_AT].copy_from_slice(&seq.to_le_bytes());
            h[SNAP_LEN_AT..SNAP_STORE_ID_AT].copy_from_slice(&(payload.len() as u64).to_le_bytes());
            h[SNAP_STORE_ID_AT..SNAP_TAG_AT].copy_from_slice(id);
            h[SNAP_TAG_AT..SNAP_TAGGED_PCRC_AT].copy_from_slice(tag);
            h[SNAP_TAGGED_PCRC_AT..SNAP_TAGGED_HCRC_AT].copy_from_slice(&crc.to_le_bytes());
            let hcrc = masked_crc(&[&h[..SNAP_TAGGED_HCRC_AT]]);
            h[SNAP_TAGGED_HCRC_AT..].copy_from_slice(&hcrc.to_le_bytes());
            h.reserve(payload.len());
            h.extend_from_slice(payload);
            h
        }
        (Codec::Binary, None) => {
            let mut h = vec![0u8; SNAPSHOT_HEADER_LEN];
            h[..SNAPSHOT_MAGIC.len()].copy_from_slice(&SNAPSHOT_MAGIC);
            h[SNAPSHOT_MAGIC.len()..SNAP_CODEC_AT].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
            h[SNAP_CODEC_AT] = CODEC_BINARY;
            h[SNAP_SEQ_AT..SNAP_LEN_AT].copy_from_slice(&seq.to_le_bytes());
            h[SNAP_LEN_AT..SNAP_PCRC_AT].copy_from_slice(&(payload.len() as u64).to_le_bytes());
            h[SNAP_PCRC_AT..SNAP_HCRC_AT].copy_from_slice(&crc.to_le_bytes());
            let hcrc = masked_crc(&[&h[..SNAP_HCRC_AT]]);
            h[SNAP_HCRC_AT..].copy_from_slice(&hcrc.to_le_bytes());
            h.reserve(payload.len());
            h.extend_from_slice(payload);
            h
        }
        (Codec::Jsonl, _) => {
            let head = JsonSnapshotHeader {
                runlog: "snapshot".into(),
                version: if tagging.is_some() {
                    TAGGED_FORMAT_VERSION
                } else {
                    FORMAT_VERSION
                },
                codec: Codec::Jsonl.name().into(),
                seq,
                len: payload.len() as u64,
                store_id: tagging.map(|(id, _)| to_hex(id)),
                mac: tagging.map(|(_, tag)| to_hex(tag)),
                crc: jsonl_crc(seq, payload, tagging),
            };
            let mut v = serde_json::to_vec(&head).expect("header serializes");
            v.push(b'\n');
            v.reserve(payload.len() + 1);
            v.extend_from_slice(payload);
            v.push(b'\n');
            v
        }
    }
}

/// Decodes a whole snapshot file, verifying its checksums and length.
pub fn decode_snapshot(buf: &[u8]) -> Result<SnapshotView<'_>, String> {
    if buf.starts_with(JSONL_HEADER_PREFIX) {
        let (h, nl, store_id) = decode_jsonl_header::<JsonSnapshotHeader>(buf, "snapshot")?;
        let tag = tagged_field(h.version, h.mac.as_deref(), "mac")?
            .map(|m| {
                from_hex::<TAG_LEN>(m.as_bytes())
                    .ok_or_else(|| format!("mac is not {} hex digits", 2 * TAG_LEN))
            })
            .transpose()?;
        let tagging = store_id.zip(tag);
        let payload = bounded_payload(buf, nl + 1, h.len, 1)?;
        if buf[buf.len() - 1] != b'\n' {
            return Err("JSONL snapshot does not end in a newline".into());
        }
        if h.crc != jsonl_crc(h.seq, payload, tagging.as_ref().map(|(i, t)| (i, t))) {
            return Err("snapshot checksum mismatch".into());
        }
        return Ok(SnapshotView {
            codec: Codec::Jsonl,
            seq: h.seq,
            payload,
            tagging,
        });
    }
    if buf.len() < SNAPSHOT_HEADER_LEN {
        return Err(format!(
            "snapshot header incomplete ({} of {SNAPSHOT_HEADER_LEN} bytes)",
            buf.len()
        ));
    }
    if buf[..SNAPSHOT_MAGIC.len()] != SNAPSHOT_MAGIC {
        return Err("bad snapshot magic".into());
    }
    // The version says which layout the checksums are at; the header checksum covers it.
    let tagged = le_u16(buf, SNAPSHOT_MAGIC.len()) == TAGGED_FORMAT_VERSION;
    let (pcrc_at, hcrc_at, header_len) = if tagged {
        (
            SNAP_TAGGED_PCRC_AT,
            SNAP_TAGGED_HCRC_AT,
            TAGGED_SNAPSHOT_HEADER_LEN,
        )
    } else {
        (SNAP_PCRC_AT, SNAP_HCRC_AT, SNAPSHOT_HEADER_LEN)
    };
    if buf.len() < header_len {
        return Err(format!(
            "snapshot header incomplete ({} of {header_len} bytes)",
            buf.len()
        ));
    }
    if le_u32(buf, hcrc_at) != masked_crc(&[&buf[..hcrc_at]]) {
        return Err("snapshot header checksum mismatch".into());
    }
    check_version(le_u16(buf, SNAPSHOT_MAGIC.len()))?;
    if buf[SNAP_CODEC_AT] != CODEC_BINARY {
        return Err(format!(
            "binary snapshot header names codec {}",
            buf[SNAP_CODEC_AT]
        ));
    }
    let seq = le_u64(buf, SNAP_SEQ_AT);
    let payload = bounded_payload(buf, header_len, le_u64(buf, SNAP_LEN_AT), 0)?;
    if le_u32(buf, pcrc_at) != payload_crc(seq, payload) {
        return Err("snapshot checksum mismatch".into());
    }
    let tagging = tagged.then(|| {
        let mut id = [0u8; STORE_ID_LEN];
        id.copy_from_slice(&buf[SNAP_STORE_ID_AT..SNAP_TAG_AT]);
        let mut tag = [0u8; TAG_LEN];
        tag.copy_from_slice(&buf[SNAP_TAG_AT..SNAP_TAGGED_PCRC_AT]);
        (id, tag)
    });
    Ok(SnapshotView {
        codec: Codec::Binary,
        seq,
        payload,
        tagging,
    })
}

/// The payload at `start` of declared length `len`, followed by exactly `trailer` bytes.
fn bounded_payload(buf: &[u8], start: usize, len: u64, trailer: usize) -> Result<&[u8], String> {
    if len > MAX_SNAPSHOT_LEN {
        return Err(format!(
            "snapshot length {len} exceeds MAX_SNAPSHOT_LEN {MAX_SNAPSHOT_LEN}"
        ));
    }
    let present = (buf.len() - start) as u64;
    let expect = len + trailer as u64;
    if present != expect {
        return Err(format!(
            "snapshot declares {len} payload bytes but the file holds {} after its header",
            present.saturating_sub(trailer as u64)
        ));
    }
    Ok(&buf[start..start + len as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_both_codecs() {
        for codec in [Codec::Binary, Codec::Jsonl] {
            let f = encode_snapshot(codec, 12, b"{\"x\":1}");
            let v = decode_snapshot(&f).unwrap();
            assert_eq!((v.codec, v.seq, v.payload), (codec, 12, &b"{\"x\":1}"[..]));
        }
    }

    #[test]
    fn any_truncation_is_an_error() {
        let tagging = ([1u8; STORE_ID_LEN], [2u8; TAG_LEN]);
        for codec in [Codec::Binary, Codec::Jsonl] {
            for s in [None, Some((&tagging.0, &tagging.1))] {
                let f = encode_snapshot_tagged(codec, 12, b"{\"x\":1}", s);
                for cut in 0..f.len() {
                    assert!(
                        decode_snapshot(&f[..cut]).is_err(),
                        "{codec:?} cut at {cut}"
                    );
                }
            }
        }
    }

    #[test]
    fn tagged_round_trip_and_every_header_byte_is_checked() {
        let (id, tag) = ([0x11u8; STORE_ID_LEN], [0x22u8; TAG_LEN]);
        for codec in [Codec::Binary, Codec::Jsonl] {
            let f = encode_snapshot_tagged(codec, 12, b"{\"x\":1}", Some((&id, &tag)));
            let v = decode_snapshot(&f).unwrap();
            assert_eq!(
                (v.seq, v.payload, v.tagging),
                (12, &b"{\"x\":1}"[..], Some((id, tag)))
            );
            let hl = f.len() - b"{\"x\":1}".len() - usize::from(codec == Codec::Jsonl);
            // Store id and tag are under a checksum: accidental damage stays a checksum matter.
            for i in 0..hl {
                let mut d = f.clone();
                d[i] = if d[i] == b'1' {
                    b'3'
                } else if d[i] == b'2' {
                    b'4'
                } else {
                    d[i] ^ 0x01
                };
                if let Ok(w) = decode_snapshot(&d) {
                    assert_eq!(
                        (w.seq, w.payload, w.tagging),
                        (v.seq, v.payload, v.tagging),
                        "{codec:?} byte {i}"
                    );
                }
            }
        }
        assert_eq!(
            decode_snapshot(&encode_snapshot(Codec::Binary, 1, b"p"))
                .unwrap()
                .tagging,
            None
        );
    }
}
