//! Proves damage to a table snapshot is never silent: for every bit flipped,
//! every truncation and appended garbage, opening fails naming the file, or
//! every lookup and the iteration return the written values or an error naming
//! the file and an offset (and `verify` reports it), and every lookup whose
//! path (index pages, block) avoids the damage returns the written value; in
//! a tagged table a change with checksums recomputed is `Tampered`. Each sweep
//! runs on full and delta tables, with the paged index of table versions 4
//! and 5 (FORMAT.md §11.8, pages of two entries: several pages) and with the
//! unpaged one of versions 2 and 3. Also reads a writer's file by FORMAT.md
//! §11's byte map alone.
use runlog::engine::format::masked_crc;
use runlog::engine::table::{
    TABLE_CRC_LEN, TABLE_DIR_ENTRY_LEN, TABLE_ENTRY_HEADER_LEN, TABLE_FOOTER_LEN,
    TABLE_FOOTER_MAGIC, TABLE_HEADER_LEN, TABLE_INDEX_ENTRY_FIXED_LEN, TABLE_MAGIC, Table,
    TableSpec, TableWriter,
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
        page_entries: if paged() { PAGE_ENTRIES } else { 0 },
    };
    let mut w = TableWriter::create(vfs, Path::new("/mem"), NAME, spec).unwrap();
    for (k, v) in m {
        w.add(k, v).unwrap();
    }
    w.finish(b"the machine's header").unwrap();
    fs.get(&Path::new("/mem").join(NAME)).unwrap()
}

/// Index entries per page of the paged tables here: `model()` spans several pages.
const PAGE_ENTRIES: usize = 2;

/// Every sweep here runs on a full table and on a delta table (FORMAT.md
/// §14: the delta flag and a parent seq in the file header), each with a
/// paged index (§11.8, versions 4 and 5) and an unpaged one (versions 2 and
/// 3), chosen by these thread-locals for each pass of each test.
fn delta_parent() -> Option<u64> {
    DELTA.with(|d| d.get()).then_some(SEQ - 4)
}

fn paged() -> bool {
    PAGED.with(|d| d.get())
}

