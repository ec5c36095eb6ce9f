//! Proves that a reader racing a compaction's rotation does not report damage
//! (issue 11, item 5): the new last segment exists but its header is not
//! written yet (empty, zeros, or part of the header line), in both codecs.
//! `verify` and the read-only open treat it as an empty segment (clean, every
//! record counted), while a segment whose header is garbage stays a torn tail.
use runlog::engine::{Codec, Integrity, Options, Reader, RealFs, Store};
use std::os::unix::fs::PermissionsExt;

use crate::common::sum;
use sum::Sum;

#[test]
fn a_new_segment_without_its_header_yet_is_empty_not_damage() {
    for codec in [Codec::Binary, Codec::Jsonl] {
        let unwritten: Vec<&[u8]> = match codec {
            Codec::Binary => vec![b"", &[0u8; 20], b"RUNLOGsg\x01"],
            Codec::Jsonl => vec![b"", b"{\"runlog\":\"segm", b"{\"ru"],
        };
        for bytes in unwritten {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("s");
            // No preallocation: a rotation cuts the zeros before the next
            // segment exists, which is the state this test makes by hand.
            let s = Store::<Sum>::open(
                &dir,
                Options {
                    create: true,
                    codec,
                    preallocate: 0,
                    ..Options::default()
                },
            )
            .unwrap();
            for v in 1..=3 {
                s.append(&v).unwrap();
            }
            drop(s);
            drop(
                Store::<Sum>::open(
                    &dir,
                    Options {
                        codec,
                        preallocate: 0,
                        ..Options::default()
                    },
                )
                .unwrap(),
            );
            // What a rotation to seq 4 shows between its create and its header write.
            let next = dir.join("seg-00000000000000000004.log");
            std::fs::write(&next, bytes).unwrap();
            std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o600)).unwrap();
            let r = Reader::new(&RealFs, &dir).verify().unwrap();
            assert!(r.integrity.is_clean(), "{codec:?} {bytes:?}");
            assert_eq!(r.recovery.last_seq, 3);
            let (v, _) = Reader::new(&RealFs, &dir).state::<Sum>().unwrap();
            assert_eq!(v, 6);
            // Garbage where the header goes is still a torn tail, not "empty".
            std::fs::write(&next, b"junk!").unwrap();
            let r = Reader::new(&RealFs, &dir).verify().unwrap();
            assert!(
                matches!(r.integrity, Integrity::TornTail { .. }),
                "{:?}",
                r.integrity
            );
        }
    }
}
