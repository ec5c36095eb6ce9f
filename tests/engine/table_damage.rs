//! Proves damage to a table snapshot is never silent: for every bit flipped,
//! every truncation and appended garbage, opening fails naming the file, or
//! every lookup and the iteration return the written values or an error (and
//! `verify` reports it); in a tagged table a change with checksums recomputed is
//! `Tampered`. Also reads a writer's file by FORMAT.md §11's byte map alone.
use runlog::engine::format::masked_crc;
use runlog::engine::table::{
    TABLE_CRC_LEN, TABLE_ENTRY_HEADER_LEN, TABLE_FOOTER_LEN, TABLE_FOOTER_MAGIC, TABLE_HEADER_LEN,
    TABLE_INDEX_ENTRY_FIXED_LEN, TABLE_MAGIC, Table, TableSpec, TableWriter,
};
use runlog::engine::tag::{KEY_LEN, Key, StoreId};
use runlog::engine::{Codec, Error, Vfs};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common;
use common::mem_fs;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const NAME: &str = "snap-00000000000000000042.snap";
const STORE_ID: StoreId = [0x3c; 16];
const SEQ: u64 = 42;

fn key() -> Key {
    Key::from_bytes([9; KEY_LEN])
}

fn model() -> Model {
    (0u8..24)
        .map(|i| {
            (
                format!("unit-{i:02}").into_bytes(),
                vec![i; usize::from(i % 5) * 3],
            )
        })
        .collect()
}

/// A multi-block table of `model()` (64-byte blocks), as bytes.
fn table_bytes(tagged: bool) -> Vec<u8> {
    table_of(&model(), tagged)
}

fn table_of(m: &Model, tagged: bool) -> Vec<u8> {
    let fs = mem_fs();
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    let spec = TableSpec {
        codec: Codec::Jsonl,
        seq: SEQ,
        tagging: tagged.then(|| (key(), STORE_ID)),
        block_bytes: 64,
        parent: delta_parent(),
    };
    let mut w = TableWriter::create(vfs, Path::new("/mem"), NAME, spec).unwrap();
    for (k, v) in m {
        w.add(k, v).unwrap();
    }
    w.finish(b"the machine's header").unwrap();
    fs.get(&Path::new("/mem").join(NAME)).unwrap()
}

/// Every sweep here runs on a full table and again on a delta table (FORMAT.md
/// §14: version 3, the delta flag and a parent seq in the file header), chosen
/// by `RUNLOG_TABLE_DAMAGE_DELTA` for the second pass of each test.
fn delta_parent() -> Option<u64> {
    DELTA.with(|d| d.get()).then_some(SEQ - 4)
}

