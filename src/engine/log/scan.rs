//! Scanning one segment's bytes: every valid record in order, and what ends the
//! valid prefix. Pure: the caller supplies bytes and receives records.

use crate::engine::format::Codec;
use super::frame::{Frame, decode_record, decode_segment_header, next_candidate};
use std::collections::VecDeque;

/// What ends the valid prefix of a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanEnd {
    /// The valid records run exactly to the end of the bytes.
    Clean,
    /// The valid records end at `offset` and every byte from there to the end of
    /// the file is zero: the unused part of a preallocated segment.
    Preallocated {
        /// Byte offset within the file where the zeros start.
        offset: u64,
    },
    /// Bytes at `offset` are not a valid frame (or header, at offset 0).
    /// `resync` is the first valid frame found by scanning ahead, with a seq
    /// above the last good one: its presence means the damage is not a tail.
    Damaged {
        /// Byte offset within the file.
        offset: u64,
        /// What is wrong there.
        problem: String,
        /// (offset, seq) of the first valid frame found after the damage.
        resync: Option<(u64, u64)>,
    },
    /// A valid frame whose seq is not the expected next one.
    SeqBreak {
        /// Byte offset within the file.
        offset: u64,
        /// The seq that should have come next.
        expected: u64,
        /// The seq found.
        found: u64,
    },
}

/// Summary of one segment scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentScan {
    /// The first seq the header declares; `None` when the header is unreadable.
    pub first_seq: Option<u64>,
    /// The codec the header declares.
    pub codec: Option<Codec>,
    /// Valid records found.
    pub count: u64,
    /// The seq the next record would carry (first_seq + count).
    pub next_seq: u64,
    /// Length of the valid prefix, header included.
    pub valid_len: u64,
    /// Total bytes scanned.
    pub file_len: u64,
    /// What ended the valid prefix.
    pub end: ScanEnd,
    /// Frames after a damaged end that pass their checksums (any seq): what a
    /// torn tail drops besides the damaged record (0 unless `end` is `Damaged`).
    pub frames_after_end: u64,
}

/// Where the part of a segment's valid prefix that is not known durable begins
/// (FORMAT.md §3.1 `synced`, §5.5 step 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnsyncedTail {
    /// The `synced` watermark of the last valid record (`None`: no valid record).
    /// Every record with seq ≤ it had been fsynced by the writer that wrote it.
    pub watermark: Option<u64>,
    /// Offset of the first valid record whose seq is above `watermark` (the valid
    /// prefix's end when there is none; 0, the header, when the segment holds no
    /// record): from here to the valid end, the bytes may be in a page cache only.
    pub from: u64,
}

/// At most this many records above the running watermark are remembered while
/// scanning; past it the whole valid prefix counts as unsynced (a bound on
/// memory for a log written with `SyncPolicy::Never`, never a loss of safety).
pub const MAX_TRACKED_UNSYNCED: usize = 1 << 20;

/// Scans `buf` (a whole segment file). `on_record(seq, payload, offset)` is called
/// for every valid record in order; an error from it stops the scan and is returned.
pub fn scan_segment<E>(
    buf: &[u8],
    on_record: impl FnMut(u64, &[u8], u64) -> Result<(), E>,
) -> Result<SegmentScan, E> {
    scan_segment_tracked(buf, on_record).map(|(s, _)| s)
}

