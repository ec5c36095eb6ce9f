//! Proves this build reads the committed format-v1 stores in
//! tests/fixtures/v1/{binary,jsonl}/{clean,torn_tail,corrupt_mid}: the clean store
//! opens to the exact expected state, the torn tail recovers the expected prefix
//! (opened from a temp copy, the fixture is never written), and the corrupt one is
//! refused naming the damaged segment and record offset. Every later version must
//! pass this unchanged.
//!
//! The generators never write under tests/fixtures: they write into a fresh
//! directory, and a plain `cargo test` runs them into a temp directory and reads
//! what they wrote with the same checks as the committed stores (readability,
//! not bytes). For a NEW format version, `RUNLOG_FIXTURES_OUT=DIR cargo test
//! --test engine -- --ignored fixtures_read::generate_fixtures` writes DIR/v1,
//! DIR/v3 and DIR/v4 (DIR must not exist); copy the new version's directory in
//! by hand.
//!
//! Format v2 (keyed state in a table snapshot, FORMAT.md §11): the committed
//! stores in tests/fixtures/v2/{binary,jsonl}/{clean,damaged_block,tagged_digest}
//! of the keyed test machine (tests/common/keyed.rs): the clean store (a table
//! of two blocks at seq 100 and a tail of 20) opens to the model's state by
//! lookup and by iteration; the tagged-digest one opens only with its key (with
//! another it is `Tampered`); the damaged-block one (a byte of table block 0
//! flipped) is refused at the open — the tail's replay looks keys up in it —
//! and by `verify`, both naming the table and the block's offset.
//!
//! Format v4 (paged table indexes, FORMAT.md §11.8): tests/fixtures/v4 holds
//! the v2 stores and v3's delta store written by a build with paged tables
//! (table versions 4 and 5), read with the same checks.
use crate::common;
use common::*;
use runlog::engine::{Codec, Error, Integrity, Reader, RealFs, Store};
use runlog::engine::{Machine, Options};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const SNAP_AT: u64 = 6;
/// The table versions of v3_delta's store written with paged tables: a full
/// table (4) and two deltas (5).
const PAGED_VERSIONS: (u16, u16, u16) = (4, 5, 5);
const RECORDS: u64 = 12;
/// The record whose middle byte `corrupt_mid` flips (it has valid successors).
const DAMAGED: u64 = 9;
const LAST_SEG: &str = "seg-00000000000000000007.log";

/// Offset of record `DAMAGED` in `LAST_SEG`, per codec (fixed by the v1 format).
fn damaged_offset(codec: Codec) -> u64 {
    match codec {
        Codec::Binary => 97,
        Codec::Jsonl => 227,
    }
}

/// Where the committed fixtures of every version live.
fn committed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn fixture(root: &Path, codec: Codec, case: &str) -> PathBuf {
    root.join("v1").join(codec.name()).join(case)
}

/// Writes `files` as the new directory `out` (never over an existing one).
fn write_new(out: &Path, files: &[(String, Vec<u8>)]) {
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    std::fs::create_dir(out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    for (name, bytes) in files {
        std::fs::write(out.join(name), bytes).unwrap();
    }
}

fn pad(v: u64) -> usize {
    (v % 5) as usize
}

fn expected(n: u64) -> LedgerState {
    let mut s = LedgerState::default();
    for v in 1..=n {
        s.values.push(v);
        s.bytes += pad(v) as u64;
    }
    s
}

/// Copies a fixture into a fresh 0700 directory (checkouts may have any mode).
/// Copies the store `from` into a fresh 0700 directory (checkouts may have any mode).
fn copy_store(from: &Path) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("s");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o700)).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    (t, dir)
}

fn copy(root: &Path, codec: Codec, case: &str) -> (tempfile::TempDir, PathBuf) {
    copy_store(&fixture(root, codec, case))
}

#[test]
fn clean_v1_store_opens_to_the_expected_state() {
    check_clean_v1(&committed());
}

#[test]
fn torn_tail_v1_store_recovers_the_prefix() {
    check_torn_tail_v1(&committed());
}