thread_local! {
    static DELTA: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` on a full table, then on a delta.
fn full_and_delta(f: impl Fn()) {
    for delta in [false, true] {
        DELTA.with(|d| d.set(delta));
        f();
    }
    DELTA.with(|d| d.set(false));
}

fn path() -> PathBuf {
    PathBuf::from("/mem").join(NAME)
}

fn open(bytes: Vec<u8>, tagged: bool) -> Result<Table, Error> {
    let k = key();
    Table::from_bytes(path(), Box::new(bytes), tagged.then_some(&k))
}

/// Damage reported as such, naming the file.
fn assert_damage(e: &Error, what: &str) {
    match e {
        Error::Corrupt { path: p, .. } | Error::Tampered { path: p, .. } => {
            assert_eq!(*p, path(), "{what}: {e}")
        }
        other => panic!("{what}: not reported as damage: {other}"),
    }
}

/// What one damaged file did: refused at open, or opened and then refused by
/// `verify` (with every lookup and the iteration right or an error).
#[derive(Debug, Default)]
struct Outcomes {
    refused_at_open: usize,
    refused_later: usize,
    lookups_failed: usize,
}

fn check_damaged(bytes: Vec<u8>, tagged: bool, what: &str, out: &mut Outcomes) {
    let t = match open(bytes, tagged) {
        Err(e) => {
            assert_damage(&e, what);
            out.refused_at_open += 1;
            return;
        }
        Ok(t) => t,
    };
    let m = model();
    for (k, v) in &m {
        match t.get(k) {
            Ok(Some(got)) => assert_eq!(got, v.as_slice(), "{what}: wrong value for {k:?}"),
            Ok(None) => panic!("{what}: key {k:?} silently missing"),
            Err(e) => {
                assert_damage(&e, what);
                out.lookups_failed += 1;
            }
        }
    }
    for absent in [&b"unit-"[..], b"unit-05x", b"zzz", b""] {
        match t.get(absent) {
            Ok(None) => {}
            Ok(Some(v)) => panic!("{what}: absent key {absent:?} found with {v:?}"),
            Err(e) => assert_damage(&e, what),
        }
    }
    let mut want = m.iter();
    let mut errors = 0;
    for r in t.iter() {
        match r {
            Ok((k, v)) => {
                let (wk, wv) = want
                    .next()
                    .unwrap_or_else(|| panic!("{what}: extra entry {k:?}"));
                assert_eq!((k, v), (wk.as_slice(), wv.as_slice()), "{what}: iter");
            }
            Err(e) => {
                assert_damage(&e, what);
                errors += 1;
            }
        }
    }
    assert!(errors <= 1, "{what}: iter yielded {errors} errors");
    if errors == 0 {
        assert!(
            want.next().is_none(),
            "{what}: iter ended early without an error"
        );
    }
    // Every byte is covered by a checksum: the damage is found somewhere.
    let e = t.verify().expect_err(what);
    assert_damage(&e, what);
    out.refused_later += 1;
}

#[test]
fn every_bit_flipped_is_detected() {
    full_and_delta(|| {
        for tagged in [false, true] {
            let clean = table_bytes(tagged);
            let t = open(clean.clone(), tagged).unwrap();
            assert!(t.blocks() >= 4, "{} blocks", t.blocks());
            let mut out = Outcomes::default();
            for i in 0..clean.len() {
                for bit in 0..8 {
                    let mut b = clean.clone();
                    b[i] ^= 1 << bit;
                    check_damaged(
                        b,
                        tagged,
                        &format!("tagged={tagged} byte {i} bit {bit}"),
                        &mut out,
                    );
                }
            }
            // Both kinds of detection happened: data blocks are checked lazily.
            assert!(out.refused_at_open > 0 && out.refused_later > 0, "{out:?}");
            assert!(out.lookups_failed > 0, "{out:?}");
            assert_eq!(out.refused_at_open + out.refused_later, clean.len() * 8);
        }
    });
}

#[test]
fn every_truncation_fails_at_open() {
    full_and_delta(|| {
        for tagged in [false, true] {
            let clean = table_bytes(tagged);
            for len in 0..clean.len() {
                let e = open(clean[..len].to_vec(), tagged).expect_err("truncated table opened");
                assert!(
                    matches!(&e, Error::Corrupt { path: p, .. } if *p == path()),
                    "len {len}: {e}"
                );
            }
        }
    });
}

#[test]
fn appended_garbage_fails_at_open() {
    full_and_delta(|| {
        for tagged in [false, true] {
            let clean = table_bytes(tagged);
            let footer = clean[clean.len() - TABLE_FOOTER_LEN..].to_vec();
            let tails: Vec<Vec<u8>> = (1..=2 * TABLE_FOOTER_LEN)
                .map(|n| vec![0u8; n])
                .chain((1..=2 * TABLE_FOOTER_LEN).map(|n| vec![0xa5; n]))
                // A second copy of the valid footer: its offsets no longer fit.
                .chain([footer.clone(), [&[0u8][..], &footer].concat()])
                .collect();
            for tail in tails {
                let b = [&clean[..], &tail].concat();
                let e = open(b, tagged).expect_err("table with garbage opened");
                assert!(
                    matches!(&e, Error::Corrupt { path: p, .. } if *p == path()),
                    "{} bytes appended: {e}",
                    tail.len()
                );
            }
        }
    });
}

fn u16_at(b: &[u8], at: usize) -> usize {
    usize::from(u16::from_le_bytes(b[at..at + 2].try_into().unwrap()))
}
fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize
}
fn u64_at(b: &[u8], at: usize) -> usize {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize
}

/// The file read with only FORMAT.md §11's byte map: (block offset, block len) per block.
fn parse_by_the_document(b: &[u8], tagged: bool) -> Vec<(usize, usize)> {
    assert_eq!(b[..8], TABLE_MAGIC);
    assert_eq!(u16_at(b, 8), 2);
    assert_eq!(b[11], u8::from(tagged));
    assert_eq!(u64_at(b, 12), SEQ as usize);
    assert_eq!(u32_at(b, 28) as u32, masked_crc(&[&b[..28]]));
    let f = b.len() - TABLE_FOOTER_LEN;
    assert_eq!(b[f..f + 8], TABLE_FOOTER_MAGIC);
    let (entries, blocks) = (u64_at(b, f + 8), u64_at(b, f + 16));
    let (index_at, index_len) = (u64_at(b, f + 24), u32_at(b, f + 32));
    let (header_at, header_len) = (u64_at(b, f + 36), u32_at(b, f + 44));
    assert_eq!(u32_at(b, f + 80) as u32, masked_crc(&[&b[f..f + 80]]));
    assert_eq!(
        &b[header_at..header_at + header_len - 4],
        b"the machine's header"
    );
    assert_eq!(header_at + header_len, f);
    let index = &b[index_at..index_at + index_len - TABLE_CRC_LEN];
    assert_eq!(
        u32_at(b, index_at + index.len()) as u32,
        masked_crc(&[index])
    );
    let (mut pos, mut out, mut n) = (0, Vec::new(), 0);
    let mut all = Model::new();
    while pos < index.len() {
        let (off, len, cnt) = (
            u64_at(index, pos),
            u32_at(index, pos + 8),
            u32_at(index, pos + 12),
        );
        let klen = u16_at(index, pos + 16);
        let last = &index[pos + TABLE_INDEX_ENTRY_FIXED_LEN..][..klen];
        pos += TABLE_INDEX_ENTRY_FIXED_LEN + klen + if tagged { 16 } else { 0 };
        let body = &b[off..off + len - 4];
        assert_eq!(u32_at(b, off + len - 4) as u32, masked_crc(&[body]));
        let (mut at, mut k) = (0, 0);
        let mut last_seen = Vec::new();
        while at < body.len() {
            let (kl, vl) = (u16_at(body, at), u32_at(body, at + 2));
            let e = at + TABLE_ENTRY_HEADER_LEN;
            last_seen = body[e..e + kl].to_vec();
            all.insert(last_seen.clone(), body[e + kl..e + kl + vl].to_vec());
            at = e + kl + vl;
            k += 1;
        }
        assert_eq!((k, last_seen.as_slice()), (cnt, last));
        out.push((off, len));
        n += cnt;
    }
    assert_eq!((n, out.len()), (entries, blocks));
    assert_eq!(all, model());
    assert_eq!(out[0].0, TABLE_HEADER_LEN);
    out
}

#[test]
fn the_byte_map_in_format_md_reads_a_writers_file() {
    for tagged in [false, true] {
        let b = table_bytes(tagged);
        assert!(parse_by_the_document(&b, tagged).len() >= 4);
    }
}

#[test]
fn tagged_changes_with_checksums_recomputed_are_tampering() {
    let clean = table_bytes(true);
    let blocks = parse_by_the_document(&clean, true);
    // A value byte of block 1, its checksum recomputed: found at lookup.
    let (off, len) = blocks[1];
    let mut b = clean.clone();
    let klen = u16_at(&b, off);
    let vlen = u32_at(&b, off + 2);
    assert!(vlen > 0, "block 1's first value is empty; pick another");
    b[off + TABLE_ENTRY_HEADER_LEN + klen] ^= 0x01;
    let crc = masked_crc(&[&b[off..off + len - 4]]);
    b[off + len - 4..off + len].copy_from_slice(&crc.to_le_bytes());
    let t = open(b.clone(), true).expect("the block is read only at lookup");
    let first = b[off + TABLE_ENTRY_HEADER_LEN..][..klen].to_vec();
    let e = t.get(&first).unwrap_err();
    assert!(
        matches!(&e, Error::Tampered { offset, .. } if *offset == Some(off as u64)),
        "{e}"
    );
    assert!(matches!(t.verify().unwrap_err(), Error::Tampered { .. }));
    let errs: Vec<_> = t.iter().filter_map(|r| r.err()).collect();
    assert!(
        matches!(errs.as_slice(), [Error::Tampered { .. }]),
        "{errs:?}"
    );
    // The header body changed, its checksum recomputed: found at open.
    let f = clean.len() - TABLE_FOOTER_LEN;
    let (h_at, h_len) = (u64_at(&clean, f + 36), u32_at(&clean, f + 44));
    let mut h = clean.clone();
    h[h_at] ^= 0x20;
    let crc = masked_crc(&[&h[h_at..h_at + h_len - 4]]);
    h[h_at + h_len - 4..h_at + h_len].copy_from_slice(&crc.to_le_bytes());
    let e = open(h, true).unwrap_err();
    // The table's tag covers its header, index, header block and footer
    // together: no one offset is named, and no made-up one either.
    assert!(matches!(e, Error::Tampered { offset: None, .. }), "{e}");
    assert!(!e.to_string().contains("byte offset"), "{e}");
    // The seq in the file header changed, its checksum recomputed: found at open.
    let mut s = clean.clone();
    s[12] ^= 0x01;
    let crc = masked_crc(&[&s[..28]]);
    s[28..32].copy_from_slice(&crc.to_le_bytes());
    let e = open(s, true).unwrap_err();
    assert!(matches!(e, Error::Tampered { .. }), "{e}");
}

#[test]
fn tagged_blocks_swapped_are_tampering() {
    // Equal-sized entries: blocks 0 and 1 have the same length, so the swap
    // keeps every offset and checksum valid.
    let m: Model = (0..12)
        .map(|i| (format!("k{i:02}").into_bytes(), vec![i; 10]))
        .collect();
    let clean = table_of(&m, true);
    let f = clean.len() - TABLE_FOOTER_LEN;
    let index_at = u64_at(&clean, f + 24);
    let (o0, l0) = (u64_at(&clean, index_at), u32_at(&clean, index_at + 8));
    let (o1, l1) = (o0 + l0, l0);
    let mut s = clean.clone();
    s[o0..o0 + l0].copy_from_slice(&clean[o1..o1 + l1]);
    s[o1..o1 + l1].copy_from_slice(&clean[o0..o0 + l0]);
    assert_ne!(s, clean);
    let t = open(s, true).unwrap();
    let e = t.get(b"k00").unwrap_err();
    assert!(matches!(e, Error::Tampered { .. }), "{e}");
    // Untagged, the swap is caught by the key order the index records.
    let clean = table_of(&m, false);
    let mut s = clean.clone();
    s[o0..o0 + l0].copy_from_slice(&clean[o1..o1 + l1]);
    s[o1..o1 + l1].copy_from_slice(&clean[o0..o0 + l0]);
    let t = open(s, false).unwrap();
    let e = t.get(b"k00").unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }), "{e}");
}

#[test]
fn damage_names_the_part() {
    let clean = table_bytes(false);
    let blocks = parse_by_the_document(&clean, false);
    let (off, len) = blocks[2];
    let mut b = clean.clone();
    b[off + 1] ^= 0x80;
    let t = open(b, false).unwrap();
    let e = t.verify().unwrap_err();
    let want = format!("table block 2 (offset {off}, {len} bytes): checksum mismatch");
    assert!(
        matches!(&e, Error::Corrupt { offset, seq: Some(SEQ), reason, .. } if *offset == Some(off as u64) && *reason == want),
        "{e}"
    );
    let mut b = clean.clone();
    let n = b.len();
    b[n - TABLE_FOOTER_LEN] ^= 1;
    let e = open(b, false).unwrap_err();
    assert!(
        matches!(&e, Error::Corrupt { offset, reason, .. } if *offset == Some((n - TABLE_FOOTER_LEN) as u64) && reason == "table footer: bad magic"),
        "{e}"
    );
}

/// A reader checks a block the first time it enters it and remembers that it
/// passed (a table file never changes once renamed into place); `verify` does
/// not trust that memory. Damage written into the mapped file in place after
/// every block was checked by lookups is still reported by `verify`, and by
/// the lookups of a reader that opens the file afresh.
#[test]
fn verify_rechecks_blocks_that_lookups_already_checked() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(NAME);
    std::fs::write(&file, table_bytes(false)).unwrap();
    let t = Table::open(&runlog::engine::RealFs, &file, None).unwrap();
    assert!(t.blocks() > 2, "the model spans several blocks");
    let m = model();
    for (k, v) in &m {
        assert_eq!(t.get(k).unwrap(), Some(v.as_slice()));
    }
    t.verify().expect("clean before the damage");
    // One byte of block 0's first key, changed in place under the map.
    let at = TABLE_HEADER_LEN + TABLE_ENTRY_HEADER_LEN;
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.write_all_at(b"X", at as u64).unwrap();
    drop(f);
    let damaged = |e: Error| match e {
        Error::Corrupt { path, offset, .. } => {
            assert_eq!(path, file);
            assert_eq!(offset, Some(TABLE_HEADER_LEN as u64), "block 0's offset");
        }
        other => panic!("not reported as damage: {other}"),
    };
    damaged(t.verify().expect_err("verify checks every block again"));
    let fresh = Table::open(&runlog::engine::RealFs, &file, None).unwrap();
    let first = m.keys().next().unwrap();
    damaged(
        fresh
            .get(first)
            .expect_err("a new reader checks block 0 first"),
    );
}
