//! Step 2 of a load, the replay: every record above the base, segment by
//! segment, each framed, checksummed and (in a tagged store) its tag checked
//! before its payload is applied ([`replay_one`] decodes and applies one
//! record of a [`Machine`]); on the way it notes where the durability
//! mark's record ends, and folds the digest a tail cache is checked by.

use super::find::Listing;
use super::report::RecoveryReport;
use super::tailcache::{TailCache, fold};
use super::{DecodeTail, LoadSpec, read};
use crate::engine::codec::decode_payload;
use crate::engine::error::{Error, ErrorChain, Result};
use crate::engine::format::*;
use crate::engine::io::vfs::Vfs;
use crate::engine::log::frame::{decode_segment_header, open_record};
use crate::engine::log::mark::Mark;
use crate::engine::log::scan::{ScanEnd, SegmentScan, UnsyncedTail, scan_segment_tracked};
use crate::engine::machine::Machine;
use crate::engine::options::Progress;
use crate::engine::tag::{Key, StoreId, id_mismatch};
use std::path::Path;

/// The log a load reads above its base: the segments that hold records above
/// it (and, for `verify`, every segment), and the durability mark within the
/// load's reach.
pub(super) struct Scope<'a> {
    pub(super) dir: &'a Path,
    pub(super) listing: &'a Listing,
    /// Index in `listing.segments` of `segments[0]`.
    pub(super) first_scanned: usize,
    /// The segments read: from `first_scanned`, up to the load's cut.
    pub(super) segments: Vec<&'a (u64, String)>,
    /// The base snapshot's seq (0: none).
    pub(super) base_seq: u64,
    pub(super) mark: Option<Mark>,
}

impl<'a> Scope<'a> {
    /// The segments of `listing` a load over the base at `base_seq` reads:
    /// those with a record above it (a segment whose successor starts at or
    /// below `base_seq + 1` holds none), or every one with `every_segment`;
    /// none that starts above `upto`.
    pub(super) fn above(
        dir: &'a Path,
        listing: &'a Listing,
        base_seq: u64,
        mark: Option<Mark>,
        upto: Option<u64>,
        every_segment: bool,
    ) -> Scope<'a> {
        let first_scanned = if every_segment {
            0
        } else {
            listing
                .segments
                .windows(2)
                .take_while(|w| w[1].0 <= base_seq + 1)
                .count()
        };
        let segments = listing.segments[first_scanned..]
            .iter()
            .filter(|(first, _)| upto.is_none_or(|u| *first <= u))
            .collect();
        Scope {
            dir,
            listing,
            first_scanned,
            segments,
            base_seq,
            mark,
        }
    }
}

/// The payload of the record with `body` at `offset` of the segment `bytes` read
/// from `path`: the body itself in an untagged store (`tagging` is `None`); in a tagged
/// one, the body with its tag checked and split off, [`Error::Tampered`] when the
/// tag does not match.
pub(crate) fn record_payload<'a>(
    tagging: Option<(&Key, &StoreId)>,
    codec: Codec,
    path: &Path,
    bytes: &[u8],
    offset: u64,
    seq: u64,
    body: &'a [u8],
) -> Result<&'a [u8]> {
    let Some((key, id)) = tagging else {
        return Ok(body);
    };
    open_record(key, id, codec, bytes, offset, seq, body).map_err(|what| Error::Tampered {
        path: path.to_path_buf(),
        offset: Some(offset),
        seq: Some(seq),
        what,
    })
}

const PROGRESS_EVERY: u64 = 65_536;

/// Decodes and applies one replayed record.
pub(crate) fn replay_one<M: Machine>(
    s: &mut M::State,
    codec: Codec,
    p: &[u8],
) -> std::result::Result<(), String> {
    let t: M::Transition = decode_payload(codec, p)?;
    M::apply(s, &t).map_err(|e| match M::failure(e) {
        Error::Refused(why) => {
            format!("apply refused it: {}", ErrorChain(&*why))
        }
        fault => format!("the state it applies to is damaged: {}", ErrorChain(&fault)),
    })
}

/// The store as [`find`] found it, as every segment read checks it: the
/// codec, and the store id (with the key) every header and record must carry.
pub(super) struct Reading<'a> {
    pub(super) vfs: &'a dyn Vfs,
    pub(super) dir: &'a Path,
    pub(super) codec: Codec,
    /// A header was readable: every segment's must name `store_id`.
    pub(super) detected: bool,
    pub(super) store_id: Option<&'a StoreId>,
    pub(super) tagging: Option<(&'a Key, &'a StoreId)>,
}

/// What replaying the segments above the base found.
pub(super) struct Replayed {
    pub(super) scans: Vec<SegmentScan>,
    pub(super) unsynced: Option<UnsyncedTail>,
    pub(super) records: u64,
    /// The digest kept (when asked), and the records the cache supplied.
    pub(super) digest: Option<u64>,
    pub(super) from_cache: u64,
    /// Where the mark's record ends, as the mark's segment shows it.
    pub(super) mark_record_end: Option<u64>,
    pub(super) mark_segment_scanned: bool,
}