#[test]
fn corrupt_mid_v1_store_is_refused_at_the_damaged_record() {
    check_corrupt_mid_v1(&committed());
}

/// The generators' stores, written into a temp directory, read like the
/// committed ones (the same checks; their bytes are not compared).
#[test]
fn generated_fixtures_read_like_the_committed_ones() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("generated");
    generate_v1(&root);
    check_clean_v1(&root);
    check_torn_tail_v1(&root);
    check_corrupt_mid_v1(&root);
    // The keyed-store generators write this build's tables: paged (table
    // versions 4 and 5, FORMAT.md §11.8), so into v4.
    let v4 = root.join("v4");
    v2::generate(&v4);
    v2::check_clean(&v4);
    v2::check_tagged_digest(&v4);
    v2::check_damaged_block(&v4);
    v3::generate(&root);
    v3::check_clean(&root);
    v3::check_flipped_last(&root);
    v3_delta::generate(&v4);
    v3_delta::check(&v4, PAGED_VERSIONS);
    // Nothing was written under the committed fixtures.
    assert!(!committed().join("generated").exists());
}

/// Writes the fixtures of every version into `RUNLOG_FIXTURES_OUT` (a directory
/// that must not exist yet), for a new format version to copy in by hand.
#[test]
#[ignore = "writes $RUNLOG_FIXTURES_OUT; run by hand only when creating a format version"]
fn generate_fixtures() {
    let out = PathBuf::from(
        std::env::var_os("RUNLOG_FIXTURES_OUT")
            .expect("set RUNLOG_FIXTURES_OUT to a new directory"),
    );
    assert!(
        !out.exists(),
        "{} exists: the generator writes only new directories",
        out.display()
    );
    assert!(
        !out.starts_with(committed()),
        "the generator never writes under tests/fixtures"
    );
    generate_v1(&out);
    v2::generate(&out.join("v4"));
    v3::generate(&out);
    v3_delta::generate(&out.join("v4"));
    eprintln!("fixtures written under {}", out.display());
}

fn check_clean_v1(root: &Path) {
    for codec in codecs() {
        let (_t, dir) = copy(root, codec, "clean");
        assert!(
            Reader::new(&RealFs, &dir)
                .verify()
                .unwrap()
                .integrity
                .is_clean(),
            "{:?}",
            Reader::new(&RealFs, &dir).verify().unwrap().integrity
        );
        let (st, _) = Reader::new(&RealFs, &dir).state::<Ledger>().unwrap();
        assert_eq!(st, expected(RECORDS), "{codec:?}");
        let s = Store::<Ledger>::open(&dir, opts(codec)).unwrap();
        assert_eq!(s.codec(), codec);
        assert_eq!(s.read(|st| st.clone()), expected(RECORDS), "{codec:?}");
        assert_eq!(s.recovery().snapshot_seq, Some(SNAP_AT));
        assert_eq!(s.recovery().records_replayed, RECORDS - SNAP_AT);
        assert_eq!(s.append(&entry(RECORDS + 1, 0)).unwrap(), RECORDS + 1);
    }
}

fn check_torn_tail_v1(root: &Path) {
    for codec in codecs() {
        let (_t, dir) = copy(root, codec, "torn_tail");
        let v = Reader::new(&RealFs, &dir).verify().unwrap();
        assert!(
            matches!(v.integrity, Integrity::TornTail { .. }),
            "{codec:?}: {v:?}"
        );
        let s = Store::<Ledger>::open(&dir, opts(codec)).unwrap();
        assert_eq!(s.read(|st| st.clone()), expected(RECORDS), "{codec:?}");
        let torn = s.recovery().torn_tail.clone().unwrap();
        assert_eq!(torn.path, dir.join(LAST_SEG));
        let clean_len = std::fs::metadata(fixture(root, codec, "clean").join(LAST_SEG))
            .unwrap()
            .len();
        assert_eq!(torn.offset, clean_len, "{codec:?}");
        assert_eq!(s.append(&entry(RECORDS + 1, 0)).unwrap(), RECORDS + 1);
    }
}

