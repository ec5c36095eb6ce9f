//! Proves every committed fuzz corpus input (fuzz/corpus/<target>/) still runs
//! through its target's checks without a panic or an allocation over 64 MiB, in
//! plain `cargo test`; and that the seed generator's output does too (generated
//! into a temp directory by a plain `cargo test`). The generator never writes
//! under fuzz/corpus: `RUNLOG_CORPUS_OUT=DIR cargo test --test engine -- --ignored
//! fuzz_corpus_replay::regenerate_seed_corpus` writes DIR/<target>/<seed> (DIR
//! must not exist); copy the seeds in by hand.
use crate::common;
use common::mem_fs;

#[path = "../../fuzz/fuzz_targets/checks.rs"]
mod checks;

use runlog::engine::format::masked_crc;
use runlog::engine::frame::{encode_record, encode_segment_header};
use runlog::engine::mark::{Mark, encode_mark};
use runlog::engine::snapfile::encode_snapshot;
use runlog::engine::{Codec, Store};
use std::path::{Path, PathBuf};

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn replay(target: &str, f: fn(&[u8])) {
    replay_dir(&corpus(target), target, f);
}

/// Runs every file of `dir` through `f` (the checks of fuzz target `target`).
fn replay_dir(dir: &Path, target: &str, f: fn(&[u8])) {
    let mut n = 0;
    let mut entries: Vec<_> = std::fs::read_dir(dir)
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

#[test]
fn tail_decode_corpus() {
    replay("tail_decode", checks::tail_decode);
}

#[test]
fn manifest_decode_corpus() {
    replay("manifest_decode", checks::manifest_decode);
}

#[test]
fn shared_decode_corpus() {
    replay("shared_decode", checks::shared_decode);
}

fn segment(codec: Codec, first: u64, n: u64) -> Vec<u8> {
    let mut b = encode_segment_header(codec, first);
    let mut p = Vec::new();
    for s in first..first + n {
        codec.encode(&s, &mut p).unwrap();
        encode_record(codec, s, s - 1, &p, &mut b);
    }
    b
}

fn snapshot(codec: Codec, seq: u64) -> Vec<u8> {
    let mut p = Vec::new();
    let st = checks::NumsState {
        values: (1..=seq).collect(),
    };
    codec.encode(&st, &mut p).unwrap();
    encode_snapshot(codec, seq, &p)
}

/// Writes one seed as `out/<target>/<name>`.
fn write(out: &Path, target: &str, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(out.join(target)).unwrap();
    std::fs::write(out.join(target).join(name), bytes).unwrap();
}

/// The generator's seeds, written into a temp directory, run through their
/// targets' checks like the committed corpus; nothing is written under fuzz/corpus.
#[test]
fn generated_seeds_replay() {
    let t = tempfile::tempdir().unwrap();
    generate_seed_corpus(t.path());
    type Check = fn(&[u8]);
    let targets: [(&str, Check); 7] = [
        ("record_decode", checks::record_decode),
        ("snapshot_decode", checks::snapshot_decode),
        ("tail_decode", checks::tail_decode),
        ("recovery", checks::recovery),
        ("table_decode", checks::table_decode),
        ("manifest_decode", checks::manifest_decode),
        ("shared_decode", checks::shared_decode),
    ];
    for (target, f) in targets {
        replay_dir(&t.path().join(target), target, f);
    }
}

/// Writes the seed corpus into `RUNLOG_CORPUS_OUT` (a directory that must not
/// exist yet, outside fuzz/corpus), to be copied in by hand.
#[test]
#[ignore = "writes $RUNLOG_CORPUS_OUT; run by hand to refresh fuzz/corpus seeds"]
fn regenerate_seed_corpus() {
    let out = PathBuf::from(
        std::env::var_os("RUNLOG_CORPUS_OUT").expect("set RUNLOG_CORPUS_OUT to a new directory"),
    );
    assert!(
        !out.exists(),
        "{} exists: the generator writes only a new directory",
        out.display()
    );
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    assert!(
        !out.starts_with(&committed) && !out.starts_with("fuzz"),
        "the generator never writes under fuzz/corpus"
    );
    generate_seed_corpus(&out);
    common::progress(format_args!("seed corpus written under {}", out.display()));
}

/// Writes every generated seed under `out/<target>/`.
fn generate_seed_corpus(out: &Path) {
    // A keyed machine's tail cache (FORMAT.md §15): the payload alone (its
    // decoding), the file around it, and the file damaged.
    let mut st = runlog::engine::KeyedState::<checks::KNums>::default();
    for n in [5u64, 9, 11] {
        <runlog::engine::Keyed<checks::KNums> as runlog::engine::Machine>::apply(&mut st, &n)
            .unwrap();
    }
    let payload =
        <runlog::engine::Keyed<checks::KNums> as runlog::engine::Machine>::encode_tail(&st)
            .unwrap();
    let file =
        runlog::engine::tailcache::encode_tail_cache(&runlog::engine::tailcache::TailCache {
            base_seq: 0,
            last_seq: 3,
            digest: 0x5eed,
            payload: payload.clone(),
        });
    // `SHARED` (FORMAT.md §5.8): both slots of this boot, one torn, one of
    // another version.
    {
        use runlog::engine::writers::*;
        let a = Appended {
            boot: [0xb0; 16],
            seq: 41,
            segment: 1,
            end: 4096,
            generation: 0x5eed_5eed,
        };
        let s = SyncState {
            boot: [0xb0; 16],
            generation: 0x5eed_5eed,
            in_flight: false,
            failed: true,
        };
        let mut both = encode_appended(&a).to_vec();
        both.extend_from_slice(&encode_sync_state(&s));
        write(out, "shared_decode", "both", &both);
        write(out, "shared_decode", "torn", &both[..100]);
        let mut v1 = both.clone();
        v1[8] = 1;
        write(out, "shared_decode", "version1", &v1);
    }
    write(out, "tail_decode", "payload", &payload);
    write(out, "tail_decode", "cache", &file);
    write(out, "tail_decode", "cache_torn", &file[..file.len() - 5]);
    for codec in [Codec::Binary, Codec::Jsonl] {
        let c = codec.name();
        let seg = segment(codec, 1, 5);
        write(out, "record_decode", &format!("{c}_segment"), &seg);
        write(
            out,
            "record_decode",
            &format!("{c}_torn"),
            &seg[..seg.len() - 3],
        );
        let mut flipped = seg.clone();
        let mid = seg.len() / 2;
        flipped[mid] ^= 0x10;
        write(out, "record_decode", &format!("{c}_flipped"), &flipped);
        let hl = encode_segment_header(codec, 1).len();
        write(
            out,
            "record_decode",
            &format!("{c}_records_only"),
            &seg[hl..],
        );

        let snap = snapshot(codec, 4);
        write(out, "snapshot_decode", &format!("{c}_snapshot"), &snap);
        write(
            out,
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
            out,
            "recovery",
            &format!("{c}_log_only"),
            &input(bit, &seg20, &[]),
        );
        write(
            out,
            "recovery",
            &format!("{c}_log_and_snapshot"),
            &input(bit | 2 | (20 << 3), &seg20, &snap20),
        );
        write(
            out,
            "recovery",
            &format!("{c}_torn_tail"),
            &input(bit, &seg20[..seg20.len() - 5], &[]),
        );
        write(
            out,
            "recovery",
            &format!("{c}_records_behind_header"),
            &input(bit | 4, &seg20[hl..], &[]),
        );
        // With a durability mark (FORMAT.md §5.7; the split's top bit says the
        // last 40 bytes are `DURABLE`): the mark of the whole log, the same
        // over a log whose last record is flipped (corruption, not a torn
        // tail), and a mark past the log's end.
        let with_mark = |seg: &[u8], m: Mark| {
            let mut v = vec![bit];
            v.extend_from_slice(&(seg.len() as u16 | 0x8000).to_le_bytes());
            v.extend_from_slice(seg);
            v.extend_from_slice(&encode_mark(&m));
            v
        };
        let whole = Mark {
            seq: 20,
            segment: 1,
            end: seg20.len() as u64,
        };
        write(
            out,
            "recovery",
            &format!("{c}_log_with_mark"),
            &with_mark(&seg20, whole),
        );
        let mut last_flipped = seg20.clone();
        let at = last_flipped.len() - 3;
        last_flipped[at] ^= 0x01;
        write(
            out,
            "recovery",
            &format!("{c}_mark_over_flipped_last_record"),
            &with_mark(&last_flipped, whole),
        );
        let past = Mark {
            seq: 22,
            end: seg20.len() as u64 + 90,
            ..whole
        };
        write(
            out,
            "recovery",
            &format!("{c}_mark_past_the_log"),
            &with_mark(&seg20, past),
        );
    }
    // A valid-looking binary record header declaring u32::MAX bytes.
    let len = u32::MAX.to_le_bytes();
    let seq = 1u64.to_le_bytes();
    let mut huge = Vec::new();
    huge.extend_from_slice(&len);
    huge.extend_from_slice(&seq);
    huge.extend_from_slice(&masked_crc(&[&len, &seq]).to_le_bytes());
    write(out, "record_decode", "binary_u32_max_len", &huge);
    // A real store's files, written by the engine itself.
    let fs = mem_fs();
    let dir = Path::new(common::MEM_DIR);
    let s = Store::<checks::Nums>::open(dir, common::mem_opts(Codec::Binary, &fs)).unwrap();
    for v in 1..=9 {
        s.append(&v).unwrap();
    }
    drop(s);
    let seg = fs.get(&dir.join("seg-00000000000000000001.log")).unwrap();
    write(out, "record_decode", "engine_written_segment", &seg);
    table_seeds(out);
    keyed_recovery_seeds(out);
    manifest_seeds(out);
}

/// Remote manifests (FORMAT.md §13.2), each named number 1: version 1 with a
/// chunk; versions 3 and 2 carrying real records inline (binary and JSONL frames),
/// after a chunk; one whose inline frames are damaged under a matching digest;
/// and a truncated one.
fn manifest_seeds(out: &Path) {
    use runlog::remote::layout::{
        ChunkRef, InlineRef, Manifest, SnapshotRef, chunk_name, snapshot_object_name,
    };
    let mut v1 = Manifest::genesis(1, 1, ("fuzz".into(), "d".into()), "binary", String::new());
    v1.version = 1;
    v1.holder.clear();
    v1.chunks.push(ChunkRef {
        first: 1,
        last: 4,
        object: chunk_name(1, 4, 1, 1),
        len: 120,
    });
    v1.shipped = 4;
    assert_eq!(Manifest::decode(1, &v1.encode()).unwrap(), v1);
    write(out, "manifest_decode", "v1_chunk", &v1.encode());
    for codec in [Codec::Binary, Codec::Jsonl] {
        let c = codec.name();
        let hl = encode_segment_header(codec, 5).len();
        let frames = segment(codec, 5, 3)[hl..].to_vec();
        let mut v2 = Manifest::genesis(1, 1, ("fuzz".into(), "d".into()), c, String::new());
        v2.chunks = v1.chunks.clone();
        v2.inline.push(InlineRef::new(5, 7, &frames));
        v2.shipped = 7;
        // Version 3 (what a writer writes: its directory's holder), then 2.
        write(
            out,
            "manifest_decode",
            &format!("v3_{c}_inline"),
            &Manifest::decode(1, &v2.encode()).unwrap().encode(),
        );
        v2.version = 2;
        v2.holder.clear();
        let m = Manifest::decode(1, &v2.encode()).unwrap();
        let check = |m: &Manifest| {
            let r = &m.inline[0];
            runlog::remote::check_frames("m", &r.bytes().unwrap(), 0, codec, 5, 7, "inline")
        };
        assert_eq!(check(&m).unwrap().len(), 3, "{c}: the seed's frames check");
        write(
            out,
            "manifest_decode",
            &format!("v2_{c}_inline"),
            &v2.encode(),
        );
        let mut bad = frames.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x10;
        v2.inline[0] = InlineRef::new(5, 7, &bad);
        let m = Manifest::decode(1, &v2.encode()).unwrap();
        assert!(
            check(&m).is_err(),
            "{c}: the damaged seed decodes, its frames do not"
        );
        write(
            out,
            "manifest_decode",
            &format!("v2_{c}_damaged_frames"),
            &v2.encode(),
        );
    }
    // Version 3 with a full table and a delta table over it (§13.2 `deltas`).
    let mut tables = Manifest::genesis(1, 1, ("fuzz".into(), "d".into()), "binary", String::new());
    tables.snapshot = Some(SnapshotRef {
        seq: 4,
        object: snapshot_object_name(4, 1, 1),
        len: 700,
    });
    tables.deltas.push(SnapshotRef {
        seq: 9,
        object: snapshot_object_name(9, 1, 1),
        len: 90,
    });
    tables.shipped = 9;
    assert_eq!(Manifest::decode(1, &tables.encode()).unwrap(), tables);
    write(out, "manifest_decode", "v3_delta_tables", &tables.encode());
    let whole = v1.encode();
    write(
        out,
        "manifest_decode",
        "v1_truncated",
        &whole[..whole.len() / 2],
    );
}

#[test]
fn table_decode_corpus() {
    replay("table_decode", checks::table_decode);
}

/// Table snapshots written by `TableWriter`: multi-block untagged and tagged (with
/// `checks::TABLE_FUZZ_KEY`), empty, one huge entry, a flipped and a truncated one.
fn table_seeds(out: &Path) {
    use runlog::engine::Key;
    use runlog::engine::table::{TableSpec, TableWriter};
    use std::sync::Arc;
    let fs = mem_fs();
    let dir = Path::new("/mem");
    // `paged` 0: the unpaged index of table versions 2 and 3 (the seeds
    // committed before the paged index); else pages of that many entries
    // (FORMAT.md §11.8).
    let table_of = |tagged: bool, entries: &[(Vec<u8>, Vec<u8>)], block_bytes: usize, paged| {
        let spec = TableSpec {
            codec: Codec::Binary,
            seq: 9,
            tagging: tagged.then(|| (Key::from_bytes(checks::TABLE_FUZZ_KEY), [7; 16])),
            block_bytes,
            parent: None,
            page_entries: paged,
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
    let table = |tagged, entries: &[(Vec<u8>, Vec<u8>)], block_bytes| {
        table_of(tagged, entries, block_bytes, 0)
    };
    let plain = table(false, &units, 64);
    write(out, "table_decode", "untagged_blocks", &plain);
    write(
        out,
        "table_decode",
        "tagged_blocks",
        &table(true, &units, 64),
    );
    write(out, "table_decode", "empty", &table(false, &[], 64));
    write(
        out,
        "table_decode",
        "one_large_entry",
        &table(false, &[(b"a".to_vec(), vec![1; 5000])], 64),
    );
    let mut flipped = plain.clone();
    flipped[40] ^= 0x04;
    write(out, "table_decode", "untagged_flipped_block", &flipped);
    write(
        out,
        "table_decode",
        "untagged_truncated",
        &plain[..plain.len() - 1],
    );
    // Paged tables (versions 4 and 5): pages of two index entries.
    let paged = table_of(false, &units, 64, 2);
    write(out, "table_decode", "paged_untagged", &paged);
    write(
        out,
        "table_decode",
        "paged_tagged",
        &table_of(true, &units, 64, 2),
    );
    let mut delta = TableSpec::new(Codec::Binary, 9, None);
    delta.parent = Some(4);
    delta.block_bytes = 64;
    delta.page_entries = 3;
    let mut w = TableWriter::create(Arc::new(fs.clone()), dir, "d", delta).unwrap();
    for (k, v) in &units {
        w.add(k, v).unwrap();
    }
    w.finish(b"hdr").unwrap();
    write(
        out,
        "table_decode",
        "paged_delta",
        &fs.get(&dir.join("d")).unwrap(),
    );
    // A byte of index page 1 flipped (the index starts at footer bytes 24..32).
    let f = paged.len() - 84;
    let index_at = u64::from_le_bytes(paged[f + 24..f + 32].try_into().unwrap()) as usize;
    let mut flipped = paged.clone();
    flipped[index_at + 70] ^= 0x04;
    write(out, "table_decode", "paged_flipped_page", &flipped);
}

#[test]
fn apply_input_corpus() {
    replay("apply_input", checks::apply_input);
}

/// `recovery` inputs whose snapshot is a table (format v2) written by the
/// keyed machine `KNums` at seq 20 over the log of 1..=25: clean, a flipped
/// block byte, a flipped footer byte, and cut short (also over a log ending at 20).
fn keyed_recovery_seeds(out: &Path) {
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
        write(
            out,
            "recovery",
            &format!("{c}_table_snapshot"),
            &input(&table),
        );
        let mut block = table.clone();
        block[40] ^= 0x08;
        write(
            out,
            "recovery",
            &format!("{c}_table_flipped_block"),
            &input(&block),
        );
        let mut footer = table.clone();
        let at = footer.len() - 10;
        footer[at] ^= 0x01;
        write(
            out,
            "recovery",
            &format!("{c}_table_flipped_footer"),
            &input(&footer),
        );
        write(
            out,
            "recovery",
            &format!("{c}_table_cut"),
            &input(&table[..table.len() / 2]),
        );
        // The log ends at the damaged table's seq: after the fallback, the
        // compaction at 20 must rewrite it (tests/engine/damage_snapshot_fallback_then_compact.rs).
        let mut at_end = vec![bit | 2 | (20 << 3)];
        let seg20 = segment(codec, 1, 20);
        at_end.extend_from_slice(&(seg20.len() as u16).to_le_bytes());
        at_end.extend_from_slice(&seg20);
        at_end.extend_from_slice(&table[..table.len() / 2]);
        write(
            out,
            "recovery",
            &format!("{c}_table_cut_at_log_end"),
            &at_end,
        );
    }
}

/// The table snapshot a `KNums` store writes at seq 20 after appending 1..=20.
fn keyed_table(codec: Codec) -> Vec<u8> {
    use runlog::engine::Keyed;
    let fs = mem_fs();
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
        let fs = mem_fs();
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
