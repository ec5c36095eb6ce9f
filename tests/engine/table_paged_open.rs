//! Proves that opening a paged table (FORMAT.md §11.8, table versions 4 and 5)
//! reads its page directory, not its index: a table of thousands of blocks
//! whose index pages are all damaged except the few one lookup reads (the
//! binary search's probes and the page it lands on) opens, and that lookup
//! returns the written value; a lookup entering a damaged page, iteration and
//! `verify` report `Corrupt` (`Tampered` for a tagged table's page tag) naming
//! the file, `table index page <n>` and its offset. The same damage in an
//! unpaged table (versions 2 and 3, whose open walks the whole index) fails
//! the open. Every bit of the directory flipped with its CRC recomputed is
//! loud (refused at open, or reported by the page check that meets it).
use runlog::engine::format::masked_crc;
use runlog::engine::table::{
    TABLE_DIR_ENTRY_LEN, TABLE_FOOTER_LEN, TABLE_INDEX_ENTRY_FIXED_LEN, TABLE_PAGE_ENTRIES, Table,
    TableSpec, TableWriter,
};
use runlog::engine::tag::{KEY_LEN, Key};
use runlog::engine::{Codec, Error, Vfs};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::mem_fs;

const NAME: &str = "snap-00000000000000000009.snap";
const ENTRIES: usize = 20_000;

fn key() -> Key {
    Key::from_bytes([3; KEY_LEN])
}

fn entry(i: usize) -> (Vec<u8>, Vec<u8>) {
    (
        format!("u{i:010}").into_bytes(),
        format!("value of {i}").into_bytes(),
    )
}

fn write(tagged: bool, page_entries: usize) -> Vec<u8> {
    let fs = mem_fs();
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    let spec = TableSpec {
        codec: Codec::Binary,
        seq: 9,
        tagging: tagged.then(|| (key(), [1; 16])),
        block_bytes: 256,
        parent: None,
        page_entries,
    };
    let mut w = TableWriter::create(vfs, Path::new("/mem"), NAME, spec).unwrap();
    for i in 0..ENTRIES {
        let (k, v) = entry(i);
        w.add(&k, &v).unwrap();
    }
    w.finish(b"hdr").unwrap();
    fs.get(&Path::new("/mem").join(NAME)).unwrap()
}

fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize
}

/// Per page, by FORMAT.md §11.8's byte map: its file byte range and its last
/// index entry's last key.
fn pages(b: &[u8], tagged: bool) -> Vec<(std::ops::Range<usize>, Vec<u8>)> {
    let f = b.len() - TABLE_FOOTER_LEN;
    let index_at = u64::from_le_bytes(b[f + 24..f + 32].try_into().unwrap()) as usize;
    let index_end = index_at + u32_at(b, f + 32);
    let count = u32_at(b, index_end - 8);
    let dlen = TABLE_DIR_ENTRY_LEN + if tagged { 16 } else { 0 };
    let dir_at = index_end - 8 - count * dlen;
    (0..count)
        .map(|p| {
            let d = dir_at + p * dlen;
            let at = index_at + u32_at(b, d);
            let end = if p + 1 < count {
                index_at + u32_at(b, d + dlen)
            } else {
                dir_at
            };
            let last = at + u32_at(b, d + 4);
            let klen = usize::from(u16::from_le_bytes([b[last + 16], b[last + 17]]));
            let k = b[last + TABLE_INDEX_ENTRY_FIXED_LEN..][..klen].to_vec();
            (at..end, k)
        })
        .collect()
}

