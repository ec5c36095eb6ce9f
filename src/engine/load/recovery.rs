//! The recovery decision: a pure function from what was found on disk (snapshot
//! validity, segment scans) to one verdict. FORMAT.md's recovery table is this file: `ROWS`
//! holds the segment table's rows, and `classify` executes them.

use crate::engine::log::scan::{ScanEnd, SegmentScan};

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
    /// Byte offset within the file, where known (`None`: the file as a whole).
    pub offset: Option<u64>,
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
        offset: None,
        seq: None,
        reason,
    })
}

/// What the segment table's verdict column says to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing wrong: the scan goes on (or the log is clean).
    Clean,
    /// Harmless, and passed over: the scan goes on.
    Ignore,
    /// Drop the end of the last segment from the damage on.
    TornTail,
    /// Drop the whole last segment: its header is torn.
    TornFile,
    /// The open fails and nothing is modified.
    Corrupt,
}

/// One kind of finding in the segment scans: a row of FORMAT.md §6's segment
/// table. `ROWS[case as usize]` is its row (checked when this compiles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// Every segment valid to its end, contiguous, reaching the base.
    Clean,
    /// Zeros after the last segment's records, to its end.
    PreallocatedLast,
    /// Zeros after the records of a segment that is not the last.
    PreallocatedNotLast,
    /// A bad frame in the last segment, no valid successor.
    TornTail,
    /// The last segment's header torn, nothing valid after it.
    TornHeader,
    /// As `TornHeader`, in a segment whose name does not continue the log.
    TornHeaderNotContinuing,
    /// A bad frame followed by a valid one that proves it was durable.
    DamageWithSuccessor,
    /// An unreadable header not at the end of the log.
    HeaderUnreadable,
    /// A bad frame in a segment that is not the last.
    DamageNotLast,
    /// A valid frame with the wrong seq.
    SeqBreak,
    /// Segments that do not continue each other, above the base.
    SegmentGap,
    /// A gap between segments wholly at or below the base.
    CoveredGap,
    /// A header's first seq differs from its file name's.
    HeaderNameMismatch,
    /// The log starts after `base + 1`, or ends before `base`.
    LogMissesBase,
    /// A base snapshot but no segment at all.
    NoLog,
    /// A torn tail that would drop records the base covers.
    TornBelowBase,
    /// A bad frame (or a torn header) at a seq the durability mark proves durable.
    DamageProvenByMark,
    /// The log ends before the seq the durability mark proves durable.
    LogEndsBeforeMark,
    /// A record that does not decode, or that `apply` refuses, on replay
    /// (decided while replaying, in `load`, not by `classify`).
    RecordRejected,
}

/// A row of the segment table: FORMAT.md §6 prints `finding` and `verdict`
/// word for word, and a test compares the two tables row by row.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(
    not(any(test, feature = "sim")),
    expect(dead_code, reason = "the text is FORMAT.md's, read by the test that compares them")
)]
pub struct Row {
    /// The case this row decides.
    pub case: Case,
    /// What the scans found (FORMAT.md's "finding" column).
    pub finding: &'static str,
    /// What recovery does (FORMAT.md's "verdict" column).
    pub verdict: &'static str,
    /// The verdict, executed.
    pub action: Action,
}

