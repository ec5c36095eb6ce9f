//! Proves every committed fuzz corpus input (fuzz/corpus/<target>/) still runs
//! through its target's checks without a panic or an allocation over 64 MiB, in
//! plain `cargo test`. The `#[ignore]`d `regenerate_seed_corpus` rewrites the seeds:
//! `cargo test --test fuzz_corpus_replay -- --ignored regenerate_seed_corpus`.
mod common;
use common::MemFs;

#[path = "../fuzz/fuzz_targets/cap_alloc.rs"]
mod cap_alloc;
#[path = "../fuzz/fuzz_targets/checks.rs"]
mod checks;

#[global_allocator]
static ALLOC: cap_alloc::CapAlloc = cap_alloc::CapAlloc;

use runlog::engine::format::masked_crc;
use runlog::engine::frame::{encode_record, encode_segment_header};
use runlog::engine::snapfile::encode_snapshot;
use runlog::engine::{Codec, Store, encode_payload};
use std::path::{Path, PathBuf};

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn replay(target: &str, f: fn(&[u8])) {
    let mut n = 0;
    let mut entries: Vec<_> = std::fs::read_dir(corpus(target))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        let data = std::fs::read(&p).unwrap();
        let r = std::panic::catch_unwind(|| f(&data));
        assert!(r.is_ok(), "{target}: {} panicked", p.display());
        n += 1;
    }
    assert!(n >= 3, "{target}: only {n} corpus files");
}

#[test]
fn record_decode_corpus() {
    replay("record_decode", checks::record_decode);
}

#[test]
fn snapshot_decode_corpus() {
    replay("snapshot_decode", checks::snapshot_decode);
}

#[test]
fn recovery_corpus() {
    replay("recovery", checks::recovery);
}

fn segment(codec: Codec, first: u64, n: u64) -> Vec<u8> {
    let mut b = encode_segment_header(codec, first);
    let mut p = Vec::new();
    for s in first..first + n {
        encode_payload(codec, &s, &mut p).unwrap();
        encode_record(codec, s, s - 1, &p, &mut b);
    }
    b
}

fn snapshot(codec: Codec, seq: u64) -> Vec<u8> {
    let mut p = Vec::new();
    let st = checks::NumsState {
        values: (1..=seq).collect(),
    };
    encode_payload(codec, &st, &mut p).unwrap();
    encode_snapshot(codec, seq, &p)
}

fn write(target: &str, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(corpus(target)).unwrap();
    std::fs::write(corpus(target).join(name), bytes).unwrap();
}