/// Replays every record above the base in `scope`'s segments into `state`, segment
/// by segment (every record's checksum and tag checked, also below the
/// base: a fallback may need them), and notes where the mark's record ends.
///
/// With `tail` (FORMAT.md §15) it keeps the digest of the records above the
/// base; with a cache as well, it folds the records up to the cache's last
/// seq into the digest without applying them, and there installs the cache
/// when the digests agree, else stops at once and returns `None`: nothing
/// was applied, and the replay is to run again without the cache.
pub(super) fn replay_segments<S>(
    r: &Reading<'_>,
    scope: &Scope<'_>,
    spec: &mut LoadSpec<'_, S>,
    state: &mut S,
    report: &mut RecoveryReport,
    tail: Option<(Option<&TailCache>, DecodeTail<S>)>,
) -> Result<Option<Replayed>> {
    let (segments, base_seq, mark) = (&scope.segments, scope.base_seq, scope.mark);
    let mut scans = Vec::with_capacity(segments.len());
    let mut unsynced = None;
    let mut replayed = 0u64;
    let mut digest = 0u64;
    let mut waiting = tail.and_then(|t| t.0);
    let (mut from_cache, mut missed) = (0u64, false);
    // Where the mark's record ends, as the mark's segment shows it.
    let mut mark_record_end: Option<u64> = None;
    let mut mark_segment_scanned = false;
    for (i, (first, name)) in segments.iter().enumerate() {
        let path = r.dir.join(name);
        let in_mark_segment = mark.is_some_and(|m| m.segment == *first);
        let mut saw_mark_record = false;
        let bytes = read(r.vfs, &path, spec.mapped, "read segment")?;
        let bytes: &[u8] = (*bytes).as_ref();
        if r.detected
            && let Ok(h) = decode_segment_header(bytes)
            && h.store_id.as_ref() != r.store_id
        {
            return Err(Error::Tampered {
                path,
                offset: Some(0),
                seq: Some(h.first_seq),
                what: id_mismatch("segment", h.store_id.as_ref(), r.store_id),
            });
        }
        let scanned = scan_segment_tracked(bytes, |seq, body, offset| {
            // A tagged store's record passed its checksum; its tag decides whether
            // it is what the writer wrote. Checked for every record, even those
            // the snapshot covers (a fallback may need them).
            let payload = record_payload(r.tagging, r.codec, &path, bytes, offset, seq, body)?;
            if let Some(m) = mark.filter(|_| in_mark_segment) {
                if seq == m.seq {
                    saw_mark_record = true;
                } else if seq == m.seq + 1 {
                    mark_record_end = Some(offset);
                }
            }
            if seq <= base_seq {
                report.bytes_below_snapshot = report.bytes_scanned + offset;
                return Ok(());
            }
            if spec.upto.is_some_and(|u| seq > u) {
                return Ok(());
            }
            if let Some((_, decode_tail)) = tail {
                digest = fold(digest, seq, payload);
                if let Some(c) = waiting {
                    if seq < c.last_seq {
                        return Ok(());
                    }
                    if seq == c.last_seq
                        && digest == c.digest
                        && decode_tail(state, &c.payload).is_ok()
                    {
                        waiting = None;
                        from_cache = seq - base_seq;
                        return Ok(());
                    }
                    missed = true;
                    return Err(Error::Unsupported {
                        path: path.clone(),
                        reason: "the tail cache does not match the log".into(),
                    });
                }
            }
            (spec.apply)(state, r.codec, payload).map_err(|reason| Error::Corrupt {
                path: path.clone(),
                offset: Some(offset),
                seq: Some(seq),
                reason: format!("record cannot be replayed: {reason}"),
            })?;
            replayed += 1;
            if replayed.is_multiple_of(PROGRESS_EVERY)
                && let Some(p) = spec.progress
            {
                p(&Progress {
                    records: replayed,
                    bytes: report.bytes_scanned + offset,
                    segments: segments.len(),
                });
            }
            Ok(())
        });
        let (scan, tail) = match scanned {
            Err(_) if missed => return Ok(None),
            r => r?,
        };
        // Preallocated zeros are not log: they would count towards compaction.
        report.bytes_scanned += match scan.end {
            ScanEnd::Preallocated { offset } => offset,
            _ => bytes.len() as u64,
        };
        if in_mark_segment {
            mark_segment_scanned = true;
            if saw_mark_record && mark_record_end.is_none() {
                mark_record_end = Some(scan.valid_len);
            }
            let empty_segment_mark = mark.is_some_and(|m| m.segment == m.seq + 1);
            if !saw_mark_record && !empty_segment_mark && i + 1 < segments.len() {
                // The segment ended before the mark's record, and the log goes on
                // in the next: the mark names another history than this log's.
                mark_record_end = Some(u64::MAX);
            }
        }
        scans.push(scan);
        unsynced = Some(tail);
    }
    if waiting.is_some() {
        // The log ends before the cache's last record.
        return Ok(None);
    }
    Ok(Some(Replayed {
        scans,
        unsynced,
        records: replayed,
        digest: tail.map(|_| digest),
        from_cache,
        mark_record_end,
        mark_segment_scanned,
    }))
}
