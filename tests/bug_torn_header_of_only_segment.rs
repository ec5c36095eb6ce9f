//! Regression: a crash while a new store's first segment header was being written
//! (any prefix of the header on disk, including an empty file) left a store that
//! no open could recover ("no segment or snapshot with a readable header"). It
//! must recover as the empty store, quarantine the bytes and take the asked codec.
mod common;
use common::*;
use runlog::engine::frame::encode_segment_header;
use runlog::engine::{Integrity, RealFs, Store, verify};
use std::os::unix::fs::PermissionsExt;

#[test]
fn torn_header_of_the_only_segment_recovers_as_empty() {
    for codec in codecs() {
        let header = encode_segment_header(codec, 1);
        for cut in 0..header.len() {
            let t = tempfile::tempdir().unwrap();
            let dir = t.path().join("s");
            std::fs::create_dir(&dir).unwrap();
            std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o700)).unwrap();
            std::fs::write(dir.join("seg-00000000000000000001.log"), &header[..cut]).unwrap();
            let v = verify(&RealFs, &dir).unwrap();
            assert!(
                matches!(v.integrity, Integrity::TornTail { offset: 0, .. }),
                "{codec:?} cut {cut}: {:?}",
                v.integrity
            );
            let s = Store::<Ledger>::open(&dir, opts(codec))
                .unwrap_or_else(|e| panic!("{codec:?} cut {cut}: {e}"));
            assert_eq!(s.last_seq(), 0);
            assert_eq!(s.codec(), codec);
            let torn = s.recovery().torn_tail.clone().unwrap();
            assert!(torn.whole_file);
            let q = std::fs::read(torn.quarantined_to.unwrap()).unwrap();
            assert_eq!(q, &header[..cut]);
            assert_eq!(s.append(&entry(7, 1)).unwrap(), 1);
            drop(s);
            let s = Store::<Ledger>::open(&dir, opts(codec)).unwrap();
            assert_eq!(s.read(|st| st.values.clone()), vec![7]);
        }
    }
}
