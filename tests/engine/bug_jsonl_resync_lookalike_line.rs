//! Regression: after the fix that lets JSONL resync find a record whose preceding
//! newline was damaged, every `{"seq":` inside a damaged line became a candidate
//! and each candidate was decoded by searching to the end of the line, so a line
//! of look-alikes took quadratic time to scan (a 256 KiB line: ~6 s). A candidate
//! inside a line must now have the fixed record fields and end exactly at the
//! line's newline; a real merged record is still found.
use runlog::engine::Codec;
use runlog::engine::frame::{encode_record, encode_segment_header, next_candidate};
use runlog::engine::scan::{ScanEnd, scan_segment};

#[test]
fn lookalikes_inside_a_damaged_line_are_not_candidates() {
    let mut b = encode_segment_header(Codec::Jsonl, 1);
    let start = b.len();
    b.push(b'x');
    while b.len() < start + (4 << 20) {
        b.extend_from_slice(b"{\"seq\":");
    }
    b.push(b'\n');
    assert_eq!(next_candidate(Codec::Jsonl, &b, start), None);
    let s = scan_segment::<()>(&b, |_, _, _| Ok(())).unwrap();
    assert!(matches!(s.end, ScanEnd::Damaged { resync: None, .. }));
}

#[test]
fn a_record_merged_into_a_damaged_line_is_still_a_candidate() {
    let mut b = encode_segment_header(Codec::Jsonl, 1);
    encode_record(Codec::Jsonl, 1, 0, b"{\"seq\":5}", &mut b);
    let first_end = b.len();
    b[first_end - 1] = b'X'; // the newline ending record 1, damaged
    encode_record(Codec::Jsonl, 2, 1, b"[1,{\"seq\":7}]", &mut b);
    let header = encode_segment_header(Codec::Jsonl, 1).len();
    assert_eq!(next_candidate(Codec::Jsonl, &b, header), Some(first_end));
    let s = scan_segment::<()>(&b, |_, _, _| Ok(())).unwrap();
    assert!(
        matches!(s.end, ScanEnd::Damaged { resync: Some((at, 2)), .. } if at == first_end as u64),
        "{:?}",
        s.end
    );
}