#[test]
#[ignore = "rewrites fuzz/corpus seeds; run by hand"]
fn regenerate_seed_corpus() {
    for codec in [Codec::Binary, Codec::Jsonl] {
        let c = codec.name();
        let seg = segment(codec, 1, 5);
        write("record_decode", &format!("{c}_segment"), &seg);
        write("record_decode", &format!("{c}_torn"), &seg[..seg.len() - 3]);
        let mut flipped = seg.clone();
        let mid = seg.len() / 2;
        flipped[mid] ^= 0x10;
        write("record_decode", &format!("{c}_flipped"), &flipped);
        let hl = encode_segment_header(codec, 1).len();
        write("record_decode", &format!("{c}_records_only"), &seg[hl..]);

        let snap = snapshot(codec, 4);
        write("snapshot_decode", &format!("{c}_snapshot"), &snap);
        write(
            "snapshot_decode",
            &format!("{c}_truncated"),
            &snap[..snap.len() - 1],
        );

        // recovery: flags, split u16, segment bytes, snapshot bytes.
        let bit = u8::from(codec == Codec::Jsonl);
        let input = |flags: u8, seg: &[u8], snap: &[u8]| {
            let mut v = vec![flags];
            v.extend_from_slice(&(seg.len() as u16).to_le_bytes());
            v.extend_from_slice(seg);
            v.extend_from_slice(snap);
            v
        };
        let seg20 = segment(codec, 1, 20);
        let snap20 = snapshot(codec, 20);
        write(
            "recovery",
            &format!("{c}_log_only"),
            &input(bit, &seg20, &[]),
        );
        write(
            "recovery",
            &format!("{c}_log_and_snapshot"),
            &input(bit | 2 | (20 << 3), &seg20, &snap20),
        );
        write(
            "recovery",
            &format!("{c}_torn_tail"),
            &input(bit, &seg20[..seg20.len() - 5], &[]),
        );
        write(
            "recovery",
            &format!("{c}_records_behind_header"),
            &input(bit | 4, &seg20[hl..], &[]),
        );
    }
    // A valid-looking binary record header declaring u32::MAX bytes.
    let len = u32::MAX.to_le_bytes();
    let seq = 1u64.to_le_bytes();
    let mut huge = Vec::new();
    huge.extend_from_slice(&len);
    huge.extend_from_slice(&seq);
    huge.extend_from_slice(&masked_crc(&[&len, &seq]).to_le_bytes());
    write("record_decode", "binary_u32_max_len", &huge);
    // A real store's files, written by the engine itself.
    let fs = MemFs::new();
    let dir = Path::new(common::MEM_DIR);
    let s = Store::<checks::Nums>::open(dir, common::mem_opts(Codec::Binary, &fs)).unwrap();
    for v in 1..=9 {
        s.append(&v).unwrap();
    }
    drop(s);
    let seg = fs.get(&dir.join("seg-00000000000000000001.log")).unwrap();
    write("record_decode", "engine_written_segment", &seg);
    table_seeds();
    keyed_recovery_seeds();
}

#[test]
fn table_decode_corpus() {
    replay("table_decode", checks::table_decode);
}

/// Table snapshots written by `TableWriter`: multi-block unkeyed and keyed (with
/// `checks::TABLE_FUZZ_KEY`), empty, one huge entry, a flipped and a truncated one.
fn table_seeds() {
    use runlog::engine::Key;
    use runlog::engine::table::{TableSpec, TableWriter};
    use std::sync::Arc;
    let fs = MemFs::new();
    let dir = Path::new("/mem");
    let table = |keyed: bool, entries: &[(Vec<u8>, Vec<u8>)], block_bytes: usize| {
        let spec = TableSpec {
            codec: Codec::Binary,
            seq: 9,
            seal: keyed.then(|| (Key::from_bytes(checks::TABLE_FUZZ_KEY), [7; 16])),
            block_bytes,
        };
        let mut w = TableWriter::create(Arc::new(fs.clone()), dir, "t", spec).unwrap();
        for (k, v) in entries {
            w.add(k, v).unwrap();
        }
        w.finish(b"hdr").unwrap();
        fs.get(&dir.join("t")).unwrap()
    };
    let units: Vec<_> = (0u8..30)
        .map(|i| {
            (
                format!("unit-{i:02}").into_bytes(),
                vec![i; usize::from(i % 4) * 5],
            )
        })
        .collect();
    let plain = table(false, &units, 64);
    write("table_decode", "unkeyed_blocks", &plain);
    write("table_decode", "keyed_blocks", &table(true, &units, 64));
    write("table_decode", "empty", &table(false, &[], 64));
    write(
        "table_decode",
        "one_large_entry",
        &table(false, &[(b"a".to_vec(), vec![1; 5000])], 64),
    );
    let mut flipped = plain.clone();
    flipped[40] ^= 0x04;
    write("table_decode", "unkeyed_flipped_block", &flipped);
    write(
        "table_decode",
        "unkeyed_truncated",
        &plain[..plain.len() - 1],
    );
}

#[test]
fn apply_input_corpus() {
    replay("apply_input", checks::apply_input);
}

