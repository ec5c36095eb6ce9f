//! Proves that damage to the newest table snapshot of a keyed store (format
//! v3), a full table or a delta table over one (FORMAT.md §14), is never silent, for flipped bits (every 5th at the full depth, every one with
//! `RUNLOG_DAMAGE_STRIDE=1`), every cut and bytes appended, both codecs, with and without a
//! log tail after the table (at the quick depth, tests/depth: every 11th bit
//! and every 3rd cut, from an offset drawn from the printed seed): the
//! open either falls back LOUDLY (`snapshot_fallbacks` names the table) to the
//! previous snapshot plus the longer log and reaches the model's state, or it
//! refuses with `Corrupt` naming the table (the tail's replay looked a key up
//! in a damaged block), or it keeps the table and then every lookup returns the model's value or a
//! `Corrupt` error naming the table, iteration and `verify` report `Corrupt`
//! naming it — never a missing or wrong entry. Which one is fixed by where
//! the damage is (FORMAT.md §6): in the file header, page directory, header
//! block or footer (and any cut) the open falls back; in a data block or an
//! index page (the paged index of table versions 4 and 5, §11.8, which this
//! build writes) it does not, and the error names `table block <n>` or
//! `table index page <n>`. (Before the paged index, a damaged index fell
//! back at open like the header; it is now met by the lookup that reads it.)
use crate::common;
use crate::depth;
use common::keyed::{Tab, TabModel, key_of, tab_model, tab_observe};
use common::*;
use runlog::engine::{self, Codec, Error, Integrity, Keyed, Store};
use std::path::{Path, PathBuf};

type KStore = Store<Keyed<Tab>>;

/// Pad of value `v`: 0..320 bytes, so the table spans two 4 KiB blocks.
fn pad(v: u64) -> usize {
    (v * 7 % 41) as usize * 8
}

/// Bits flipped: every `stride`-th (`RUNLOG_DAMAGE_STRIDE`; 1 for every
/// bit): 5 at the full depth, which meets every byte at every bit position
/// across the table; 11 at the quick one (tests/depth), prime to 8, so every
/// bit position is still met.
fn stride() -> usize {
    depth::scaled("RUNLOG_DAMAGE_STRIDE", 11, 5).max(1) as usize
}

/// Where a sweep taking 1 in `every` starts: 0 at the full depth, as it always
/// did; at the quick one, drawn from the printed seed, so that runs meet
/// different bits and cuts.
fn start(every: usize, seed: u64) -> usize {
    if depth::full() {
        0
    } else {
        (seed % every as u64) as usize
    }
}

/// A keyed store in memory: two rounds of appends, the first ended by a
/// compaction (a full table) and the second by another (`delta` false) or by
/// a flush (`delta` true: a delta table over the first), then a tail of
/// `tail`. Returns its files, the model and the newest table's name.
fn build(codec: Codec, tail: u64, delta: bool) -> (Vec<(String, Vec<u8>)>, TabModel, String) {
    let fs = mem_fs();
    let s = KStore::open(Path::new(MEM_DIR), mem_opts(codec, &fs)).unwrap();
    let mut h = vec![];
    let mut n = 0;
    for (round, per) in [60, 50, tail].into_iter().enumerate() {
        for _ in 0..per {
            let v = value(n);
            s.append(&entry(v, pad(v))).unwrap();
            h.push((v, pad(v)));
            n += 1;
        }
        match round {
            1 if delta => drop(s.flush().unwrap()),
            0 | 1 => drop(s.compact().unwrap()),
            _ => {}
        }
    }
    drop(s);
    let files = fs.files(Path::new(MEM_DIR));
    let snaps: Vec<&String> = files
        .iter()
        .map(|f| &f.0)
        .filter(|n| n.ends_with(".snap"))
        .collect();
    assert_eq!(snaps.len(), 2, "two snapshots kept: {snaps:?}");
    let newest = snaps.iter().max().unwrap().to_string();
    let table = &files.iter().find(|f| f.0 == newest).unwrap().1;
    assert_eq!(
        &table[..8],
        b"RUNLOGtb",
        "a keyed compaction writes a table"
    );
    let version = u16::from_le_bytes([table[8], table[9]]);
    let want = if delta { 5 } else { 4 };
    assert_eq!(version, want, "{newest}: table version {version}");
    (files, tab_model(&h), newest)
}

/// What one damaged image did.
#[derive(Default, Debug)]
struct Outcomes {
    fallbacks: u64,
    corrupt_at_lookup: u64,
    refused: u64,
    harmless: u64,
}

fn names_file(e: &Error, file: &Path) -> bool {
    matches!(e, Error::Corrupt { path, .. } if path == file)
}

/// Opens the store with `damaged` in place of the newest table and checks the
/// outcome is loud.
/// An undamaged store: its files, the model, the newest table's name.
type Base<'a> = (&'a [(String, Vec<u8>)], &'a TabModel, &'a str);

