//! Regression: damage to the first byte of a JSONL segment header (the byte that
//! tells the codecs apart) made the scan look for binary records only, find none,
//! and drop the whole last segment, every acknowledged record in it, as a torn
//! tail. It must be corruption: nothing dropped, nothing modified.
use crate::common;
use common::*;
use runlog::engine::{Codec, Error, Store};
use std::path::Path;

#[test]
fn damaged_first_header_byte_of_a_jsonl_segment_is_corruption() {
    let fs = mem_fs();
    let dir = Path::new(MEM_DIR);
    let mut o = mem_opts(Codec::Jsonl, &fs);
    o.segment_bytes = 1024;
    {
        let s = Store::<Ledger>::open(dir, o.clone()).unwrap();
        for v in 1..=40 {
            s.append(&entry(v, 20)).unwrap();
        }
    }
    let last = fs
        .files(dir)
        .into_iter()
        .rfind(|f| f.0.ends_with(".log"))
        .unwrap();
    assert_ne!(last.0, "seg-00000000000000000001.log", "need two segments");
    let seg = dir.join(&last.0);
    for mask in [0x01u8, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff] {
        let mut bad = last.1.clone();
        bad[0] ^= mask;
        fs.put(&seg, bad);
        let before = fs.files(dir);
        match Store::<Ledger>::open(dir, o.clone()) {
            Err(Error::Corrupt { path, offset, .. }) => {
                assert_eq!((path, offset), (seg.clone(), Some(0)))
            }
            Err(e) => panic!("mask {mask:#x}: {e}"),
            Ok(s) => panic!(
                "mask {mask:#x}: opened with {} records, torn tail {:?}",
                s.last_seq(),
                s.recovery().torn_tail
            ),
        }
        assert_eq!(fs.files(dir), before);
    }
}