/// FORMAT.md §6's segment table, in its order; `classify` executes it.
pub static ROWS: [Row; 19] = [
    Row {
        case: Case::Clean,
        finding: "every segment valid to its end, contiguous seqs, log reaches the base",
        verdict: "clean",
        action: Action::Clean,
    },
    Row {
        case: Case::PreallocatedLast,
        finding: "last segment: its valid records end where only zero bytes follow, to the end of the file (§3.2)",
        verdict: "clean: the preallocated tail (a writer's open cuts it, §5.5; readers leave it)",
        action: Action::Clean,
    },
    Row {
        case: Case::PreallocatedNotLast,
        finding: "a segment but the last ends in zeros after its records",
        verdict: "corruption (rotation trims them, §5.3)",
        action: Action::Corrupt,
    },
    Row {
        case: Case::TornTail,
        finding: r#"last segment: a bad frame (incomplete, checksum mismatch, garbage, zeros followed by any non-zero byte) at expected seq `d`, with **no valid frame after it whose seq is higher and whose `synced` ≥ `d`** (searched at every byte offset for binary; for JSONL at every line start, and inside the damaged line at every `{"seq":` that begins a record with the fixed fields whose declared `len` ends it exactly at the line's end — damage may have eaten the newline before a valid record)"#,
        verdict: "torn tail: dropped as in §5.5, together with any valid frames after it (all unacknowledged: their fsync never completed, or `d` would be intact)",
        action: Action::TornTail,
    },
    Row {
        case: Case::TornHeader,
        finding: "last segment: its header is unreadable and no valid frame follows (the header is fsynced before any record is written)",
        verdict: "torn tail: the whole file",
        action: Action::TornFile,
    },
    Row {
        case: Case::TornHeaderNotContinuing,
        finding: "as above, but the segment's name does not continue the log (it is not the segment the next seq would create)",
        verdict: "corruption: not a torn creation (dropping it would let the next append claim a seq no open can continue from)",
        action: Action::Corrupt,
    },
    Row {
        case: Case::DamageWithSuccessor,
        finding: "a bad frame at expected seq `d` followed somewhere by a valid frame of a higher seq with `synced` ≥ `d`",
        verdict: "corruption: `d` was durable and has changed since",
        action: Action::Corrupt,
    },
    Row {
        case: Case::HeaderUnreadable,
        finding: "a header that is unreadable in any segment but the last, or followed by a valid frame",
        verdict: "corruption",
        action: Action::Corrupt,
    },
    Row {
        case: Case::DamageNotLast,
        finding: "a bad frame in any segment but the last (rotation fsyncs a segment before the next exists)",
        verdict: "corruption",
        action: Action::Corrupt,
    },
    Row {
        case: Case::SeqBreak,
        finding: "a valid frame with the wrong seq (gap, duplicate, going back)",
        verdict: "corruption",
        action: Action::Corrupt,
    },
    Row {
        case: Case::SegmentGap,
        finding: "a segment whose first seq is not the previous segment's next seq, where the missing records are above the base",
        verdict: "corruption",
        action: Action::Corrupt,
    },
    Row {
        case: Case::CoveredGap,
        finding: "a gap between segments wholly at or below the base snapshot's seq",
        verdict: "ignored: a compaction's unlinks of redundant segments persisted only in part",
        action: Action::Ignore,
    },
    Row {
        case: Case::HeaderNameMismatch,
        finding: "a header whose first seq differs from its file name",
        verdict: "corruption",
        action: Action::Corrupt,
    },
    Row {
        case: Case::LogMissesBase,
        finding: "the log starts after `base + 1`, or ends before `base`",
        verdict: "corruption",
        action: Action::Corrupt,
    },
    Row {
        case: Case::NoLog,
        finding: "a base snapshot but no segment at all",
        verdict: "corruption",
        action: Action::Corrupt,
    },
    Row {
        case: Case::TornBelowBase,
        finding: "a torn tail that would drop records the base already covers",
        verdict: "corruption",
        action: Action::Corrupt,
    },
    Row {
        case: Case::DamageProvenByMark,
        finding: "last segment: a bad frame at expected seq `d` ≤ the seq the durability mark proves, or its header unreadable where the mark proves the segment created (its first seq ≤ that seq, or the segment the mark names) (§5.7)",
        verdict: "corruption: an acknowledged record has changed since it was fsynced",
        action: Action::Corrupt,
    },
    Row {
        case: Case::LogEndsBeforeMark,
        finding: "the log ends before the seq the durability mark proves (§5.7)",
        verdict: "corruption: acknowledged records are missing",
        action: Action::Corrupt,
    },
    Row {
        case: Case::RecordRejected,
        finding: "a record that does not decode, or that `apply` refuses on replay",
        verdict: "corruption",
        action: Action::Corrupt,
    },
];

// Each case indexes its own row: checked when this compiles, so `row` cannot
// index out of bounds or find another case's row.
const _: () = {
    let mut i = 0;
    while i < ROWS.len() {
        assert!(ROWS[i].case as usize == i, "ROWS out of order with Case");
        i += 1;
    }
    assert!(ROWS.len() == Case::RecordRejected as usize + 1);
};

