//! The recovery decision: a pure function from what was found on disk (snapshot
//! validity, segment scans) to one verdict. FORMAT.md's recovery table is this file.

use super::scan::{ScanEnd, SegmentScan};

/// Which snapshot recovery starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseChoice {
    /// Index into the snapshot list, or `None` to start from the empty state at seq 0.
    pub snapshot: Option<usize>,
    /// The seq the base covers (0 for the empty state).
    pub seq: u64,
    /// Newer snapshots that were damaged and skipped: (index, reason). Reported loudly.
    pub skipped: Vec<(usize, String)>,
}

/// Where and why the store is corrupt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corruption {
    /// Which file: a segment index, or a snapshot index.
    pub file: FileRef,
    /// Byte offset within the file.
    pub offset: u64,
    /// The seq involved, where known.
    pub seq: Option<u64>,
    /// What is wrong.
    pub reason: String,
}

/// A file in the lists handed to the decision functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileRef {
    /// Index into the segment list.
    Segment(usize),
    /// Index into the snapshot list.
    Snapshot(usize),
}

/// A torn tail to drop from the last segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Index of the (last) segment.
    pub segment: usize,
    /// Offset of the first dropped byte (0 with `whole_file`).
    pub offset: u64,
    /// Bytes dropped.
    pub bytes: u64,
    /// The segment's header itself is torn: the whole file goes.
    pub whole_file: bool,
    /// What is wrong.
    pub reason: String,
}

/// The outcome of recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every byte accounted for.
    Clean,
    /// Only the end of the last segment is damaged, with nothing valid after it.
    TornTail(TornTail),
    /// Anything else: opening fails and nothing is modified.
    Corrupt(Corruption),
}

/// Picks the newest valid snapshot that the log can continue from.
///
/// `seqs` are the snapshots' seqs, ascending; `log_first` is the first seq of the
/// oldest segment, if any; `check(i)` verifies snapshot `i` (newest first, and
/// only as far as needed). A damaged newest snapshot falls back to an older one,
/// or to the empty state when the log starts at seq 1; each skip is reported.
pub fn choose_base(
    seqs: &[u64],
    log_first: Option<u64>,
    mut check: impl FnMut(usize) -> Result<(), String>,
) -> Result<BaseChoice, Corruption> {
    let mut skipped = Vec::new();
    let reaches = |seq: u64| log_first.is_none_or(|first| first <= seq + 1);
    for (i, &seq) in seqs.iter().enumerate().rev() {
        if !reaches(seq) {
            // The log starts past this snapshot; older ones are further behind still.
            break;
        }
        match check(i) {
            Ok(()) => {
                return Ok(BaseChoice {
                    snapshot: Some(i),
                    seq,
                    skipped,
                });
            }
            Err(why) => skipped.push((i, why)),
        }
    }
    if log_first == Some(1) || (log_first.is_none() && seqs.is_empty()) {
        return Ok(BaseChoice {
            snapshot: None,
            seq: 0,
            skipped,
        });
    }
    let (file, reason) = match skipped.first() {
        Some((i, why)) => (
            FileRef::Snapshot(*i),
            format!(
                "snapshot damaged ({why}) and no older snapshot or log reaches back far enough"
            ),
        ),
        None if seqs.is_empty() => (
            FileRef::Segment(0),
            format!(
                "the log starts at seq {} but there is no snapshot covering the records before it",
                log_first.unwrap_or(0)
            ),
        ),
        None => (
            FileRef::Snapshot(seqs.len() - 1),
            format!(
                "the log starts at seq {} after a gap past every snapshot",
                log_first.unwrap_or(0)
            ),
        ),
    };
    Err(Corruption {
        file,
        offset: 0,
        seq: None,
        reason,
    })
}

