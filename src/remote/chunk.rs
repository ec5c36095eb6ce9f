//! Log chunks (FORMAT.md, "Remote layout"): a chunk is a segment file (§3) whose
//! header names its first seq and whose records are the local records' frames,
//! byte for byte, so checksums and tags travel unchanged. Pure functions.

use super::error::{RemoteError, Result};
use crate::engine::Codec;
use crate::engine::wire::to_hex;
use crate::engine::wire::{
    Frame, SegmentHeader, decode_record, decode_segment_header, encode_segment_header_tagged,
};

/// The hex digest a manifest's `tail` carries: BLAKE3 of one record's frame, first 16 bytes.
pub fn frame_digest(frame: &[u8]) -> String {
    to_hex(&blake3::hash(frame).as_bytes()[..16])
}

/// What [`take_records`] found in one local segment.
#[derive(Debug, Default)]
pub struct Taken {
    /// First and last seq appended to the output, if any.
    pub range: Option<(u64, u64)>,
    /// The digest of record `from - 1`, if this segment holds it.
    pub before: Option<String>,
    /// The digest of the last record taken.
    pub last_digest: Option<String>,
    /// Where the valid records of the segment end, and why, when that is before `to`.
    pub stopped: Option<(usize, String)>,
}

/// Appends to `out` the frames of the records with seq in `from..=to` found in
/// the segment `seg` (a whole local segment file), stopping after `to`, after
/// `max_bytes` of output, or at the end of the valid records.
pub fn take_records(
    seg: &[u8],
    from: u64,
    to: u64,
    max_bytes: u64,
    out: &mut Vec<u8>,
) -> std::result::Result<(SegmentHeader, Taken), String> {
    let header = decode_segment_header(seg)?;
    let mut t = Taken::default();
    let mut at = header.len;
    loop {
        match decode_record(header.codec, seg, at) {
            Frame::Record { seq, next, .. } => {
                let frame = &seg[at..next];
                if seq + 1 == from {
                    t.before = Some(frame_digest(frame));
                }
                if seq > to || (t.range.is_some() && out.len() as u64 >= max_bytes) {
                    return Ok((header, t));
                }
                if seq >= from {
                    if let Some((_, last)) = &mut t.range {
                        if seq != *last + 1 {
                            return Err(format!("seq {seq} follows seq {last} at byte {at}"));
                        }
                        *last = seq;
                    } else {
                        t.range = Some((seq, seq));
                    }
                    out.extend_from_slice(frame);
                    t.last_digest = Some(frame_digest(frame));
                }
                at = next;
            }
            Frame::End => {
                t.stopped = Some((at, "end of segment".into()));
                return Ok((header, t));
            }
            Frame::Bad(p) => {
                t.stopped = Some((at, p.to_string()));
                return Ok((header, t));
            }
        }
    }
}

/// A chunk's bytes: a segment header at `first` (tagged like the store), then the frames.
pub fn encode_chunk(header: &SegmentHeader, first: u64, frames: &[u8]) -> Vec<u8> {
    let mut v = encode_segment_header_tagged(header.codec, first, header.store_id.as_ref());
    v.extend_from_slice(frames);
    v
}

/// A checked chunk: its header and its frames (without the header).
pub struct ChunkView<'a> {
    /// The chunk's segment header.
    pub header: SegmentHeader,
    /// The frames of records `first..=last`, back to back.
    pub frames: &'a [u8],
    /// Offset in `frames` of each record, in seq order from `first`.
    pub starts: Vec<usize>,
}