fn check(
    (files, model, newest): Base<'_>,
    damaged: Vec<u8>,
    codec: Codec,
    in_block: bool,
    what: &str,
    out: &mut Outcomes,
) {
    let fs = mem_fs();
    let dir = Path::new(MEM_DIR);
    let mut fs_files = files.to_vec();
    fs_files.iter_mut().find(|f| f.0 == newest).unwrap().1 = damaged;
    fs.set_files(dir, &fs_files);
    let file: PathBuf = dir.join(newest);
    let s = match KStore::open(dir, mem_opts(codec, &fs)) {
        Ok(s) => s,
        Err(e) => {
            // Replaying the tail looks keys up in the table: a damaged block
            // or index page met there fails the open (changing nothing),
            // naming the table.
            assert!(in_block, "{what}: damage outside the blocks refused: {e}");
            assert!(names_part(&e.to_string()), "{what}: {e}");
            assert!(
                e.is_corrupt() && e.to_string().contains(&file.display().to_string()),
                "{what}: open failed with {e}"
            );
            out.refused += 1;
            return;
        }
    };
    let r = s.recovery().clone();
    if !r.snapshot_fallbacks.is_empty() {
        assert!(
            !in_block,
            "{what}: a block's damage failed the table's open"
        );
        assert!(
            r.snapshot_fallbacks.iter().any(|(p, _)| p == &file),
            "{what}: fallback names another file {:?}",
            r.snapshot_fallbacks
        );
        assert_ne!(
            r.snapshot_seq,
            Some(seq_of(newest)),
            "{what}: fell back but kept the table"
        );
        let got = s
            .read(tab_observe)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(&got, model, "{what}: the fallback state is the model's");
        out.fallbacks += 1;
        return;
    }
    // The table was kept: every lookup is right or names the damage.
    let mut errors = 0;
    s.read(|st| {
        assert_eq!(st.header(), &model.header, "{what}: header");
        for (k, v) in &model.map {
            match st.get(k) {
                Ok(Some(got)) => assert_eq!(&got, v, "{what}: key {k}"),
                Ok(None) => panic!("{what}: key {k} silently missing"),
                Err(d) => {
                    assert!(names_file(&d, &file), "{what}: key {k}: {d}");
                    assert!(names_part(&d.to_string()), "{what}: {d}");
                    errors += 1;
                }
            }
        }
        // A key that was never written is absent, or the lookup names damage.
        match st.get(ABSENT) {
            Ok(None) => {}
            Ok(Some(v)) => panic!("{what}: a key never written reads {v:?}"),
            Err(d) => assert!(names_file(&d, &file), "{what}: {d}"),
        }
    });
    let iterated = s.read(tab_observe);
    drop(s);
    let verified = engine::Reader::new(&fs, dir)
        .verify()
        .unwrap_or_else(|e| panic!("{what}: verify {e}"));
    if errors == 0 {
        assert_eq!(iterated.as_ref(), Ok(model), "{what}: iteration");
        assert!(
            matches!(verified.integrity, Integrity::Clean),
            "{what}: every lookup was right, verify says {:?}",
            verified.integrity
        );
        out.harmless += 1;
        return;
    }
    assert!(
        in_block,
        "{what}: damage outside the blocks passed the open"
    );
    let e = iterated.expect_err("a lookup saw damage, iteration must too");
    assert!(e.contains(newest), "{what}: iteration error {e}");
    match &verified.integrity {
        Integrity::Damaged(Error::Corrupt { path, reason, .. }) => {
            assert_eq!(path, &file, "{what}: verify");
            assert!(names_part(reason), "{what}: {reason}");
        }
        i => panic!("{what}: a lookup saw damage, verify says {i:?}"),
    }
    out.corrupt_at_lookup += 1;
}

/// The message names the damaged block or index page.
fn names_part(msg: &str) -> bool {
    msg.contains("table block") || msg.contains("table index page")
}

fn kind(delta: bool) -> &'static str {
    if delta { "delta" } else { "full table" }
}

/// A key no transition sets ([`key_of`] gives `k000`..`k036`), between two that are.
const ABSENT: &str = "k010x";

fn seq_of(name: &str) -> u64 {
    name.trim_start_matches("snap-")
        .trim_end_matches(".snap")
        .parse()
        .unwrap()
}

/// Without a tail the open reads no block: damage to the header, index or
/// footer falls back, damage to a block is met by lookups, iteration, verify.
#[test]
fn every_bit_flip_of_the_newest_table_is_loud() {
    sweep_flips(0, |out| {
        assert!(out.fallbacks > 0 && out.corrupt_at_lookup > 0, "{out:?}");
        assert_eq!(out.refused, 0, "{out:?}");
    });
}

