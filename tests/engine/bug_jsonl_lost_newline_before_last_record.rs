//! Regression: in a JSONL log, damage to the newline that ends the second-to-last
//! record merged it with the last one; resync looked only at line starts, found
//! no valid record after the damage, and dropped both records (the earlier one
//! acknowledged long ago) as a torn tail. It must be corruption at that record.
use crate::common;
use common::*;
use runlog::engine::{Codec, Error, Store};
use std::path::Path;

#[test]
fn damaged_newline_before_the_last_record_is_corruption() {
    let fs = mem_fs();
    let dir = Path::new(MEM_DIR);
    let n = build_log(&fs, Codec::Jsonl, 2000);
    let seg = dir.join("seg-00000000000000000001.log");
    let good = fs.get(&seg).unwrap();
    let bounds = record_bounds(&good);
    let (start, nl) = (bounds[n - 2], bounds[n - 1] - 1);
    assert_eq!(good[nl as usize], b'\n');
    for mask in [0x01u8, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff] {
        let mut bad = good.clone();
        bad[nl as usize] ^= mask;
        fs.put(&seg, bad);
        let before = fs.files(dir);
        match Store::<Ledger>::open(dir, mem_opts(Codec::Jsonl, &fs)) {
            Err(Error::Corrupt { path, offset, .. }) => {
                assert_eq!((path, offset), (seg.clone(), Some(start)), "mask {mask:#x}")
            }
            Err(e) => panic!("mask {mask:#x}: {e}"),
            Ok(s) => panic!(
                "mask {mask:#x}: opened with {} of {n} records",
                s.last_seq()
            ),
        }
        assert_eq!(fs.files(dir), before);
    }
}