fn check_corrupt_mid_v1(root: &Path) {
    for codec in codecs() {
        let (_t, dir) = copy(root, codec, "corrupt_mid");
        let before = dir_bytes(&dir);
        match Store::<Ledger>::open(&dir, opts(codec)) {
            Err(Error::Corrupt {
                path, offset, seq, ..
            }) => {
                assert_eq!(path, dir.join(LAST_SEG), "{codec:?}");
                assert_eq!(offset, Some(damaged_offset(codec)), "{codec:?}");
                assert_eq!(seq, Some(DAMAGED), "{codec:?}");
            }
            Err(e) => panic!("{codec:?}: {e}"),
            Ok(_) => panic!("{codec:?}: opened a corrupt store"),
        }
        // Taking the writer lock creates LOCK; every other byte is untouched.
        let after: Vec<_> = dir_bytes(&dir)
            .into_iter()
            .filter(|f| f.0 != "LOCK")
            .collect();
        assert_eq!(after, before);
        let v = Reader::new(&RealFs, &dir).verify().unwrap();
        assert!(
            matches!(v.integrity, Integrity::Damaged(Error::Corrupt { offset, .. }) if offset == Some(damaged_offset(codec))),
            "{codec:?}: {v:?}"
        );
    }
}

/// The files of a store written under `o`: entries 1 to `records` (entry `v`
/// padded with `pad(v)` bytes), compacted after `snap_at`, closed, its `LOCK`
/// removed (a fixture holds only what a reader needs).
fn store_files<M: Machine<Transition = Entry>>(
    o: Options,
    records: u64,
    snap_at: u64,
    pad: fn(u64) -> usize,
) -> Vec<(String, Vec<u8>)> {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("s");
    let s = Store::<M>::open(&dir, o).unwrap();
    for v in 1..=records {
        s.append(&entry(v, pad(v))).unwrap();
        if v == snap_at {
            s.compact().unwrap();
        }
    }
    drop(s);
    std::fs::remove_file(dir.join("LOCK")).unwrap();
    dir_bytes(&dir)
}

/// Writes the v1 stores under `root/v1` (new directories only).
fn generate_v1(root: &Path) {
    for codec in codecs() {
        let mut o = opts(codec);
        o.preallocate = 0; // as v1 wrote them: no preallocated tail
        let files = store_files::<Ledger>(o, RECORDS, SNAP_AT, pad);
        let write =
            |case: &str, files: &[(String, Vec<u8>)]| write_new(&fixture(root, codec, case), files);
        write("clean", &files);
        // Torn tail: the first half of a record 13 appended to the last segment.
        let mut torn = files.clone();
        let mut rec = Vec::new();
        let mut p = Vec::new();
        codec.encode(&entry(RECORDS + 1, 3), &mut p).unwrap();
        runlog::engine::frame::encode_record(codec, RECORDS + 1, RECORDS, &p, &mut rec);
        let last = torn.iter_mut().find(|f| f.0 == LAST_SEG).unwrap();
        last.1.extend_from_slice(&rec[..rec.len() / 2]);
        write("torn_tail", &torn);
        // Corrupt: one byte in the middle of record DAMAGED flipped.
        let mut bad = files.clone();
        let last = bad.iter_mut().find(|f| f.0 == LAST_SEG).unwrap();
        let bounds = record_bounds(&last.1);
        let i = (DAMAGED - SNAP_AT - 1) as usize;
        let mid = (bounds[i] + bounds[i + 1]) / 2;
        last.1[mid as usize] ^= 0x20;
        assert_eq!(
            bounds[i],
            damaged_offset(codec),
            "{codec:?}: record {DAMAGED}"
        );
        write("corrupt_mid", &bad);
    }
}

mod v2 {
    use super::common::keyed::{Tab, TabModel, tab_model, tab_observe};
    use super::common::*;
    use super::{committed, copy_store, store_files, write_new};
    use runlog::engine::{Codec, Error, Integrity, Key, Keyed, Reader, RealFs, Store};
    use std::path::{Path, PathBuf};

