//! Step 3 of a load, the verdict: the durability mark checked against the
//! log (FORMAT.md §5.7), the pure decision (`recovery.rs`, FORMAT.md §6)
//! run over the segments' scans, corruption named by its file, and a torn
//! tail reported with what it drops.

use super::find::Listing;
use super::recovery::{Corruption, FileRef, TornTail, Verdict, classify_marked};
use super::replay::{Replayed, Scope};
use super::report::{RecoveryReport, TornTailReport};
use crate::engine::error::{Error, Result};
use crate::engine::format::*;
use crate::engine::log::mark::Mark;
use std::path::Path;

/// What a load decided: the seq the mark proves durable (0: none), the
/// verdict, and the seq the next record gets.
pub(super) struct Decided {
    pub(super) proven: u64,
    pub(super) verdict: Verdict,
    pub(super) next_seq: u64,
}

/// Decides on what the replay of `scope` found: the mark above the base
/// checked against the log first, then the verdict, which fails the load
/// with [`Error::Corrupt`] on corruption and reports a torn tail (left on
/// disk: the writer decides what to do). `upto` caps the next seq of a load
/// up to a cut.
pub(super) fn decide(
    scope: &Scope<'_>,
    replayed: &Replayed,
    upto: Option<u64>,
    report: &mut RecoveryReport,
) -> Result<Decided> {
    let (dir, listing, base_seq, mark) = (scope.dir, scope.listing, scope.base_seq, scope.mark);
    let scans = &replayed.scans;
    let name_seqs: Vec<u64> = scope.segments.iter().map(|s| s.0).collect();
    let proven = match mark {
        None => 0,
        Some(m) if m.seq <= base_seq => m.seq,
        Some(m) => {
            check_mark(
                dir,
                listing,
                m,
                replayed.mark_segment_scanned,
                replayed.mark_record_end,
            )?;
            m.seq
        }
    };
    report.durable_mark = mark.map(|m| m.seq);
    let header_proven = mark.filter(|m| m.seq >= base_seq).map_or(0, |m| m.segment);
    let verdict = classify_marked(scans, &name_seqs, base_seq, proven, header_proven);
    if let Verdict::Corrupt(c) = &verdict {
        let mut c = c.clone();
        if let FileRef::Segment(i) = &mut c.file {
            *i += scope.first_scanned;
        }
        return Err(corruption(dir, listing, c));
    }
    let mut next_seq = scans
        .last()
        .map_or(base_seq + 1, |s| s.next_seq.max(base_seq + 1));
    if let Verdict::TornTail(t) = &verdict {
        if t.whole_file {
            next_seq = name_seqs[t.segment].max(base_seq + 1);
        }
        report.torn_tail = Some(torn_tail_report(scope, replayed, t));
    }
    if let Some(u) = upto {
        next_seq = next_seq.min(u + 1);
    }
    Ok(Decided {
        proven,
        verdict,
        next_seq,
    })
}

/// The report of the torn tail `t` among `scope`'s segments.
fn torn_tail_report(scope: &Scope<'_>, replayed: &Replayed, t: &TornTail) -> TornTailReport {
    let scan = &replayed.scans[t.segment];
    let (first, name) = scope.segments[t.segment];
    TornTailReport {
        path: scope.dir.join(name),
        offset: t.offset,
        bytes: t.bytes,
        whole_file: t.whole_file,
        reason: t.reason.clone(),
        quarantined_to: None,
        first_seq: if t.whole_file { *first } else { scan.next_seq },
        valid_frames_dropped: scan.frames_after_end,
    }
}

/// Checks a durability mark above the base against the log: the segment it
/// names is in the log, and the record it names ends where it says. A mark is
/// written only after its records were fsynced, and no step of runlog moves or
/// rewrites a record it proves, so a mismatch is damage, never a crash's doing.
fn check_mark(
    dir: &Path,
    listing: &Listing,
    m: Mark,
    segment_scanned: bool,
    record_end: Option<u64>,
) -> Result<()> {
    let path = dir.join(MARK_FILE);
    let corrupt = |reason: String| Error::Corrupt {
        path: path.clone(),
        offset: Some(0),
        seq: Some(m.seq),
        reason,
    };
    if !segment_scanned {
        let listed = listing.segments.iter().any(|s| s.0 == m.segment);
        return Err(corrupt(format!(
            "the durability mark proves records through seq {} durable in {}, {}",
            m.seq,
            segment_name(m.segment),
            if listed {
                "a segment the log does not reach"
            } else {
                "which is missing"
            }
        )));
    }
    if m.segment == m.seq + 1 {
        // An empty segment's mark: the segment exists; its record is in the one before.
        return Ok(());
    }
    match record_end {
        // The record was not reached: classify decides (damage before it, or a
        // log that ends before it, is corruption by the mark's rows).
        None => Ok(()),
        Some(end) if end == m.end => Ok(()),
        Some(end) => Err(corrupt(format!(
            "the durability mark says record {} ends at offset {} of {}, but the log's ends at {}",
            m.seq,
            m.end,
            segment_name(m.segment),
            if end == u64::MAX {
                "no offset (the segment ends before it)".to_string()
            } else {
                format!("offset {end}")
            }
        ))),
    }
}

pub(super) fn corruption(dir: &Path, l: &Listing, c: Corruption) -> Error {
    let name = match c.file {
        FileRef::Segment(i) => l.segments.get(i).map(|s| s.1.as_str()),
        FileRef::Snapshot(i) => l.snapshots.get(i).map(|s| s.1.as_str()),
    };
    Error::Corrupt {
        path: dir.join(name.unwrap_or("")),
        offset: c.offset,
        seq: c.seq,
        reason: c.reason,
    }
}