/// [`scan_segment`], also finding where its records stop being known durable.
pub fn scan_segment_tracked<E>(
    buf: &[u8],
    mut on_record: impl FnMut(u64, &[u8], u64) -> Result<(), E>,
) -> Result<(SegmentScan, UnsyncedTail), E> {
    let file_len = buf.len() as u64;
    let header = match decode_segment_header(buf) {
        Ok(h) => h,
        Err(problem) => {
            // The damaged header may be the very byte that tells the codecs apart,
            // so look for records of either codec.
            let codec = guess_codec(buf);
            let other = match codec {
                Codec::Binary => Codec::Jsonl,
                Codec::Jsonl => Codec::Binary,
            };
            // The header is fsynced before any record is written, so any valid
            // record after a damaged header proves corruption.
            let resync = resync(codec, buf, 0, 0, 0).or_else(|| resync(other, buf, 0, 0, 0));
            let scan = SegmentScan {
                first_seq: None,
                codec: None,
                count: 0,
                next_seq: 0,
                valid_len: 0,
                file_len,
                end: ScanEnd::Damaged {
                    offset: 0,
                    problem,
                    resync,
                },
                frames_after_end: count_frames(codec, buf, 0) + count_frames(other, buf, 0),
            };
            let tail = UnsyncedTail {
                watermark: None,
                from: 0,
            };
            return Ok((scan, tail));
        }
    };
    let codec = header.codec;
    let mut at = header.len;
    let mut expected = header.first_seq;
    let mut count = 0u64;
    // (seq, offset) of the records above the highest watermark seen so far.
    let mut above: VecDeque<(u64, u64)> = VecDeque::new();
    let mut watermark: Option<u64> = None;
    // Watermarks only grow along a log; if one ever goes back, or too many
    // records wait above it, every record counts as unsynced (the safe side).
    let mut give_up = false;
    let end = loop {
        match decode_record(codec, buf, at) {
            Frame::End => break ScanEnd::Clean,
            Frame::Record {
                seq,
                synced,
                payload,
                next,
            } => {
                if seq != expected {
                    break ScanEnd::SeqBreak {
                        offset: at as u64,
                        expected,
                        found: seq,
                    };
                }
                on_record(seq, payload, at as u64)?;
                if watermark.is_some_and(|w| synced < w) || above.len() >= MAX_TRACKED_UNSYNCED {
                    give_up = true;
                    above.clear();
                }
                watermark = Some(synced);
                if !give_up {
                    above.push_back((seq, at as u64));
                    while above.front().is_some_and(|&(s, _)| s <= synced) {
                        above.pop_front();
                    }
                }
                count += 1;
                expected += 1;
                at = next;
            }
            Frame::Bad(_) if buf[at..].iter().all(|&b| b == 0) => {
                break ScanEnd::Preallocated { offset: at as u64 };
            }
            Frame::Bad(problem) => {
                let problem = problem.to_string();
                // Only a record written after the damaged one was durable proves
                // the damage is not a crash's doing (see `resync`).
                let resync = resync(codec, buf, at, expected.saturating_sub(1), expected);
                break ScanEnd::Damaged {
                    offset: at as u64,
                    problem,
                    resync,
                };
            }
        }
    };
    let from = if count == 0 {
        // No record proves the header durable (its writer fsyncs it before
        // writing any record): a header alone counts as unsynced.
        0
    } else if give_up {
        header.len as u64
    } else {
        above.front().map_or(at as u64, |&(_, o)| o)
    };
    let scan = SegmentScan {
        first_seq: Some(header.first_seq),
        codec: Some(codec),
        count,
        next_seq: header.first_seq + count,
        valid_len: at as u64,
        file_len,
        frames_after_end: match end {
            ScanEnd::Damaged { .. } => count_frames(codec, buf, at),
            _ => 0,
        },
        end,
    };
    Ok((scan, UnsyncedTail { watermark, from }))
}

fn guess_codec(buf: &[u8]) -> Codec {
    if buf.first() == Some(&b'{') {
        Codec::Jsonl
    } else {
        Codec::Binary
    }
}

/// Looks past a bad frame at `at` for a valid frame with a seq above `last_good`
/// whose `synced` watermark reaches `damaged`: a record written after the damaged
/// one had been fsynced. Its existence proves the damage hit durable data, so it is
/// corruption. Valid frames with a lower watermark were written while the damaged
/// record was still unsynced; a crash may persist them without it (unsynced writes
/// reach the disk in any order), so they do not make the damage corruption.
/// Returns the proving frame's offset and seq.
/// Frames of `codec` that pass their checksums at any offset after `at`.
fn count_frames(codec: Codec, buf: &[u8], at: usize) -> u64 {
    let mut pos = at;
    let mut n = 0;
    while let Some(p) = next_candidate(codec, buf, pos) {
        if let Frame::Record { .. } = decode_record(codec, buf, p) {
            n += 1;
        }
        pos = p;
    }
    n
}