    /// The table's seq, and the transitions in all.
    const SNAP_AT: u64 = 100;
    const RECORDS: u64 = 120;
    const TABLE: &str = "snap-00000000000000000100.snap";
    /// Where table block 0 starts (after the 32-byte table header, §11).
    const BLOCK0_AT: u64 = 32;
    /// The byte of block 0 that `damaged_block` flips.
    const FLIPPED_AT: usize = 1000;

    fn key() -> Key {
        Key::from_bytes([0x5a; 32])
    }

    /// Pads of 0..320 bytes: the table spans two 4 KiB blocks.
    fn pad(v: u64) -> usize {
        (v * 7 % 41) as usize * 8
    }

    fn expected() -> TabModel {
        let h: Vec<(u64, usize)> = (1..=RECORDS).map(|v| (v, pad(v))).collect();
        tab_model(&h)
    }

    /// `root`: the version's directory (`tests/fixtures/v2`, or `v4` for the
    /// same stores written with paged tables).
    fn fixture(root: &Path, codec: Codec, case: &str) -> PathBuf {
        root.join(codec.name()).join(case)
    }

    fn copy(root: &Path, codec: Codec, case: &str) -> (tempfile::TempDir, PathBuf) {
        copy_store(&fixture(root, codec, case))
    }

    type KStore = Store<Keyed<Tab>>;

    #[test]
    fn clean_v2_keyed_store_opens_to_the_model_by_lookup_and_iteration() {
        check_clean(&committed().join("v2"));
    }

    #[test]
    fn tagged_digest_v2_store_opens_only_with_its_key() {
        check_tagged_digest(&committed().join("v2"));
    }

    #[test]
    fn damaged_block_v2_store_is_refused_naming_the_table_and_block() {
        check_damaged_block(&committed().join("v2"));
    }

    /// The same stores with paged tables (table version 4, FORMAT.md §11.8),
    /// committed in tests/fixtures/v4.
    #[test]
    fn clean_v4_keyed_store_with_a_paged_table_opens_to_the_model() {
        check_clean(&committed().join("v4"));
    }

    #[test]
    fn tagged_digest_v4_store_with_a_paged_table_opens_only_with_its_key() {
        check_tagged_digest(&committed().join("v4"));
    }

    #[test]
    fn damaged_block_v4_store_with_a_paged_table_is_refused_naming_the_block() {
        check_damaged_block(&committed().join("v4"));
    }

    pub(super) fn check_clean(root: &Path) {
        for codec in codecs() {
            let (_t, dir) = copy(root, codec, "clean");
            assert_eq!(&std::fs::read(dir.join(TABLE)).unwrap()[..8], b"RUNLOGtb");
            assert!(
                Reader::new(&RealFs, &dir)
                    .verify()
                    .unwrap()
                    .integrity
                    .is_clean(),
                "{:?}",
                Reader::new(&RealFs, &dir).verify().unwrap().integrity
            );
            let (st, _) = Reader::new(&RealFs, &dir).state::<Keyed<Tab>>().unwrap();
            assert_eq!(tab_observe(&st).unwrap(), expected(), "{codec:?}");
            let s = KStore::open(&dir, opts(codec)).unwrap();
            assert_eq!(s.codec(), codec);
            assert_eq!(s.recovery().snapshot_seq, Some(SNAP_AT));
            assert_eq!(s.recovery().records_replayed, RECORDS - SNAP_AT);
            let want = expected();
            s.read(|st| {
                for (k, v) in &want.map {
                    assert_eq!(st.get(k).unwrap().as_ref(), Some(v), "{codec:?} {k}");
                }
            });
            assert_eq!(s.read(tab_observe).unwrap(), want, "{codec:?}");
            assert_eq!(s.append(&entry(RECORDS + 1, 0)).unwrap(), RECORDS + 1);
            // Its next compaction writes a table again, over the fixture's.
            s.compact().unwrap();
            drop(s);
            let s = KStore::open(&dir, opts(codec)).unwrap();
            assert_eq!(s.recovery().snapshot_seq, Some(RECORDS + 1));
            assert_eq!(s.read(|st| st.header().applied), RECORDS + 1);
        }
    }