/// The row that decides `case`.
pub fn row(case: Case) -> &'static Row {
    &ROWS[case as usize]
}

/// Where a finding is, and the details its verdict carries.
struct Found {
    segment: usize,
    offset: u64,
    seq: Option<u64>,
    /// Bytes a torn tail drops.
    bytes: u64,
    reason: String,
}

impl Found {
    fn at(segment: usize, offset: u64, seq: Option<u64>, reason: String) -> Found {
        Found {
            segment,
            offset,
            seq,
            bytes: 0,
            reason,
        }
    }
}

/// Executes `case`'s row on what was found: `None` when the row lets the
/// scan go on (clean, ignored), else the verdict.
fn act(case: Case, f: Found) -> Option<Verdict> {
    match row(case).action {
        Action::Clean | Action::Ignore => None,
        Action::TornTail | Action::TornFile => Some(Verdict::TornTail(TornTail {
            segment: f.segment,
            offset: f.offset,
            bytes: f.bytes,
            whole_file: row(case).action == Action::TornFile,
            reason: f.reason,
        })),
        Action::Corrupt => Some(Verdict::Corrupt(Corruption {
            file: FileRef::Segment(f.segment),
            offset: Some(f.offset),
            seq: f.seq,
            reason: f.reason,
        })),
    }
}

/// Classifies segment scans (in file-name order) given the base seq and the
/// first seq each file name declares: finds the row of [`ROWS`] each finding
/// falls in, and does what the row says.
#[cfg_attr(
    not(any(test, feature = "sim")),
    expect(dead_code, reason = "the store classifies with its mark; tests and fuzzers without")
)]
pub fn classify(scans: &[SegmentScan], name_seqs: &[u64], base_seq: u64) -> Verdict {
    classify_proven(scans, name_seqs, base_seq, 0)
}

/// [`classify`], given also the seq a valid durability mark proves durable
/// (FORMAT.md §5.7; 0 when there is none): damage at or below it, or a log
/// that ends before it, is corruption, never a torn tail.
pub fn classify_proven(
    scans: &[SegmentScan],
    name_seqs: &[u64],
    base_seq: u64,
    proven: u64,
) -> Verdict {
    classify_marked(scans, name_seqs, base_seq, proven, proven)
}