fn resync(codec: Codec, buf: &[u8], at: usize, last_good: u64, damaged: u64) -> Option<(u64, u64)> {
    let mut pos = at;
    while let Some(p) = next_candidate(codec, buf, pos) {
        if let Frame::Record { seq, synced, .. } = decode_record(codec, buf, p)
            && seq > last_good
            && synced >= damaged
        {
            return Some((p as u64, seq));
        }
        pos = p;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::log::frame::{encode_record, encode_segment_header};

    fn segment(codec: Codec, first: u64, n: u64) -> (Vec<u8>, Vec<usize>) {
        let mut b = encode_segment_header(codec, first);
        let mut offs = vec![];
        for s in first..first + n {
            offs.push(b.len());
            encode_record(codec, s, s - 1, format!("{{\"n\":{s}}}").as_bytes(), &mut b);
        }
        (b, offs)
    }

    fn scan(b: &[u8]) -> SegmentScan {
        scan_segment::<()>(b, |_, _, _| Ok(())).unwrap()
    }

    #[test]
    fn clean_segment_reports_every_record() {
        for codec in [Codec::Binary, Codec::Jsonl] {
            let (b, _) = segment(codec, 5, 10);
            let s = scan(&b);
            assert_eq!(
                (s.count, s.next_seq, s.end.clone()),
                (10, 15, ScanEnd::Clean)
            );
        }
    }

    #[test]
    fn damage_before_a_valid_record_is_found_by_resync() {
        for codec in [Codec::Binary, Codec::Jsonl] {
            let (mut b, offs) = segment(codec, 1, 4);
            b[offs[1] + 14] ^= 0x40;
            match scan(&b).end {
                ScanEnd::Damaged {
                    offset,
                    resync: Some((r, 3)),
                    ..
                } => {
                    assert_eq!(offset, offs[1] as u64);
                    assert_eq!(r, offs[2] as u64);
                }
                other => panic!("{codec:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn zeros_after_the_last_record_are_a_preallocated_tail() {
        for codec in [Codec::Binary, Codec::Jsonl] {
            let (mut b, _) = segment(codec, 1, 3);
            let end = b.len() as u64;
            b.resize(b.len() + 4096, 0);
            let s = scan(&b);
            assert_eq!(s.end, ScanEnd::Preallocated { offset: end }, "{codec:?}");
            assert_eq!((s.count, s.valid_len, s.file_len), (3, end, end + 4096));
        }
    }

    #[test]
    fn a_torn_record_followed_by_zeros_is_still_damage() {
        for codec in [Codec::Binary, Codec::Jsonl] {
            let (mut b, offs) = segment(codec, 1, 3);
            // The last record's first half survived; the rest reads as zeros.
            let half = offs[2] + (b.len() - offs[2]) / 2;
            b.truncate(half);
            b.resize(half + 4096, 0);
            match scan(&b).end {
                ScanEnd::Damaged {
                    offset,
                    resync: None,
                    ..
                } => assert_eq!(offset, offs[2] as u64, "{codec:?}"),
                other => panic!("{codec:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_nonzero_byte_in_the_preallocated_tail_is_damage() {
        for codec in [Codec::Binary, Codec::Jsonl] {
            let (mut b, _) = segment(codec, 1, 3);
            let end = b.len();
            b.resize(end + 4096, 0);
            b[end + 1000] = 1;
            assert!(
                matches!(scan(&b).end, ScanEnd::Damaged { offset, resync: None, .. } if offset == end as u64),
                "{codec:?}"
            );
        }
    }

    fn segment_synced(codec: Codec, synced: &[u64]) -> (Vec<u8>, Vec<usize>) {
        let mut b = encode_segment_header(codec, 1);
        let mut offs = vec![];
        for (i, w) in synced.iter().enumerate() {
            offs.push(b.len());
            encode_record(codec, i as u64 + 1, *w, b"{}", &mut b);
        }
        (b, offs)
    }

    fn tail(b: &[u8]) -> UnsyncedTail {
        scan_segment_tracked::<()>(b, |_, _, _| Ok(())).unwrap().1
    }

    #[test]
    fn the_unsynced_tail_starts_after_the_last_watermark() {
        for codec in [Codec::Binary, Codec::Jsonl] {
            // Records 1..=5; the last was written when 3 was durable.
            let (b, offs) = segment_synced(codec, &[0, 0, 2, 2, 3]);
            let t = tail(&b);
            assert_eq!(
                (t.watermark, t.from),
                (Some(3), offs[3] as u64),
                "{codec:?}"
            );
            // Every record written under watermark s-1 (one fsync each): only the last.
            let (b, offs) = segment_synced(codec, &[0, 1, 2, 3]);
            assert_eq!(tail(&b).from, offs[3] as u64, "{codec:?}");
        }
    }

    #[test]
    fn a_watermark_going_back_makes_every_record_unsynced() {
        let (b, _) = segment_synced(Codec::Binary, &[0, 1, 2, 1]);
        let header = encode_segment_header(Codec::Binary, 1).len() as u64;
        assert_eq!(tail(&b).from, header);
    }

    #[test]
    fn a_segment_without_records_has_its_header_unsynced() {
        let b = encode_segment_header(Codec::Binary, 7);
        assert_eq!(
            tail(&b),
            UnsyncedTail {
                watermark: None,
                from: 0
            }
        );
    }

    #[test]
    fn damage_in_last_record_has_no_resync() {
        for codec in [Codec::Binary, Codec::Jsonl] {
            let (mut b, offs) = segment(codec, 1, 4);
            b[offs[3] + 14] ^= 0x01;
            assert!(matches!(
                scan(&b).end,
                ScanEnd::Damaged { resync: None, .. }
            ));
        }
    }
}