    pub(super) fn check_tagged_digest(root: &Path) {
        for codec in codecs() {
            let (_t, dir) = copy(root, codec, "tagged_digest");
            let mut o = opts(codec);
            o.key = Some(key());
            let s = KStore::open(&dir, o.clone()).unwrap();
            assert_eq!(s.recovery().snapshot_seq, Some(SNAP_AT));
            assert_eq!(s.read(tab_observe).unwrap(), expected(), "{codec:?}");
            drop(s);
            o.key = Some(Key::from_bytes([0x11; 32]));
            // The committed v2 fixtures predate the key check (FORMAT.md §10.6):
            // another key is caught by the tags (Tampered). A store written by
            // this build carries the check and refuses another key at once (Key).
            match KStore::open(&dir, o) {
                Err(Error::Tampered { .. } | Error::Key { .. }) => {}
                Err(e) => panic!("{codec:?}: another key: {e}"),
                Ok(_) => panic!("{codec:?}: opened with another key"),
            }
        }
    }

    pub(super) fn check_damaged_block(root: &Path) {
        for codec in codecs() {
            let (_t, dir) = copy(root, codec, "damaged_block");
            let before = dir_bytes(&dir);
            let table = dir.join(TABLE);
            match KStore::open(&dir, opts(codec)) {
                Err(e) => {
                    assert!(e.is_corrupt(), "{codec:?}: {e}");
                    let msg = e.to_string();
                    assert!(msg.contains(&table.display().to_string()), "{msg}");
                    assert!(msg.contains("table block 0"), "{msg}");
                }
                Ok(_) => panic!("{codec:?}: opened with a damaged block under its tail"),
            }
            let after: Vec<_> = dir_bytes(&dir)
                .into_iter()
                .filter(|f| f.0 != "LOCK")
                .collect();
            assert_eq!(after, before, "{codec:?}: nothing modified");
            match Reader::new(&RealFs, &dir).verify().unwrap().integrity {
                Integrity::Damaged(Error::Corrupt { path, offset, .. }) => {
                    assert_eq!(path, table, "{codec:?}");
                    assert_eq!(offset, Some(BLOCK0_AT), "{codec:?}");
                }
                i => panic!("{codec:?}: verify says {i:?}"),
            }
        }
    }

    /// Writes the stores under `root` (new directories only): `v2`'s layout,
    /// with this build's tables.
    pub(super) fn generate(root: &Path) {
        for codec in codecs() {
            for tagged in [false, true] {
                let mut o = opts(codec);
                o.preallocate = 0; // small files to commit
                if tagged {
                    o.key = Some(key());
                }
                let files = store_files::<Keyed<Tab>>(o, RECORDS, SNAP_AT, pad);
                let write = |case: &str, files: &[(String, Vec<u8>)]| {
                    write_new(&fixture(root, codec, case), files)
                };
                if tagged {
                    write("tagged_digest", &files);
                    continue;
                }
                write("clean", &files);
                let mut bad = files.clone();
                let table = bad.iter_mut().find(|f| f.0 == TABLE).unwrap();
                table.1[FLIPPED_AT] ^= 0x20;
                write("damaged_block", &bad);
            }
        }
    }
}

/// Format v3 (the durability mark, FORMAT.md §5.7): committed stores in
/// tests/fixtures/v3/{binary,jsonl}/{clean,flipped_last}, each written by
/// eight one-shot writers (an open, one append, a close), with the `DURABLE`
/// file the last one left. The clean one opens to the eight values with every
/// record proven (its mark names seq 8); in the other, the last record's middle
/// byte is flipped, and the open, the read-only open and `verify` refuse it as
/// corruption at that record's offset, changing nothing: an acknowledged
/// record is never taken for a torn tail.
mod v3 {
    use super::*;
    use runlog::engine::mark::decode_mark;
    use runlog::engine::scan::scan_segment;

    const VALUES: u64 = 8;
    const SEG: &str = "seg-00000000000000000001.log";

    fn fixture(root: &Path, codec: Codec, case: &str) -> PathBuf {
        root.join("v3").join(codec.name()).join(case)
    }

