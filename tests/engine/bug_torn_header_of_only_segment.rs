//! Regression: a crash while a new store's first segment header was being written
//! (any prefix of the header on disk, including an empty file) left a store that
//! no open could recover ("no segment or snapshot with a readable header"), and
//! readers reported it as corruption ("torn first segment header reported as
//! corruption"). It must recover as the empty store, quarantine the bytes and
//! take the asked codec; readers see an empty store and verify says TornTail.
//! Two forms: every prefix of the header on a real filesystem, and the crash
//! images of the simulated filesystem (the header absent, zeros, garbage, cut).
use crate::common;
use common::crash::*;
use common::*;
use runlog::engine::frame::encode_segment_header;
use runlog::engine::sim::{Fate, SectorFate, SimFs};
use runlog::engine::{self, Integrity, Reader, RealFs, Store, Vfs};
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
            let v = Reader::new(&RealFs, &dir).verify().unwrap();
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
            // The torn bytes are kept; an empty file has none, and gets no
            // empty quarantine copy (issue 19: they piled up on a full disk).
            match torn.quarantined_to {
                Some(q) => assert_eq!(std::fs::read(q).unwrap(), &header[..cut]),
                None => assert_eq!(cut, 0, "{codec:?} cut {cut}: nothing quarantined"),
            }
            assert_eq!(s.append(&entry(7, 1)).unwrap(), 1);
            drop(s);
            let s = Store::<Ledger>::open(&dir, opts(codec)).unwrap();
            assert_eq!(s.read(|st| st.values.clone()), vec![7]);
        }
    }
}

/// Creates a store and returns crash images taken just before the new segment's
/// fsync, with the directory entry durable and the header in every torn form.
fn torn_creations(codec: runlog::engine::Codec) -> Vec<SimFs> {
    let fs = SimFs::new();
    fs.create_dir(&dir()).unwrap();
    fs.sync_dir(std::path::Path::new("/")).unwrap();
    let f = fs
        .create_new(&dir().join("seg-00000000000000000001.log"))
        .unwrap();
    fs.sync_dir(&dir()).unwrap();
    // The header a real create_segment writes, taken from a real store.
    let real = SimFs::new();
    drop(Store::<Ledger>::open(dir(), sim_opts(&real, codec)).unwrap());
    let files = real.with_state(|s| s.durable_files());
    let header = files.values().next().unwrap().clone();
    f.write_at(&header, 0).unwrap();
    let mut out = vec![fs.crash(&[Fate::Absent])];
    for s in [SectorFate::Zero, SectorFate::Garbage(7)] {
        out.push(fs.crash(&[Fate::Sectors(vec![s])]));
    }
    // A header cut short (a short write that was never completed).
    let cut = SimFs::new();
    cut.create_dir(&dir()).unwrap();
    cut.sync_dir(std::path::Path::new("/")).unwrap();
    let g = cut
        .create_new(&dir().join("seg-00000000000000000001.log"))
        .unwrap();
    g.write_at(&header[..header.len() / 2], 0).unwrap();
    g.sync_data().unwrap();
    cut.sync_dir(&dir()).unwrap();
    out.push(cut.crash(&[]));
    out
}

#[test]
fn torn_first_segment_header_is_a_torn_tail_not_corruption() {
    for codec in codecs() {
        for img in torn_creations(codec) {
            let (st, rep) = engine::Reader::new(&img, &dir())
                .state::<Ledger>()
                .expect("read_state");
            assert_eq!(st, LedgerState::default());
            assert_eq!(rep.last_seq, 0);
            let v = engine::Reader::new(&img, &dir()).verify().unwrap();
            assert!(
                matches!(v.integrity, Integrity::TornTail { offset: 0, .. }),
                "{:?}",
                v.integrity
            );
            let s = Store::<Ledger>::open(dir(), sim_opts(&img, codec)).expect("open");
            assert_eq!(s.codec(), codec, "the codec asked for, not a guess");
            assert!(s.recovery().torn_tail.as_ref().unwrap().whole_file);
            assert_eq!(s.append(&entry(1, 3)).unwrap(), 1);
            drop(s);
            let s = Store::<Ledger>::open(dir(), sim_opts(&img.crash(&[]), codec)).unwrap();
            assert_eq!(s.read(|st| st.values.clone()), vec![1]);
        }
    }
}