/// [`classify_proven`], given also the first seq of the newest segment whose
/// header the mark proves durable: the segment holding record `proven`, or
/// the empty segment a rotation created after it (a mark naming `proven + 1`).
pub fn classify_marked(
    scans: &[SegmentScan],
    name_seqs: &[u64],
    base_seq: u64,
    proven: u64,
    header_proven: u64,
) -> Verdict {
    debug_assert_eq!(scans.len(), name_seqs.len());
    let header_proven = header_proven.max(proven);
    let clean = || act(Case::Clean, Found::at(0, 0, None, String::new())).unwrap_or(Verdict::Clean);
    if scans.is_empty() {
        if base_seq == 0 {
            return clean();
        }
        let found = Found::at(0, 0, None, "snapshot present but no log segment".into());
        return act(Case::NoLog, found).unwrap_or(Verdict::Clean);
    }
    let last = scans.len() - 1;
    let mut expect_first: Option<u64> = None;
    for (i, s) in scans.iter().enumerate() {
        let Some(first) = s.first_seq else {
            let (problem, resync) = match &s.end {
                ScanEnd::Damaged {
                    problem, resync, ..
                } => (problem.as_str(), *resync),
                // A scan without a header always ends Damaged.
                _ => ("no segment header", None),
            };
            // A torn header is a torn tail only in the segment the next seq would
            // create: the one whose name continues the log. Any other name is a
            // file the writer never made here, and dropping it would let the
            // next append claim a seq the next open cannot continue from.
            let continues = match expect_first {
                Some(e) => name_seqs[i] == e || (name_seqs[i] > e && name_seqs[i] <= base_seq + 1),
                None => name_seqs[i] == base_seq + 1,
            };
            let (case, found) = headerless_case(
                HeaderlessAt { i, last, continues, expected: expect_first.unwrap_or(base_seq + 1) },
                s, name_seqs[i], problem, resync, header_proven, proven,
            );
            if let Some(v) = act(case, found) {
                return v;
            }
            // A row that passes a headerless segment over: nothing to continue from.
            continue;
        };
        if first != name_seqs[i] {
            let found = Found::at(
                i,
                0,
                Some(first),
                format!(
                    "header says first seq {first}, file name says {}",
                    name_seqs[i]
                ),
            );
            if let Some(v) = act(Case::HeaderNameMismatch, found) {
                return v;
            }
        }
        if let Some(e) = expect_first
            && first != e
        {
            // A gap wholly covered by the base snapshot is harmless: compaction
            // unlinks those segments, and a crash may persist any subset of the unlinks.
            let covered_gap = first > e && first <= base_seq + 1;
            let case = if covered_gap {
                Case::CoveredGap
            } else {
                Case::SegmentGap
            };
            let what = if first > e { "gap" } else { "overlap" };
            let found = Found::at(
                i,
                0,
                Some(first),
                format!("seq {what}: segment starts at {first}, expected {e}"),
            );
            if let Some(v) = act(case, found) {
                return v;
            }
        }
        if i == 0 && first > base_seq + 1 {
            let found = Found::at(
                i,
                0,
                Some(first),
                format!(
                    "seq gap: log starts at {first} but the snapshot covers only up to {base_seq}"
                ),
            );
            if let Some(v) = act(Case::LogMissesBase, found) {
                return v;
            }
        }
        let (case, found) = end_case(i, i == last, s, base_seq, proven);
        if let Some(v) = act(case, found) {
            return v;
        }
        expect_first = Some(s.next_seq);
    }
    let next = scans[last].next_seq;
    if next <= base_seq {
        let found = Found::at(
            last,
            scans[last].valid_len,
            Some(next),
            format!(
                "the log ends at seq {} but the snapshot covers up to {base_seq}",
                next - 1
            ),
        );
        if let Some(v) = act(Case::LogMissesBase, found) {
            return v;
        }
    }
    if next <= proven {
        let found = Found::at(
            last,
            scans[last].valid_len,
            Some(next),
            format!(
                "the log ends at seq {} but the durability mark proves records through seq {proven} durable",
                next - 1
            ),
        );
        if let Some(v) = act(Case::LogEndsBeforeMark, found) {
            return v;
        }
    }
    clean()
}

/// Where a segment without a readable header stands in the log, for
/// [`headerless_case`].
struct HeaderlessAt {
    /// Its index among the scans.
    i: usize,
    /// The index of the last scan.
    last: usize,
    /// Whether its name continues the log (the segment the next seq would create).
    continues: bool,
    /// The first seq the log expects of it.
    expected: u64,
}

/// The case of a segment whose header is unreadable (`problem`), given where
/// it stands and what the mark proves: a torn creation of the segment the
/// next seq would make is a torn header; anything else is damage.
fn headerless_case(
    at: HeaderlessAt,
    s: &SegmentScan,
    name_seq: u64,
    problem: &str,
    resync: Option<(u64, u64)>,
    header_proven: u64,
    proven: u64,
) -> (Case, Found) {
    let HeaderlessAt { i, last, continues, expected } = at;
    if i == last && resync.is_none() && !continues {
        (
            Case::TornHeaderNotContinuing,
            Found::at(
                i,
                0,
                Some(name_seq),
                format!(
                    "segment header unreadable ({problem}) in a segment whose name (first seq {}) does not continue the log (expected {expected}): not a torn creation",
                    name_seq
                ),
            ),
        )
    } else if i == last && resync.is_none() && name_seq <= header_proven {
        (
            Case::DamageProvenByMark,
            Found::at(
                i,
                0,
                Some(name_seq),
                format!(
                    "segment header unreadable ({problem}), but the durability mark proves it durable (records through seq {proven})"
                ),
            ),
        )
    } else if i == last && resync.is_none() {
        let mut f = Found::at(i, 0, None, format!("segment header torn: {problem}"));
        f.bytes = s.file_len;
        (Case::TornHeader, f)
    } else {
        (
            Case::HeaderUnreadable,
            Found::at(
                i,
                0,
                resync.map(|r| r.1),
                format!("segment header unreadable: {problem}"),
            ),
        )
    }
}