/// `recovery` inputs whose snapshot is a table (format v2) written by the
/// keyed machine `KNums` at seq 20 over the log of 1..=25: clean, a flipped
/// block byte, a flipped footer byte, and cut short (also over a log ending at 20).
fn keyed_recovery_seeds() {
    for codec in [Codec::Binary, Codec::Jsonl] {
        let table = keyed_table(codec);
        let bit = u8::from(codec == Codec::Jsonl);
        let seg = segment(codec, 1, 25);
        let input = |snap: &[u8]| {
            let mut v = vec![bit | 2 | (20 << 3)];
            v.extend_from_slice(&(seg.len() as u16).to_le_bytes());
            v.extend_from_slice(&seg);
            v.extend_from_slice(snap);
            v
        };
        let c = codec.name();
        write("recovery", &format!("{c}_table_snapshot"), &input(&table));
        let mut block = table.clone();
        block[40] ^= 0x08;
        write(
            "recovery",
            &format!("{c}_table_flipped_block"),
            &input(&block),
        );
        let mut footer = table.clone();
        let at = footer.len() - 10;
        footer[at] ^= 0x01;
        write(
            "recovery",
            &format!("{c}_table_flipped_footer"),
            &input(&footer),
        );
        write(
            "recovery",
            &format!("{c}_table_cut"),
            &input(&table[..table.len() / 2]),
        );
        // The log ends at the damaged table's seq: after the fallback, the
        // compaction at 20 must rewrite it (tests/damage_snapshot_fallback_then_compact.rs).
        let mut at_end = vec![bit | 2 | (20 << 3)];
        let seg20 = segment(codec, 1, 20);
        at_end.extend_from_slice(&(seg20.len() as u16).to_le_bytes());
        at_end.extend_from_slice(&seg20);
        at_end.extend_from_slice(&table[..table.len() / 2]);
        write("recovery", &format!("{c}_table_cut_at_log_end"), &at_end);
    }
}

/// The table snapshot a `KNums` store writes at seq 20 after appending 1..=20.
fn keyed_table(codec: Codec) -> Vec<u8> {
    use runlog::engine::Keyed;
    let fs = MemFs::new();
    let dir = Path::new(common::MEM_DIR);
    let s = Store::<Keyed<checks::KNums>>::open(dir, common::mem_opts(codec, &fs)).unwrap();
    for v in 1..=20u64 {
        s.append(&v).unwrap();
    }
    s.compact().unwrap();
    drop(s);
    let t = fs.get(&dir.join("snap-00000000000000000020.snap")).unwrap();
    assert_eq!(&t[..8], b"RUNLOGtb");
    t
}

/// The committed table-snapshot seeds recover, as a keyed store, to the
/// state of 1..=25 (the clean one) or loudly (the damaged ones): the seeds
/// are what they say, so the fuzzer starts from real format-v2 images.
#[test]
fn keyed_recovery_seeds_are_table_snapshots() {
    use runlog::engine::Keyed;
    for c in ["binary", "jsonl"] {
        let data = std::fs::read(corpus("recovery").join(format!("{c}_table_snapshot"))).unwrap();
        let split = usize::from(u16::from_le_bytes([data[1], data[2]]));
        let snap = &data[3 + split..];
        assert_eq!(&snap[..8], b"RUNLOGtb", "{c}");
        let codec = if c == "binary" {
            Codec::Binary
        } else {
            Codec::Jsonl
        };
        let fs = MemFs::new();
        let dir = Path::new(common::MEM_DIR);
        fs.set_files(
            dir,
            &[
                (
                    "seg-00000000000000000001.log".into(),
                    data[3..3 + split].to_vec(),
                ),
                ("snap-00000000000000000020.snap".into(), snap.to_vec()),
            ],
        );
        let mut o = common::mem_opts(codec, &fs);
        o.create = false;
        let s = Store::<Keyed<checks::KNums>>::open(dir, o).unwrap();
        assert_eq!(s.recovery().snapshot_seq, Some(20), "{c}");
        assert!(s.recovery().snapshot_fallbacks.is_empty(), "{c}");
        assert_eq!(s.read(|st| st.header().count), 25, "{c}");
        let got: Vec<u64> = s.read(|st| st.iter().map(|e| e.unwrap().1).collect());
        assert_eq!(got, (1..=25).collect::<Vec<u64>>(), "{c}");
    }
}