/// Checks that `bytes` (object `name`) is a chunk of records `first..=last`
/// exactly, in `codec`: header, every frame and checksum, contiguous seqs, no
/// trailing bytes. Tags are checked when the restored store is verified.
pub fn decode_chunk<'a>(
    name: &str,
    bytes: &'a [u8],
    codec: Codec,
    first: u64,
    last: u64,
) -> Result<ChunkView<'a>> {
    let header =
        decode_segment_header(bytes).map_err(|r| RemoteError::corrupt(name, Some(0), r))?;
    if header.codec != codec || header.first_seq != first {
        return Err(RemoteError::corrupt(
            name,
            Some(0),
            format!(
                "header says codec {} first seq {}, the manifest {} and {first}",
                header.codec.name(),
                header.first_seq,
                codec.name()
            ),
        ));
    }
    let starts = check_frames(name, bytes, header.len, codec, first, last, "chunk")?;
    Ok(ChunkView {
        header,
        frames: &bytes[header.len..],
        starts,
    })
}

/// Checks that `bytes[from..]` are exactly the frames of records
/// `first..=last` in `codec`: every frame and checksum, contiguous seqs,
/// nothing after the last. Returns each record's offset relative to `from`.
/// Errors are `Corrupt` naming `name` and the offset in `bytes`; `what` says
/// what holds the frames (a chunk, a manifest's inline entry).
pub fn check_frames(
    name: &str,
    bytes: &[u8],
    from: usize,
    codec: Codec,
    first: u64,
    last: u64,
    what: &str,
) -> Result<Vec<usize>> {
    let mut at = from;
    let mut expect = first;
    let mut starts = Vec::new();
    loop {
        match decode_record(codec, bytes, at) {
            Frame::Record { seq, next, .. } => {
                if seq != expect || seq > last {
                    return Err(RemoteError::corrupt(
                        name,
                        Some(at as u64),
                        format!("record seq {seq}, expected {expect} ({what} {first}..={last})"),
                    ));
                }
                starts.push(at - from);
                expect += 1;
                at = next;
            }
            Frame::End if expect > last && !starts.is_empty() => return Ok(starts),
            Frame::End => {
                return Err(RemoteError::corrupt(
                    name,
                    Some(at as u64),
                    format!(
                        "{what} ends after seq {}, the manifest says {last}",
                        expect.saturating_sub(1)
                    ),
                ));
            }
            Frame::Bad(p) => {
                return Err(RemoteError::corrupt(
                    name,
                    Some(at as u64),
                    format!("{what} {first}..={last}: {p}"),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::wire::{encode_record, encode_segment_header};

    fn segment(first: u64, n: u64) -> Vec<u8> {
        let mut s = encode_segment_header(Codec::Binary, first);
        for seq in first..first + n {
            encode_record(Codec::Binary, seq, seq - 1, &seq.to_le_bytes(), &mut s);
        }
        s
    }

    #[test]
    fn a_chunk_of_taken_records_decodes_and_damage_is_found() {
        let seg = segment(1, 10);
        let mut out = vec![];
        let (h, t) = take_records(&seg, 4, 7, u64::MAX, &mut out).unwrap();
        assert_eq!(t.range, Some((4, 7)));
        assert!(t.before.is_some());
        let chunk = encode_chunk(&h, 4, &out);
        let v = decode_chunk("c", &chunk, Codec::Binary, 4, 7).unwrap();
        assert_eq!(v.starts.len(), 4);
        assert!(
            decode_chunk("c", &chunk, Codec::Binary, 4, 8).is_err(),
            "short"
        );
        assert!(
            decode_chunk("c", &chunk, Codec::Binary, 3, 7).is_err(),
            "wrong first"
        );
        for i in 0..chunk.len() {
            let mut bad = chunk.clone();
            bad[i] ^= 0x40;
            assert!(
                decode_chunk("c", &bad, Codec::Binary, 4, 7).is_err(),
                "flip at {i}"
            );
        }
    }

    #[test]
    fn taking_stops_at_a_torn_tail_and_reports_it() {
        let mut seg = segment(1, 5);
        seg.truncate(seg.len() - 3);
        let mut out = vec![];
        let (_, t) = take_records(&seg, 1, 5, u64::MAX, &mut out).unwrap();
        assert_eq!(t.range, Some((1, 4)));
        assert!(t.stopped.is_some());
    }
}