    fn starts(seg: &[u8]) -> Vec<u64> {
        let mut v = vec![];
        scan_segment::<()>(seg, |_, _, off| {
            v.push(off);
            Ok(())
        })
        .unwrap();
        v
    }

    pub fn generate(root: &Path) {
        for codec in codecs() {
            let t = tempfile::tempdir().unwrap();
            let dir = t.path().join("s");
            for v in 1..=VALUES {
                let o = Options {
                    create: v == 1,
                    preallocate: 0,
                    ..opts(codec)
                };
                let s = Store::<Ledger>::open(&dir, o).unwrap();
                s.append(&entry(v, pad(v))).unwrap();
            }
            let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap())
                .map(|e| e.file_name().into_string().unwrap())
                .filter(|n| n != "LOCK")
                .map(|n| {
                    let b = std::fs::read(dir.join(&n)).unwrap();
                    (n, b)
                })
                .collect();
            files.sort();
            write_new(&fixture(root, codec, "clean"), &files);
            let seg = files.iter_mut().find(|f| f.0 == SEG).unwrap();
            let last = *starts(&seg.1).last().unwrap() as usize;
            let mid = (last + seg.1.len()) / 2;
            seg.1[mid] ^= 0x20;
            write_new(&fixture(root, codec, "flipped_last"), &files);
        }
    }

    pub fn check_clean(root: &Path) {
        for codec in codecs() {
            let (_t, dir) = copy_store(&fixture(root, codec, "clean"));
            let mark = decode_mark(&std::fs::read(dir.join("DURABLE")).unwrap()).unwrap();
            assert_eq!(mark.seq, VALUES, "{codec:?}");
            assert!(
                Reader::new(&RealFs, &dir)
                    .verify()
                    .unwrap()
                    .integrity
                    .is_clean(),
                "{codec:?}"
            );
            let (st, r) = Reader::new(&RealFs, &dir).state::<Ledger>().unwrap();
            assert_eq!(st.values, (1..=VALUES).collect::<Vec<_>>(), "{codec:?}");
            assert_eq!(r.durable_mark, Some(VALUES), "{codec:?}");
            let s = Store::<Ledger>::open(&dir, opts(codec)).unwrap();
            assert_eq!(s.append(&entry(9, 0)).unwrap(), VALUES + 1, "{codec:?}");
        }
    }

    pub fn check_flipped_last(root: &Path) {
        for codec in codecs() {
            let (_t, dir) = copy_store(&fixture(root, codec, "flipped_last"));
            // Every file but `LOCK`, which the refused writer's open creates.
            let files = || {
                let mut v = dir_bytes(&dir);
                v.retain(|f| f.0 != "LOCK");
                v
            };
            let before = files();
            let seg = std::fs::read(dir.join(SEG)).unwrap();
            // The scan of the damaged segment stops at the flipped record: its
            // start is where the valid prefix ends, after 7 whole records.
            assert_eq!(starts(&seg).len() as u64, VALUES - 1, "{codec:?}");
            let valid_end = scan_segment::<()>(&seg, |_, _, _| Ok(()))
                .unwrap()
                .valid_len;
            let at_damage = |e: &Error| {
                matches!(e, Error::Corrupt { path, offset, .. }
                    if path.ends_with(SEG) && *offset == Some(valid_end))
            };
            let e = Store::<Ledger>::open(&dir, opts(codec))
                .err()
                .expect("refused");
            assert!(at_damage(&e), "{codec:?}: {e}");
            let e = Reader::new(&RealFs, &dir)
                .state::<Ledger>()
                .expect_err("refused");
            assert!(at_damage(&e), "{codec:?}: {e}");
            let v = Reader::new(&RealFs, &dir).verify().unwrap();
            assert!(
                matches!(&v.integrity, Integrity::Damaged(e) if at_damage(e)),
                "{codec:?}: {:?}",
                v.integrity
            );
            assert_eq!(files(), before, "{codec:?}: a refused open wrote");
        }
    }

    #[test]
    fn clean_v3_store_opens_with_every_record_proven() {
        check_clean(&committed());
    }

    #[test]
    fn flipped_last_record_of_a_v3_store_is_corruption_not_a_torn_tail() {
        check_flipped_last(&committed());
    }
}

