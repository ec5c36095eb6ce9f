//! The snapshot file format: encode and decode, pure functions over bytes.

use super::format::*;
use super::frame::check_version;
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
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonSnapshotHeader {
    runlog: String,
    version: u16,
    codec: String,
    seq: u64,
    len: u64,
    crc: u32,
}

fn payload_crc(seq: u64, payload: &[u8]) -> u32 {
    masked_crc(&[
        &seq.to_le_bytes(),
        &(payload.len() as u64).to_le_bytes(),
        payload,
    ])
}

/// Encodes a whole snapshot file.
pub fn encode_snapshot(codec: Codec, seq: u64, payload: &[u8]) -> Vec<u8> {
    let crc = payload_crc(seq, payload);
    match codec {
        Codec::Binary => {
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
        Codec::Jsonl => {
            let head = JsonSnapshotHeader {
                runlog: "snapshot".into(),
                version: FORMAT_VERSION,
                codec: Codec::Jsonl.name().into(),
                seq,
                len: payload.len() as u64,
                crc,
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
        let window = &buf[..buf.len().min(MAX_JSONL_HEADER_LEN)];
        let nl = window
            .iter()
            .position(|&b| b == b'\n')
            .ok_or("JSONL snapshot header line is incomplete")?;
        let h: JsonSnapshotHeader = serde_json::from_slice(&buf[..nl])
            .map_err(|e| format!("JSONL snapshot header unreadable: {e}"))?;
        if h.runlog != "snapshot" {
            return Err(format!("not a snapshot header (runlog = {:?})", h.runlog));
        }
        check_version(h.version)?;
        if h.codec != Codec::Jsonl.name() {
            return Err(format!("JSONL snapshot header names codec {:?}", h.codec));
        }
        let payload = bounded_payload(buf, nl + 1, h.len, 1)?;
        if buf[buf.len() - 1] != b'\n' {
            return Err("JSONL snapshot does not end in a newline".into());
        }
        if h.crc != payload_crc(h.seq, payload) {
            return Err("snapshot checksum mismatch".into());
        }
        return Ok(SnapshotView {
            codec: Codec::Jsonl,
            seq: h.seq,
            payload,
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
    if le_u32(buf, SNAP_HCRC_AT) != masked_crc(&[&buf[..SNAP_HCRC_AT]]) {
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
    let payload = bounded_payload(buf, SNAPSHOT_HEADER_LEN, le_u64(buf, SNAP_LEN_AT), 0)?;
    if le_u32(buf, SNAP_PCRC_AT) != payload_crc(seq, payload) {
        return Err("snapshot checksum mismatch".into());
    }
    Ok(SnapshotView {
        codec: Codec::Binary,
        seq,
        payload,
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
        for codec in [Codec::Binary, Codec::Jsonl] {
            let f = encode_snapshot(codec, 12, b"{\"x\":1}");
            for cut in 0..f.len() {
                assert!(
                    decode_snapshot(&f[..cut]).is_err(),
                    "{codec:?} cut at {cut}"
                );
            }
        }
    }
}
