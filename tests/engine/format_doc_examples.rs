//! Proves FORMAT.md's worked examples are exactly what the encoder writes and
//! what the decoder accepts, so the document cannot drift from the code.
use runlog::engine::Codec;
use runlog::engine::frame::{
    Frame, decode_record, decode_segment_header, encode_record, encode_segment_header,
};

fn format_md() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/FORMAT.md")).unwrap()
}

fn line_starting(doc: &str, prefix: &str) -> String {
    doc.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("FORMAT.md has no line {prefix}"))
        .to_string()
}

#[test]
fn jsonl_segment_header_example_is_byte_exact() {
    let line = line_starting(&format_md(), "{\"runlog\":\"segment\"");
    let mut ours = encode_segment_header(Codec::Jsonl, 1);
    assert_eq!(ours.pop(), Some(b'\n'));
    assert_eq!(String::from_utf8(ours).unwrap(), line);
    let mut with_nl = line.into_bytes();
    with_nl.push(b'\n');
    assert_eq!(decode_segment_header(&with_nl).unwrap().first_seq, 1);
}

#[test]
fn jsonl_record_example_is_byte_exact() {
    let line = line_starting(&format_md(), "{\"seq\":7,");
    let t = br#"{"op":"unit","unit":"u1","status":"done"}"#;
    let mut ours = Vec::new();
    encode_record(Codec::Jsonl, 7, 5, t, &mut ours);
    assert_eq!(ours.pop(), Some(b'\n'));
    assert_eq!(String::from_utf8(ours).unwrap(), line);
    let mut with_nl = line.into_bytes();
    with_nl.push(b'\n');
    assert!(matches!(
        decode_record(Codec::Jsonl, &with_nl, 0),
        Frame::Record { seq: 7, .. }
    ));
}

#[test]
fn binary_layout_constants_match_the_tables() {
    let doc = format_md();
    assert!(doc.contains("`SEGMENT_HEADER_LEN = 32`"));
    assert!(doc.contains("`SNAPSHOT_HEADER_LEN = 40`"));
    assert!(doc.contains("`RECORD_HEADER_LEN = 24`"));
    assert_eq!(runlog::engine::format::SEGMENT_HEADER_LEN, 32);
    assert_eq!(runlog::engine::format::SNAPSHOT_HEADER_LEN, 40);
    assert_eq!(runlog::engine::format::RECORD_HEADER_LEN, 24);
    assert_eq!(runlog::engine::format::MAX_RECORD_LEN, 16 << 20);
    assert_eq!(runlog::engine::format::CRC_MASK_DELTA, 0xa282_ead8);
    let h = encode_segment_header(Codec::Binary, 0x0102_0304_0506_0708);
    assert_eq!(&h[..8], b"RUNLOGsg");
    assert_eq!(&h[8..10], &1u16.to_le_bytes());
    assert_eq!(h[10], 1);
    assert_eq!(&h[12..20], &0x0102_0304_0506_0708u64.to_le_bytes());
}