/// Format v3's delta tables (FORMAT.md §14): a keyed store with a full table
/// at 30, a delta at 50 over it, and a delta at 70 that absorbed the one at 50
/// (a tier merge: its parent is 30; 50 stays as the previous chain), and a
/// log tail.
mod v3_delta {
    use super::common::keyed::{Tab, TabModel, tab_model, tab_observe};
    use super::common::*;
    use super::{committed, copy_store, write_new};
    use runlog::engine::{Codec, Keyed, Options, Reader, RealFs, Store};
    use std::path::{Path, PathBuf};

    const RECORDS: u64 = 90;

    fn pad(v: u64) -> usize {
        (v * 5 % 37) as usize * 8
    }

    fn expected() -> TabModel {
        let h: Vec<(u64, usize)> = (1..=RECORDS).map(|v| (v, pad(v))).collect();
        tab_model(&h)
    }

    /// `root`: the version's directory (`tests/fixtures/v3`, or `v4` for the
    /// same store written with paged tables).
    fn fixture(root: &Path, codec: Codec) -> PathBuf {
        root.join(codec.name()).join("delta")
    }

    pub fn generate(root: &Path) {
        for codec in codecs() {
            let t = tempfile::tempdir().unwrap();
            let dir = t.path().join("s");
            let o = Options {
                create: true,
                preallocate: 0,
                ..opts(codec)
            };
            let s = Store::<Keyed<Tab>>::open(&dir, o).unwrap();
            for v in 1..=RECORDS {
                s.append(&entry(v, pad(v))).unwrap();
                match v {
                    30 => drop(s.compact().unwrap()),
                    50 | 70 => drop(s.flush().unwrap()),
                    _ => {}
                }
            }
            drop(s);
            let mut files = dir_bytes(&dir);
            files.retain(|f| f.0 != "LOCK");
            write_new(&fixture(root, codec), &files);
        }
    }

    /// `versions`: the table versions of the full table and the two deltas.
    pub fn check(root: &Path, versions: (u16, u16, u16)) {
        for codec in codecs() {
            let (_t, dir) = copy_store(&fixture(root, codec));
            let version = |seq: u64| {
                let b = std::fs::read(dir.join(format!("snap-{seq:020}.snap"))).unwrap();
                u16::from_le_bytes([b[8], b[9]])
            };
            assert_eq!((version(30), version(50), version(70)), versions);
            let b = std::fs::read(dir.join(format!("snap-{:020}.snap", 70))).unwrap();
            assert_eq!(u64::from_le_bytes(b[20..28].try_into().unwrap()), 30);
            assert!(
                Reader::new(&RealFs, &dir)
                    .verify()
                    .unwrap()
                    .integrity
                    .is_clean(),
                "{codec:?}"
            );
            let (st, r) = Reader::new(&RealFs, &dir).state::<Keyed<Tab>>().unwrap();
            assert_eq!(r.snapshot_seq, Some(70), "{codec:?}");
            assert_eq!(r.records_replayed, RECORDS - 70, "{codec:?}");
            assert_eq!(st.deltas(), 1, "{codec:?}");
            assert_eq!(tab_observe(&st).unwrap(), expected(), "{codec:?}");
            let s = Store::<Keyed<Tab>>::open(&dir, opts(codec)).unwrap();
            assert_eq!(s.append(&entry(RECORDS + 1, 0)).unwrap(), RECORDS + 1);
        }
    }

    #[test]
    fn v3_store_with_delta_tables_opens_to_the_model_reading_only_its_tail() {
        check(&committed().join("v3"), (2, 3, 3));
    }

    /// The same store with paged tables (versions 4 and 5, FORMAT.md §11.8),
    /// committed in tests/fixtures/v4.
    #[test]
    fn v4_store_with_paged_delta_tables_opens_to_the_model_reading_only_its_tail() {
        check(&committed().join("v4"), super::PAGED_VERSIONS);
    }
}