thread_local! {
    static DELTA: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static PAGED: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Runs `f` on full and delta tables, paged and unpaged.
fn full_and_delta(f: impl Fn()) {
    for paged in [true, false] {
        for delta in [false, true] {
            DELTA.with(|d| d.set(delta));
            PAGED.with(|d| d.set(paged));
            f();
        }
    }
    DELTA.with(|d| d.set(false));
    PAGED.with(|d| d.set(true));
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

/// Damage met after the open (a page or a block): the file and an offset.
fn assert_damage_at(e: &Error, what: &str) {
    assert_damage(e, what);
    match e {
        Error::Corrupt { offset, .. } | Error::Tampered { offset, .. } => {
            assert!(offset.is_some(), "{what}: no offset: {e}")
        }
        _ => unreachable!(),
    }
}

/// Where the clean table's parts are, by FORMAT.md's byte map: per block its
/// (offset, len) and last key; per page (paged tables) its file byte range and
/// the blocks it lists.
#[derive(Debug, Clone)]
struct Map {
    blocks: Vec<(usize, usize)>,
    last_keys: Vec<Vec<u8>>,
    pages: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>,
}

impl Map {
    /// The block holding `key` (the first whose last key is `key` or after).
    fn block_of(&self, key: &[u8]) -> Option<usize> {
        self.last_keys.iter().position(|l| l.as_slice() >= key)
    }

    /// The pages a lookup of `key` reads: the binary search's probes, the
    /// page found, and the previous page when its block is a page's first
    /// (the block check reads the previous block's last key).
    fn pages_read(&self, key: &[u8]) -> Vec<usize> {
        if self.pages.is_empty() {
            return Vec::new();
        }
        let last = |p: usize| &self.last_keys[self.pages[p].1.end - 1];
        let (mut lo, mut hi, mut out) = (0, self.pages.len(), Vec::new());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            out.push(mid);
            if last(mid).as_slice() < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if let Some(b) = self.block_of(key) {
            out.push(lo);
            if b > 0 && self.pages[lo].1.start == b {
                out.push(lo - 1);
            }
        }
        out
    }

    /// True when a lookup of `key` reads no byte of `damaged` (a file range).
    fn lookup_avoids(&self, key: &[u8], damaged: usize) -> bool {
        let hit = |r: &std::ops::Range<usize>| r.contains(&damaged);
        if self.pages_read(key).iter().any(|&p| hit(&self.pages[p].0)) {
            return false;
        }
        match self.block_of(key) {
            Some(b) => {
                let (off, len) = self.blocks[b];
                !(off..off + len).contains(&damaged)
            }
            None => true,
        }
    }

    /// True when `damaged` is inside a data block or an index page.
    fn lazily_checked(&self, damaged: usize) -> bool {
        self.blocks
            .iter()
            .any(|&(o, l)| (o..o + l).contains(&damaged))
            || self.pages.iter().any(|p| p.0.contains(&damaged))
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

/// `damaged`: the flipped byte's offset and the clean table's map, when
/// lookups that avoid it must succeed.
fn check_damaged(
    bytes: Vec<u8>,
    tagged: bool,
    what: &str,
    out: &mut Outcomes,
    damaged: Option<(usize, &Map)>,
) {
    let t = match open(bytes, tagged) {
        Err(e) => {
            assert_damage(&e, what);
            if let Some((at, map)) = damaged {
                assert!(
                    !map.lazily_checked(at),
                    "{what}: damage in a page or block refused at open: {e}"
                );
            }
            out.refused_at_open += 1;
            return;
        }
        Ok(t) => t,
    };
    let m = model();
    let absent: [&[u8]; 4] = [b"unit-", b"unit-05x", b"zzz", b""];
    for (k, v) in &m {
        match t.get(k) {
            Ok(Some(got)) => assert_eq!(got, v.as_slice(), "{what}: wrong value for {k:?}"),
            Ok(None) => panic!("{what}: key {k:?} silently missing"),
            Err(e) => {
                assert_damage_at(&e, what);
                if let Some((at, map)) = damaged {
                    assert!(!map.lookup_avoids(k, at), "{what}: untouched {k:?}: {e}");
                }
                out.lookups_failed += 1;
            }
        }
    }
    for absent in absent {
        match t.get(absent) {
            Ok(None) => {}
            Ok(Some(v)) => panic!("{what}: absent key {absent:?} found with {v:?}"),
            Err(e) => {
                assert_damage_at(&e, what);
                if let Some((at, map)) = damaged {
                    assert!(
                        !map.lookup_avoids(absent, at),
                        "{what}: untouched {absent:?}: {e}"
                    );
                }
            }
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
                assert_damage_at(&e, what);
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
    assert_damage_at(&e, what);
    out.refused_later += 1;
}

#[test]
fn every_bit_flipped_is_detected() {
    full_and_delta(|| {
        for tagged in [false, true] {
            let clean = table_bytes(tagged);
            let t = open(clean.clone(), tagged).unwrap();
            assert!(t.blocks() >= 4, "{} blocks", t.blocks());
            let map = parse_by_the_document(&clean, tagged);
            if paged() {
                assert!(t.index_pages() >= 3, "{} pages", t.index_pages());
            }
            let mut out = Outcomes::default();
            for i in 0..clean.len() {
                for bit in 0..8 {
                    let mut b = clean.clone();
                    b[i] ^= 1 << bit;
                    check_damaged(
                        b,
                        tagged,
                        &format!(
                            "paged={} delta={:?} tagged={tagged} byte {i} bit {bit}",
                            paged(),
                            delta_parent()
                        ),
                        &mut out,
                        Some((i, &map)),
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

/// The file read with only FORMAT.md §11's byte map (§11.8 for a paged index).
fn parse_by_the_document(b: &[u8], tagged: bool) -> Map {
    let version = match (paged(), delta_parent()) {
        (false, None) => 2,
        (false, Some(_)) => 3,
        (true, None) => 4,
        (true, Some(_)) => 5,
    };
    assert_eq!(b[..8], TABLE_MAGIC);
    assert_eq!(u16_at(b, 8), version);
    assert_eq!(b[11] & 1, u8::from(tagged));
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
    let index_end = index_at + index_len;
    // Per page: its position in the index and its entries; an unpaged index
    // is one run of entries.
    let mut runs: Vec<(usize, usize, usize)> = Vec::new();
    if paged() {
        let count = u32_at(b, index_end - 8);
        let dlen = TABLE_DIR_ENTRY_LEN + if tagged { 16 } else { 0 };
        let dir_at = index_end - 8 - count * dlen;
        assert_eq!(
            u32_at(b, index_end - 4) as u32,
            masked_crc(&[&b[dir_at..index_end - 4]])
        );
        for p in 0..count {
            let d = &b[dir_at + p * dlen..][..dlen];
            let at = u32_at(d, 0);
            let end = if p + 1 < count {
                u32_at(b, dir_at + (p + 1) * dlen)
            } else {
                dir_at - index_at
            };
            let page = &b[index_at + at..index_at + end];
            assert_eq!(u32_at(d, 12) as u32, masked_crc(&[page]), "page {p} crc");
            runs.push((at, end, u32_at(d, 8)));
        }
    } else {
        let body = &b[index_at..index_end - TABLE_CRC_LEN];
        assert_eq!(u32_at(b, index_end - 4) as u32, masked_crc(&[body]));
        runs.push((0, body.len(), usize::MAX));
    }
    let (mut out, mut n, mut last_keys, mut pages) = (Vec::new(), 0, Vec::new(), Vec::new());
    let mut all = Model::new();
    for (start, end, count) in runs {
        let index = &b[index_at + start..index_at + end];
        let first = out.len();
        let mut pos = 0;
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
            last_keys.push(last.to_vec());
            n += cnt;
        }
        if count != usize::MAX {
            assert_eq!(out.len() - first, count);
            pages.push((index_at + start..index_at + end, first..out.len()));
        }
    }
    assert_eq!((n, out.len()), (entries, blocks));
    assert_eq!(all, model());
    assert_eq!(out[0].0, TABLE_HEADER_LEN);
    Map {
        blocks: out,
        last_keys,
        pages,
    }
}

#[test]
fn the_byte_map_in_format_md_reads_a_writers_file() {
    full_and_delta(|| {
        for tagged in [false, true] {
            let b = table_bytes(tagged);
            let map = parse_by_the_document(&b, tagged);
            assert!(map.blocks.len() >= 4);
            assert_eq!(map.pages.len() >= 3, paged());
        }
    });
}

#[test]
fn tagged_changes_with_checksums_recomputed_are_tampering() {
    let clean = table_bytes(true);
    let blocks = parse_by_the_document(&clean, true).blocks;
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
    let blocks = parse_by_the_document(&clean, false).blocks;
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
    // Large enough to be mapped: RealFs reads a file of at most 64 KiB into
    // memory, where a change to the file after the open cannot reach it.
    let m: Model = (0u32..2000)
        .map(|i| (format!("unit-{i:05}").into_bytes(), vec![i as u8; 40]))
        .collect();
    let bytes = table_of(&m, false);
    assert!(bytes.len() > 64 << 10, "{} bytes: mapped", bytes.len());
    std::fs::write(&file, bytes).unwrap();
    let t = Table::open(&runlog::engine::RealFs, &file, None).unwrap();
    assert!(t.blocks() > 2, "the model spans several blocks");
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