/// Classifies segment scans (in file-name order) given the base seq and the
/// first seq each file name declares.
pub fn classify(scans: &[SegmentScan], name_seqs: &[u64], base_seq: u64) -> Verdict {
    debug_assert_eq!(scans.len(), name_seqs.len());
    let corrupt = |i: usize, offset: u64, seq: Option<u64>, reason: String| {
        Verdict::Corrupt(Corruption {
            file: FileRef::Segment(i),
            offset,
            seq,
            reason,
        })
    };
    if scans.is_empty() {
        return if base_seq == 0 {
            Verdict::Clean
        } else {
            corrupt(0, 0, None, "snapshot present but no log segment".into())
        };
    }
    let last = scans.len() - 1;
    let mut expect_first: Option<u64> = None;
    for (i, s) in scans.iter().enumerate() {
        let Some(first) = s.first_seq else {
            let ScanEnd::Damaged {
                problem, resync, ..
            } = &s.end
            else {
                unreachable!("a scan without a header always ends Damaged")
            };
            // A torn header is a torn tail only in the segment the next seq would
            // create: the one whose name continues the log. Any other name is a
            // file the writer never made here, and dropping it would let the
            // next append claim a seq the next open cannot continue from.
            let continues = match expect_first {
                Some(e) => name_seqs[i] == e || (name_seqs[i] > e && name_seqs[i] <= base_seq + 1),
                None => name_seqs[i] == base_seq + 1,
            };
            if i == last && resync.is_none() && !continues {
                let expected = expect_first.unwrap_or(base_seq + 1);
                return corrupt(
                    i,
                    0,
                    Some(name_seqs[i]),
                    format!(
                        "segment header unreadable ({problem}) in a segment whose name (first seq {}) does not continue the log (expected {expected}): not a torn creation",
                        name_seqs[i]
                    ),
                );
            }
            if i == last && resync.is_none() {
                return Verdict::TornTail(TornTail {
                    segment: i,
                    offset: 0,
                    bytes: s.file_len,
                    whole_file: true,
                    reason: format!("segment header torn: {problem}"),
                });
            }
            return corrupt(
                i,
                0,
                resync.map(|r| r.1),
                format!("segment header unreadable: {problem}"),
            );
        };
        if first != name_seqs[i] {
            return corrupt(
                i,
                0,
                Some(first),
                format!(
                    "header says first seq {first}, file name says {}",
                    name_seqs[i]
                ),
            );
        }
        // A gap wholly covered by the base snapshot is harmless: compaction unlinks
        // those segments, and a crash may persist any subset of the unlinks.
        let covered_gap = expect_first.is_some_and(|e| first > e && first <= base_seq + 1);
        if let Some(e) = expect_first
            && first != e
            && !covered_gap
        {
            let what = if first > e { "gap" } else { "overlap" };
            return corrupt(
                i,
                0,
                Some(first),
                format!("seq {what}: segment starts at {first}, expected {e}"),
            );
        }
        if i == 0 && first > base_seq + 1 {
            return corrupt(
                i,
                0,
                Some(first),
                format!(
                    "seq gap: log starts at {first} but the snapshot covers only up to {base_seq}"
                ),
            );
        }
        match &s.end {
            ScanEnd::Clean => {}
            // Rotation cuts a segment to its records and fsyncs it before the next
            // one exists, so only the last segment can still hold preallocated zeros.
            ScanEnd::Preallocated { offset } if i != last => {
                return corrupt(
                    i,
                    *offset,
                    Some(s.next_seq),
                    "zero-filled tail in a segment that is not the last".into(),
                );
            }
            ScanEnd::Preallocated { .. } => {}
            ScanEnd::SeqBreak {
                offset,
                expected,
                found,
            } => {
                return corrupt(
                    i,
                    *offset,
                    Some(*found),
                    format!("seq {found} where {expected} was expected"),
                );
            }
            ScanEnd::Damaged {
                offset,
                problem,
                resync: Some((at, seq)),
            } => {
                return corrupt(
                    i,
                    *offset,
                    Some(s.next_seq),
                    format!("{problem}, followed by a valid record (seq {seq} at offset {at})"),
                );
            }
            ScanEnd::Damaged {
                offset,
                problem,
                resync: None,
            } => {
                if i != last {
                    return corrupt(
                        i,
                        *offset,
                        Some(s.next_seq),
                        format!("{problem} in a segment that is not the last"),
                    );
                }
                if s.next_seq <= base_seq {
                    return corrupt(
                        i,
                        *offset,
                        Some(s.next_seq),
                        format!(
                            "{problem}, and the records lost were covered by the snapshot at {base_seq}"
                        ),
                    );
                }
                return Verdict::TornTail(TornTail {
                    segment: i,
                    offset: *offset,
                    bytes: s.file_len - offset,
                    whole_file: false,
                    reason: problem.clone(),
                });
            }
        }
        expect_first = Some(s.next_seq);
    }
    let next = scans[last].next_seq;
    if next <= base_seq {
        return corrupt(
            last,
            scans[last].valid_len,
            Some(next),
            format!(
                "the log ends at seq {} but the snapshot covers up to {base_seq}",
                next - 1
            ),
        );
    }
    Verdict::Clean
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(first: Option<u64>, count: u64, end: ScanEnd) -> SegmentScan {
        SegmentScan {
            first_seq: first,
            codec: None,
            count,
            next_seq: first.unwrap_or(0) + count,
            valid_len: 100,
            file_len: 150,
            end,
        }
    }
    fn damaged(resync: Option<(u64, u64)>) -> ScanEnd {
        ScanEnd::Damaged {
            offset: 100,
            problem: "bad".into(),
            resync,
        }
    }
    /// Runs `choose_base` where the snapshots listed in `damaged` fail their check.
    fn base(
        seqs: &[u64],
        damaged: &[u64],
        log_first: Option<u64>,
    ) -> Result<BaseChoice, Corruption> {
        choose_base(seqs, log_first, |i| {
            if damaged.contains(&seqs[i]) {
                Err("checksum".into())
            } else {
                Ok(())
            }
        })
    }

    // ---- the recovery table, row by row ----

    #[test]
    fn row_clean_single_segment() {
        assert_eq!(
            classify(&[scan(Some(1), 5, ScanEnd::Clean)], &[1], 0),
            Verdict::Clean
        );
    }

    #[test]
    fn row_preallocated_zeros_end_the_last_segment_cleanly() {
        let zeros = ScanEnd::Preallocated { offset: 100 };
        assert_eq!(
            classify(
                &[
                    scan(Some(1), 5, ScanEnd::Clean),
                    scan(Some(6), 2, zeros.clone())
                ],
                &[1, 6],
                0
            ),
            Verdict::Clean
        );
        // A segment holding only its header and zeros: a fresh, preallocated segment.
        assert_eq!(
            classify(&[scan(Some(1), 0, zeros)], &[1], 0),
            Verdict::Clean
        );
    }

    #[test]
    fn row_preallocated_zeros_in_a_segment_that_is_not_the_last_are_corruption() {
        let v = classify(
            &[
                scan(Some(1), 5, ScanEnd::Preallocated { offset: 100 }),
                scan(Some(6), 2, ScanEnd::Clean),
            ],
            &[1, 6],
            0,
        );
        assert!(
            matches!(&v, Verdict::Corrupt(c) if c.file == FileRef::Segment(0) && c.offset == 100),
            "{v:?}"
        );
    }

    #[test]
    fn row_torn_tail_in_last_segment() {
        let v = classify(
            &[
                scan(Some(1), 5, ScanEnd::Clean),
                scan(Some(6), 2, damaged(None)),
            ],
            &[1, 6],
            0,
        );
        assert!(matches!(
            v,
            Verdict::TornTail(TornTail {
                segment: 1,
                offset: 100,
                bytes: 50,
                ..
            })
        ));
    }

    #[test]
    fn row_damage_with_valid_successor_is_corruption() {
        let v = classify(&[scan(Some(1), 2, damaged(Some((120, 4))))], &[1], 0);
        assert!(matches!(
            v,
            Verdict::Corrupt(Corruption {
                offset: 100,
                seq: Some(3),
                ..
            })
        ));
    }

    #[test]
    fn row_damage_in_earlier_segment_is_corruption() {
        let v = classify(
            &[
                scan(Some(1), 2, damaged(None)),
                scan(Some(3), 2, ScanEnd::Clean),
            ],
            &[1, 3],
            0,
        );
        assert!(matches!(
            v,
            Verdict::Corrupt(Corruption {
                file: FileRef::Segment(0),
                ..
            })
        ));
    }

    #[test]
    fn row_seq_break_inside_segment_is_corruption() {
        let v = classify(
            &[scan(
                Some(1),
                2,
                ScanEnd::SeqBreak {
                    offset: 80,
                    expected: 3,
                    found: 5,
                },
            )],
            &[1],
            0,
        );
        assert!(matches!(
            v,
            Verdict::Corrupt(Corruption {
                offset: 80,
                seq: Some(5),
                ..
            })
        ));
    }

    #[test]
    fn row_gap_between_segments_is_corruption() {
        let v = classify(
            &[
                scan(Some(1), 2, ScanEnd::Clean),
                scan(Some(5), 2, ScanEnd::Clean),
            ],
            &[1, 5],
            0,
        );
        assert!(matches!(
            v,
            Verdict::Corrupt(Corruption {
                file: FileRef::Segment(1),
                ..
            })
        ));
    }

    #[test]
    fn row_gap_below_snapshot_is_harmless() {
        let segs = [
            scan(Some(1), 2, ScanEnd::Clean),
            scan(Some(5), 2, ScanEnd::Clean),
            scan(Some(7), 2, ScanEnd::Clean),
        ];
        // The missing 3..=4 are covered by a snapshot at 6: a lost unlink of seg-1.
        assert_eq!(classify(&segs, &[1, 5, 7], 6), Verdict::Clean);
        // Covered only up to 3: seq 4 is needed and missing.
        assert!(matches!(
            classify(&segs, &[1, 5, 7], 3),
            Verdict::Corrupt(_)
        ));
    }

    #[test]
    fn row_overlap_between_segments_is_corruption() {
        let v = classify(
            &[
                scan(Some(1), 4, ScanEnd::Clean),
                scan(Some(3), 2, ScanEnd::Clean),
            ],
            &[1, 3],
            0,
        );
        assert!(matches!(v, Verdict::Corrupt(_)));
    }

    #[test]
    fn row_torn_header_of_last_segment_drops_the_file() {
        let v = classify(
            &[
                scan(Some(1), 4, ScanEnd::Clean),
                scan(None, 0, damaged(None)),
            ],
            &[1, 5],
            0,
        );
        assert!(matches!(
            v,
            Verdict::TornTail(TornTail {
                whole_file: true,
                segment: 1,
                ..
            })
        ));
    }

    #[test]
    fn row_torn_header_of_a_segment_that_does_not_continue_the_log_is_corruption() {
        // Issue 11 item 0: `echo junk > seg-…99` after a segment ending at seq 1.
        let v = classify(
            &[
                scan(Some(1), 1, ScanEnd::Clean),
                scan(None, 0, damaged(None)),
            ],
            &[1, 99],
            0,
        );
        let Verdict::Corrupt(c) = v else {
            panic!("{v:?}")
        };
        assert_eq!((c.file, c.seq), (FileRef::Segment(1), Some(99)));
        assert!(c.reason.contains("expected 2"), "{}", c.reason);
        // The only segment, past the base: not the one a creation would make.
        let v = classify(&[scan(None, 0, damaged(None))], &[7], 0);
        assert!(matches!(v, Verdict::Corrupt(_)), "{v:?}");
        // The only segment right after the base snapshot is a torn creation.
        let v = classify(&[scan(None, 0, damaged(None))], &[11], 10);
        assert!(matches!(v, Verdict::TornTail(_)), "{v:?}");
    }

    #[test]
    fn row_unreadable_header_with_records_after_is_corruption() {
        let v = classify(&[scan(None, 0, damaged(Some((40, 1))))], &[1], 0);
        assert!(matches!(v, Verdict::Corrupt(_)));
    }

    #[test]
    fn row_header_disagrees_with_name() {
        assert!(matches!(
            classify(&[scan(Some(2), 1, ScanEnd::Clean)], &[1], 1),
            Verdict::Corrupt(_)
        ));
    }

    #[test]
    fn row_log_starts_after_snapshot_is_a_gap() {
        assert!(matches!(
            classify(&[scan(Some(12), 1, ScanEnd::Clean)], &[12], 10),
            Verdict::Corrupt(_)
        ));
    }

    #[test]
    fn row_log_ends_before_snapshot() {
        assert!(matches!(
            classify(&[scan(Some(1), 3, ScanEnd::Clean)], &[1], 10),
            Verdict::Corrupt(_)
        ));
    }

    #[test]
    fn row_torn_tail_below_snapshot_is_corruption() {
        assert!(matches!(
            classify(&[scan(Some(1), 3, damaged(None))], &[1], 10),
            Verdict::Corrupt(_)
        ));
    }

    #[test]
    fn row_no_segments_no_snapshot_is_clean_empty() {
        assert_eq!(classify(&[], &[], 0), Verdict::Clean);
    }

    #[test]
    fn row_snapshot_without_log_is_corruption() {
        assert!(matches!(classify(&[], &[], 5), Verdict::Corrupt(_)));
    }

    // ---- choosing the base snapshot ----

    #[test]
    fn base_newest_valid_snapshot() {
        let b = base(&[5, 9], &[], Some(6)).unwrap();
        assert_eq!((b.snapshot, b.seq, b.skipped.len()), (Some(1), 9, 0));
    }

    #[test]
    fn base_falls_back_loudly_to_previous_snapshot() {
        let b = base(&[5, 9], &[9], Some(6)).unwrap();
        assert_eq!((b.snapshot, b.seq), (Some(0), 5));
        assert_eq!(b.skipped.len(), 1);
    }

    #[test]
    fn base_falls_back_to_empty_only_when_log_starts_at_one() {
        let b = base(&[9], &[9], Some(1)).unwrap();
        assert_eq!((b.snapshot, b.seq, b.skipped.len()), (None, 0, 1));
        assert!(base(&[9], &[9], Some(10)).is_err());
    }

    #[test]
    fn base_refuses_a_log_that_starts_past_every_snapshot() {
        assert!(base(&[5], &[], Some(8)).is_err());
        assert!(base(&[], &[], Some(8)).is_err());
    }

    #[test]
    fn base_snapshot_without_any_log() {
        assert_eq!(base(&[4], &[], None).unwrap().seq, 4);
        assert_eq!(base(&[], &[], None).unwrap().seq, 0);
        assert!(base(&[4], &[4], None).is_err());
    }
}