/// The case of how the scan of segment `i` (the last one when `is_last`)
/// ended, against the base snapshot's seq and the seq the mark proves.
fn end_case(i: usize, is_last: bool, s: &SegmentScan, base_seq: u64, proven: u64) -> (Case, Found) {
    match &s.end {
        ScanEnd::Clean => (Case::Clean, Found::at(i, 0, None, String::new())),
        // Rotation cuts a segment to its records and fsyncs it before the next
        // one exists, so only the last segment can still hold preallocated zeros.
        ScanEnd::Preallocated { offset } if !is_last => (
            Case::PreallocatedNotLast,
            Found::at(
                i,
                *offset,
                Some(s.next_seq),
                "zero-filled tail in a segment that is not the last".into(),
            ),
        ),
        ScanEnd::Preallocated { offset } => (
            Case::PreallocatedLast,
            Found::at(i, *offset, None, String::new()),
        ),
        ScanEnd::SeqBreak {
            offset,
            expected,
            found,
        } => (
            Case::SeqBreak,
            Found::at(
                i,
                *offset,
                Some(*found),
                format!("seq {found} where {expected} was expected"),
            ),
        ),
        ScanEnd::Damaged {
            offset,
            problem,
            resync: Some((at, seq)),
        } => (
            Case::DamageWithSuccessor,
            Found::at(
                i,
                *offset,
                Some(s.next_seq),
                format!("{problem}, followed by a valid record (seq {seq} at offset {at})"),
            ),
        ),
        ScanEnd::Damaged {
            offset,
            problem,
            resync: None,
        } if !is_last => (
            Case::DamageNotLast,
            Found::at(
                i,
                *offset,
                Some(s.next_seq),
                format!("{problem} in a segment that is not the last"),
            ),
        ),
        ScanEnd::Damaged {
            offset,
            problem,
            resync: None,
        } if s.next_seq <= base_seq => (
            Case::TornBelowBase,
            Found::at(
                i,
                *offset,
                Some(s.next_seq),
                format!(
                    "{problem}, and the records lost were covered by the snapshot at {base_seq}"
                ),
            ),
        ),
        ScanEnd::Damaged {
            offset,
            problem,
            resync: None,
        } if s.next_seq <= proven => (
            Case::DamageProvenByMark,
            Found::at(
                i,
                *offset,
                Some(s.next_seq),
                format!(
                    "{problem}, but the durability mark proves records through seq {proven} durable"
                ),
            ),
        ),
        ScanEnd::Damaged {
            offset,
            problem,
            resync: None,
        } => {
            let mut f = Found::at(i, *offset, None, problem.clone());
            f.bytes = s.file_len.saturating_sub(*offset);
            (Case::TornTail, f)
        }
    }
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
            frames_after_end: 0,
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

    // ---- FORMAT.md's segment table is ROWS ----

    /// The segment table of FORMAT.md §6: (finding, verdict) per row.
    fn format_md_rows() -> Vec<(String, String)> {
        let doc = include_str!("../../../FORMAT.md");
        let start = doc
            .find("**Segments** (`classify`)")
            .expect("FORMAT.md §6 has the segment table");
        let mut rows = Vec::new();
        let mut in_table = false;
        for line in doc[start..].lines() {
            if let Some(inner) = line.strip_prefix("| ").and_then(|l| l.strip_suffix(" |")) {
                in_table = true;
                let cells: Vec<&str> = inner.split(" | ").collect();
                assert_eq!(cells.len(), 2, "a row of two cells: {line}");
                rows.push((cells[0].to_string(), cells[1].to_string()));
            } else if line.starts_with("|---") {
                continue;
            } else if in_table {
                break;
            }
        }
        // The header row.
        assert_eq!(rows.remove(0), ("finding".into(), "verdict".into()));
        rows
    }

    #[test]
    fn format_md_segment_table_is_the_rows_classify_executes() {
        let doc = format_md_rows();
        assert_eq!(doc.len(), ROWS.len(), "FORMAT.md §6 and ROWS differ in length");
        for (i, (row, (finding, verdict))) in ROWS.iter().zip(&doc).enumerate() {
            assert_eq!(row.finding, finding, "row {i} ({:?}): finding", row.case);
            assert_eq!(row.verdict, verdict, "row {i} ({:?}): verdict", row.case);
        }
    }

    #[test]
    fn each_rows_action_is_what_its_verdict_says() {
        for row in &ROWS {
            let said = if row.verdict == "torn tail: the whole file" {
                Action::TornFile
            } else if row.verdict.starts_with("torn tail") {
                Action::TornTail
            } else if row.verdict.starts_with("clean") {
                Action::Clean
            } else if row.verdict.starts_with("ignored") {
                Action::Ignore
            } else if row.verdict.starts_with("corruption") {
                Action::Corrupt
            } else {
                panic!("a verdict with no action: {}", row.verdict)
            };
            assert_eq!(row.action, said, "{:?}: {}", row.case, row.verdict);
        }
    }

    #[test]
    fn classify_acts_on_the_row_it_finds() {
        // The same finding under each case's row: the verdict's kind is the row's.
        for row in &ROWS {
            let v = act(row.case, Found::at(0, 7, Some(3), "why".into()));
            match (row.action, v) {
                (Action::Clean | Action::Ignore, None) => {}
                (Action::Corrupt, Some(Verdict::Corrupt(c))) => {
                    assert_eq!((c.offset, c.seq, c.reason.as_str()), (Some(7), Some(3), "why"))
                }
                (Action::TornTail, Some(Verdict::TornTail(t))) => assert!(!t.whole_file),
                (Action::TornFile, Some(Verdict::TornTail(t))) => assert!(t.whole_file),
                (a, v) => panic!("{:?}: action {a:?} gave {v:?}", row.case),
            }
        }
    }

    // ---- the recovery table, row by row ----

    #[test]
    fn row_damage_at_or_below_the_mark_is_corruption_not_a_torn_tail() {
        // A bad frame at seq 6 (next_seq) in the last segment, nothing valid after.
        let s = [scan(Some(1), 5, damaged(None))];
        // Without a mark, or a mark below the damage: a torn tail.
        for proven in [0, 5] {
            assert!(matches!(
                classify_proven(&s, &[1], 0, proven),
                Verdict::TornTail(_)
            ));
        }
        // A mark at or past the damaged seq: corruption at the damage.
        for proven in [6, 9] {
            match classify_proven(&s, &[1], 0, proven) {
                Verdict::Corrupt(c) => {
                    assert_eq!((c.offset, c.seq), (Some(100), Some(6)));
                    assert!(c.reason.contains("durability mark"), "{}", c.reason);
                }
                v => panic!("proven {proven}: {v:?}"),
            }
        }
        // A torn header in a segment whose records the mark proves.
        let torn_header = scan(None, 0, damaged(None));
        let two = [scan(Some(1), 5, ScanEnd::Clean), torn_header];
        assert!(matches!(
            classify_proven(&two, &[1, 6], 0, 5),
            Verdict::TornTail(t) if t.whole_file
        ));
        assert!(matches!(
            classify_proven(&two, &[1, 6], 0, 6),
            Verdict::Corrupt(c) if c.seq == Some(6)
        ));
        // A mark written after a rotation created segment 6 (seq 5, segment 6):
        // its header was durable, so a torn one is damage, not a creation cut short.
        assert!(matches!(
            classify_marked(&two, &[1, 6], 0, 5, 6),
            Verdict::Corrupt(c) if c.seq == Some(6)
        ));
    }

    #[test]
    fn row_a_log_ending_before_the_mark_is_corruption() {
        let s = [scan(Some(1), 5, ScanEnd::Clean)];
        assert_eq!(classify_proven(&s, &[1], 0, 5), Verdict::Clean);
        match classify_proven(&s, &[1], 0, 7) {
            Verdict::Corrupt(c) => {
                assert_eq!(c.seq, Some(6));
                assert!(c.reason.contains("ends at seq 5"), "{}", c.reason);
            }
            v => panic!("{v:?}"),
        }
        let zeros = [scan(Some(1), 5, ScanEnd::Preallocated { offset: 100 })];
        assert!(matches!(
            classify_proven(&zeros, &[1], 0, 6),
            Verdict::Corrupt(_)
        ));
    }

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
            matches!(&v, Verdict::Corrupt(c) if c.file == FileRef::Segment(0) && c.offset == Some(100)),
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
                offset: Some(100),
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
                offset: Some(80),
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