/// With a tail, replaying it looks keys up: damage to a block fails the open
/// naming the table, or is met later by lookups.
#[test]
fn every_bit_flip_of_the_newest_table_under_a_tail_is_loud() {
    sweep_flips(10, |out| {
        assert!(out.fallbacks > 0 && out.refused > 0, "{out:?}")
    });
}

fn sweep_flips(tail: u64, expect: impl Fn(&Outcomes)) {
    let (stride, seed) = (stride(), depth::sample_seed());
    let mut flips = 0u64;
    for (codec, delta) in codecs().into_iter().flat_map(|c| [(c, false), (c, true)]) {
        let (files, model, newest) = build(codec, tail, delta);
        assert!(!model.map.contains_key(ABSENT) && model.map.contains_key(&key_of(10)));
        let table = files.iter().find(|f| f.0 == newest).unwrap().1.clone();
        let mut out = Outcomes::default();
        // Data blocks lie from the file header (32 bytes) to the index
        // (FORMAT.md §11: footer `index_offset`, at footer byte 24), then
        // the index pages up to the page directory (§11.8: `page_count`
        // × 40 bytes before the index's last 8).
        let f = table.len() - 84 + 24;
        let index_offset = u64::from_le_bytes(table[f..f + 8].try_into().unwrap()) as usize;
        let index_len = u32::from_le_bytes(table[f + 8..f + 12].try_into().unwrap()) as usize;
        let count_at = index_offset + index_len - 8;
        let pages = u32::from_le_bytes(table[count_at..count_at + 4].try_into().unwrap());
        let dir_at = count_at - pages as usize * 40;
        for bit in (start(stride, seed)..table.len() * 8).step_by(stride) {
            flips += 1;
            let mut d = table.clone();
            d[bit / 8] ^= 1 << (bit % 8);
            let what = format!(
                "{codec:?} {} {newest} bit {bit} (byte {})",
                kind(delta),
                bit / 8
            );
            let in_block = (32..dir_at).contains(&(bit / 8));
            check(
                (&files, &model, &newest),
                d,
                codec,
                in_block,
                &what,
                &mut out,
            );
        }
        eprintln!(
            "{codec:?} {} tail {tail}: {} bytes of table, {out:?}",
            kind(delta),
            table.len()
        );
        assert_eq!(out.harmless, 0, "every bit of a table is checked");
        expect(&out);
    }
    depth::explored(
        &format!("damage_keyed_store flips, tail {tail}"),
        format_args!(
            "{flips} bit flips of 4 tables (2 codecs, full and delta), 1 bit in {stride} from bit {} (RUNLOG_SAMPLE_SEED={seed})",
            start(stride, seed)
        ),
    );
}

/// Every cut at the full depth; at the quick one (tests/depth), every
/// `RUNLOG_DAMAGE_CUT_ONE_IN`th (3), from an offset drawn from the printed seed.
#[test]
fn every_cut_and_extension_of_the_newest_table_falls_back() {
    let one_in = depth::scaled("RUNLOG_DAMAGE_CUT_ONE_IN", 3, 1).max(1) as usize;
    let seed = depth::sample_seed();
    let mut all_cuts = 0u64;
    for (codec, delta) in codecs().into_iter().flat_map(|c| [(c, false), (c, true)]) {
        let (files, model, newest) = build(codec, 10, delta);
        let table = files.iter().find(|f| f.0 == newest).unwrap().1.clone();
        let mut out = Outcomes::default();
        let mut cuts = 0u64;
        for len in (start(one_in, seed)..table.len()).step_by(one_in) {
            cuts += 1;
            let what = format!("{codec:?} {} {newest} cut at {len}", kind(delta));
            check(
                (&files, &model, &newest),
                table[..len].to_vec(),
                codec,
                false,
                &what,
                &mut out,
            );
        }
        // And bytes appended after the footer.
        for extra in [1usize, 7, 84, 4096] {
            let mut d = table.clone();
            d.extend(std::iter::repeat_n(0xa5, extra));
            let what = format!(
                "{codec:?} {} {newest} with {extra} bytes appended",
                kind(delta)
            );
            check((&files, &model, &newest), d, codec, false, &what, &mut out);
        }
        eprintln!(
            "{codec:?} {}: {cuts} cuts of {} and 4 extensions, {out:?}",
            kind(delta),
            table.len()
        );
        assert_eq!(out.fallbacks, cuts + 4, "{out:?}");
        assert!(cuts >= table.len() as u64 / one_in as u64, "{cuts} cuts");
        all_cuts += cuts;
    }
    depth::explored(
        "damage_keyed_store cuts",
        format_args!(
            "{all_cuts} cuts of 4 tables (2 codecs, full and delta), 1 in {one_in} from {} (RUNLOG_SAMPLE_SEED={seed}), and 4 extensions of each",
            start(one_in, seed)
        ),
    );
}