/// The pages a lookup of `key` reads (FORMAT.md §11.8): the binary search's
/// probes, the page it lands on and, in case its block is the page's first,
/// the previous page.
fn pages_read(pages: &[(std::ops::Range<usize>, Vec<u8>)], key: &[u8]) -> Vec<usize> {
    let (mut lo, mut hi, mut out) = (0, pages.len(), Vec::new());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        out.push(mid);
        if pages[mid].1.as_slice() < key {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    out.push(lo);
    out.extend(lo.checked_sub(1));
    out
}

fn path() -> PathBuf {
    Path::new("/mem").join(NAME)
}

fn open(b: Vec<u8>, tagged: bool) -> Result<Table, Error> {
    let k = key();
    Table::from_bytes(path(), Box::new(b), tagged.then_some(&k))
}

#[test]
fn a_table_whose_index_pages_are_damaged_opens_and_answers_the_lookup_that_avoids_them() {
    for tagged in [false, true] {
        let clean = write(tagged, TABLE_PAGE_ENTRIES);
        let t = open(clean.clone(), tagged).unwrap();
        assert!(t.blocks() > 1000, "{} blocks", t.blocks());
        assert!(t.index_pages() > 30, "{} pages", t.index_pages());
        let pages = pages(&clean, tagged);
        assert_eq!(pages.len() as u64, t.index_pages());
        let (want_k, want_v) = entry(ENTRIES / 3);
        let read = pages_read(&pages, &want_k);
        assert!(read.len() <= 10, "{} pages read by one lookup", read.len());
        // One byte of every other page's middle flipped: in a tagged table
        // with the page's CRC in the directory left as it was, so both the CRC
        // and (were it recomputed) the tag would tell.
        let mut damaged = clean.clone();
        let mut hit = Vec::new();
        for (p, (range, _)) in pages.iter().enumerate() {
            if !read.contains(&p) {
                damaged[range.start + range.len() / 2] ^= 0x10;
                hit.push(p);
            }
        }
        assert!(hit.len() + read.len() >= pages.len() && hit.len() > 20);
        let t = open(damaged.clone(), tagged).expect("the open reads no index page");
        assert_eq!(t.get(&want_k).unwrap(), Some(want_v.as_slice()));
        assert_eq!(t.len(), ENTRIES as u64);
        assert_eq!(t.header(), b"hdr");
        // A key whose page is damaged: reported, naming the page.
        let far = entry(ENTRIES - 1).0;
        let e = t.get(&far).unwrap_err();
        assert!(
            matches!(&e, Error::Corrupt { path: p, offset: Some(_), reason, .. } if *p == path() && reason.contains("table index page")),
            "{e}"
        );
        let errs: Vec<_> = t.iter().filter_map(|r| r.err()).collect();
        assert!(
            matches!(errs.as_slice(), [Error::Corrupt { .. }]),
            "{errs:?}"
        );
        assert!(matches!(t.verify().unwrap_err(), Error::Corrupt { .. }));
        // The page's bytes changed and its CRC recomputed in the directory
        // (whose own CRC too): a tagged table still refuses it, by the page tag
        // at the lookup, or by the table tag over the directory at the open.
        if tagged {
            let p = *hit.last().unwrap();
            let mut forged = clean.clone();
            let r = pages[p].0.clone();
            forged[r.start + r.len() / 2] ^= 0x10;
            let f = forged.len() - TABLE_FOOTER_LEN;
            let index_at = u64::from_le_bytes(forged[f + 24..f + 32].try_into().unwrap()) as usize;
            let index_end = index_at + u32_at(&forged, f + 32);
            let dlen = TABLE_DIR_ENTRY_LEN + 16;
            let dir_at = index_end - 8 - pages.len() * dlen;
            let crc = masked_crc(&[&forged[r.clone()]]);
            forged[dir_at + p * dlen + 12..][..4].copy_from_slice(&crc.to_le_bytes());
            let dcrc = masked_crc(&[&forged[dir_at..index_end - 4]]);
            forged[index_end - 4..index_end].copy_from_slice(&dcrc.to_le_bytes());
            match open(forged, true) {
                Err(Error::Tampered { .. }) => {}
                Err(e) => panic!("forged page: {e}"),
                Ok(_) => panic!("a forged directory passed the table tag"),
            }
        }
    }
    // The same damage to an unpaged table fails its open: that open walks the
    // whole index (and checks its one CRC).
    let flat = write(false, 0);
    let t = open(flat.clone(), false).unwrap();
    assert_eq!(t.index_pages(), 0);
    let f = flat.len() - TABLE_FOOTER_LEN;
    let index_at = u64::from_le_bytes(flat[f + 24..f + 32].try_into().unwrap()) as usize;
    let mut damaged = flat;
    damaged[index_at + 1000] ^= 0x10;
    assert!(matches!(open(damaged, false), Err(Error::Corrupt { .. })));
}

/// The forged-directory case above changes the table tag's input; a page
/// changed with only its own CRC recomputed is caught by the directory's CRC.
#[test]
fn a_page_changed_with_its_crc_recomputed_is_refused_at_open_by_the_directory() {
    let clean = write(false, TABLE_PAGE_ENTRIES);
    let pages = pages(&clean, false);
    let r = pages[pages.len() / 2].0.clone();
    let mut b = clean.clone();
    b[r.start + 3] ^= 0x01;
    let f = b.len() - TABLE_FOOTER_LEN;
    let index_at = u64::from_le_bytes(b[f + 24..f + 32].try_into().unwrap()) as usize;
    let index_end = index_at + u32_at(&b, f + 32);
    let dir_at = index_end - 8 - pages.len() * TABLE_DIR_ENTRY_LEN;
    let p = pages.len() / 2;
    let crc = masked_crc(&[&b[r]]);
    b[dir_at + p * TABLE_DIR_ENTRY_LEN + 12..][..4].copy_from_slice(&crc.to_le_bytes());
    let e = open(b, false).unwrap_err();
    assert!(
        matches!(&e, Error::Corrupt { offset: Some(o), reason, .. } if *o == dir_at as u64 && reason.contains("table page directory")),
        "{e}"
    );
}

/// The CRC-32 under the mask (FORMAT.md §1): XOR-linear for equal lengths.
fn raw_crc(b: &[u8]) -> u32 {
    masked_crc(&[b])
        .wrapping_sub(runlog::engine::format::CRC_MASK_DELTA)
        .rotate_left(15)
}

/// Flips bit `bit` of `b` and 32 bits of `b[window..window + 4]` chosen so
/// that the CRC is unchanged: the forgery a CRC cannot see (CRC-32 is linear).
fn flip_keeping_crc(b: &mut [u8], bit: usize, window: usize) {
    let base = raw_crc(b);
    let effect = |b: &mut [u8], i: usize| {
        b[i / 8] ^= 1 << (i % 8);
        let e = raw_crc(b) ^ base;
        b[i / 8] ^= 1 << (i % 8);
        e
    };
    let target = effect(b, bit);
    // Gaussian elimination over GF(2): rows (effect, which window bits).
    let mut rows: Vec<(u32, u32)> = (0..32)
        .map(|j| (effect(b, window * 8 + j), 1 << j))
        .collect();
    let mut basis: Vec<(u32, u32)> = Vec::new();
    for (mut v, mut m) in rows.drain(..) {
        for &(bv, bm) in &basis {
            if v ^ bv < v {
                v ^= bv;
                m ^= bm;
            }
        }
        if v != 0 {
            basis.push((v, m));
            basis.sort_by_key(|b| std::cmp::Reverse(b.0));
        }
    }
    let (mut t, mut mask) = (target, 0u32);
    for &(bv, bm) in &basis {
        if t ^ bv < t {
            t ^= bv;
            mask ^= bm;
        }
    }
    assert_eq!(t, 0, "the window spans the CRC's space");
    b[bit / 8] ^= 1 << (bit % 8);
    for j in 0..32 {
        if mask & (1 << j) != 0 {
            b[window + j / 8] ^= 1 << (j % 8);
        }
    }
    assert_eq!(raw_crc(b), base);
}

/// A page whose bytes change while its CRC stays the same (a CRC is no
/// defence against a deliberate change) is refused by its page tag, at the
/// lookup that enters it: the directory, and so the table tag, are unchanged.
#[test]
fn a_tagged_page_forged_to_keep_its_crc_is_tampering_at_lookup() {
    let clean = write(true, TABLE_PAGE_ENTRIES);
    let pages = pages(&clean, true);
    let (want_k, _) = entry(ENTRIES / 3);
    let p = *pages_read(&pages, &want_k).last().unwrap();
    let r = pages[p].0.clone();
    let mut page = clean[r.clone()].to_vec();
    // A byte of the middle of the page, and four bytes after it.
    let mid = page.len() / 2;
    flip_keeping_crc(&mut page, mid * 8 + 3, mid + 1);
    let mut forged = clean.clone();
    forged[r.clone()].copy_from_slice(&page);
    assert_eq!(
        masked_crc(&[&forged[r.clone()]]),
        masked_crc(&[&clean[r.clone()]])
    );
    let t = open(forged, true).expect("the directory is unchanged");
    let e = t.get(&want_k).unwrap_err();
    assert!(
        matches!(&e, Error::Tampered { offset: Some(o), what, .. } if *o == r.start as u64 && what.contains(&format!("table index page {p}"))),
        "{e}"
    );
    assert!(matches!(t.verify().unwrap_err(), Error::Tampered { .. }));
}

/// Every bit of a paged table's directory and page count flipped, and the
/// directory's CRC recomputed (so that only the open's walk and the page
/// checks can tell): the open refuses the directory, or every lookup returns
/// the written value or `Corrupt` naming the file and an offset, and `verify`
/// reports it. The directory's fields are each checked somewhere: never a
/// silently wrong or missing entry.
#[test]
fn every_directory_bit_flipped_with_its_crc_recomputed_is_loud() {
    let n = 300;
    let fs = mem_fs();
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    let spec = TableSpec {
        block_bytes: 128,
        page_entries: 4,
        ..TableSpec::new(Codec::Binary, 9, None)
    };
    let mut w = TableWriter::create(vfs, Path::new("/mem"), NAME, spec).unwrap();
    for i in 0..n {
        let (k, v) = entry(i);
        w.add(&k, &v).unwrap();
    }
    w.finish(b"hdr").unwrap();
    let clean = fs.get(&path()).unwrap();
    let pages = pages(&clean, false);
    assert!(pages.len() >= 8, "{} pages", pages.len());
    let f = clean.len() - TABLE_FOOTER_LEN;
    let index_at = u64::from_le_bytes(clean[f + 24..f + 32].try_into().unwrap()) as usize;
    let index_end = index_at + u32_at(&clean, f + 32);
    let dir_at = index_end - 8 - pages.len() * TABLE_DIR_ENTRY_LEN;
    let (mut at_open, mut later) = (0, 0);
    for bit in dir_at * 8..(index_end - 4) * 8 {
        let what = format!("directory bit {bit} (byte {})", bit / 8);
        let mut b = clean.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        let crc = masked_crc(&[&b[dir_at..index_end - 4]]);
        b[index_end - 4..index_end].copy_from_slice(&crc.to_le_bytes());
        let t = match open(b, false) {
            Err(Error::Corrupt { path: p, .. }) if p == path() => {
                at_open += 1;
                continue;
            }
            Err(e) => panic!("{what}: {e}"),
            Ok(t) => t,
        };
        for i in 0..n {
            let (k, v) = entry(i);
            match t.get(&k) {
                Ok(Some(got)) => assert_eq!(got, v.as_slice(), "{what}: {i}"),
                Ok(None) => panic!("{what}: {i} silently missing"),
                Err(Error::Corrupt {
                    path: p,
                    offset: Some(_),
                    ..
                }) if p == path() => {}
                Err(e) => panic!("{what}: {i}: {e}"),
            }
        }
        assert!(
            matches!(
                t.verify(),
                Err(Error::Corrupt {
                    offset: Some(_),
                    ..
                })
            ),
            "{what}: verify passed"
        );
        later += 1;
    }
    // Both: the open's walk checks order and counts, a page check the rest
    // (a page's CRC, its length, where its last entry is).
    assert!(at_open > 0 && later > 0, "{at_open} at open, {later} later");
}
