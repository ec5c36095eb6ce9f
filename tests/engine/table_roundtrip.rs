//! Proves a table snapshot (FORMAT.md §11) holds exactly what its writer was
//! given: get, iter and iter_from agree with a BTreeMap (untagged and tagged,
//! empty, huge entries, many small blocks), on the in-memory fs and on RealFs;
//! the writer refuses out-of-order keys and over-limit lengths, and a failed
//! finish (every operation failing in turn) leaves neither temp file nor target.
use crate::common;
use common::mem_fs;

use proptest::prelude::*;
use runlog::engine::sim::{Fault, FaultKind, Op, SimFs};
use runlog::engine::table::{
    MAX_TABLE_KEY_LEN, MAX_TABLE_VALUE_LEN, TABLE_BLOCK_BYTES, Table, TableSpec, TableWriter,
};
use runlog::engine::tag::{KEY_LEN, Key, StoreId};
use runlog::engine::{Codec, Error, RealFs, Vfs};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const DIR: &str = "/mem";
const NAME: &str = "snap-00000000000000000007.snap";
const STORE_ID: StoreId = [0x5a; 16];

fn key() -> Key {
    Key::from_bytes([7; KEY_LEN])
}

fn spec(tagged: bool, block_bytes: usize) -> TableSpec {
    TableSpec {
        codec: Codec::Binary,
        seq: 7,
        tagging: tagged.then(|| (key(), STORE_ID)),
        block_bytes,
        parent: None,
        // Small pages: most tables here span several (FORMAT.md §11.8).
        page_entries: 3,
    }
}

/// Writes `model` as a table in `dir` of `vfs`; returns the size `finish` reported.
fn write(vfs: Arc<dyn Vfs>, dir: &Path, model: &Model, spec: TableSpec, header: &[u8]) -> u64 {
    let mut w = TableWriter::create(vfs, dir, NAME, spec).unwrap();
    for (k, v) in model {
        w.add(k, v).unwrap();
    }
    assert_eq!(w.entries(), model.len() as u64);
    w.finish(header).unwrap()
}

/// Everything a reader can observe agrees with `model`; `probes` are looked up too.
fn check(t: &Table, model: &Model, probes: &[Vec<u8>]) {
    assert_eq!(t.len(), model.len() as u64);
    assert_eq!(t.is_empty(), model.is_empty());
    for (k, v) in model {
        assert_eq!(t.get(k).unwrap(), Some(v.as_slice()), "key {k:?}");
    }
    for p in probes {
        assert_eq!(
            t.get(p).unwrap(),
            model.get(p).map(|v| v.as_slice()),
            "probe {p:?}"
        );
        let want: Vec<_> = model
            .range::<Vec<u8>, _>((Bound::Included(p), Bound::Unbounded))
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        let got: Vec<_> = t.iter_from(p).map(|r| r.unwrap()).collect();
        assert_eq!(got, want, "iter_from {p:?}");
    }
    let all: Vec<_> = t.iter().map(|r| r.unwrap()).collect();
    let want: Vec<_> = model
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_slice()))
        .collect();
    assert_eq!(all, want);
    t.verify().unwrap();
}

fn mem_round_trip(model: &Model, tagged: bool, block_bytes: usize, probes: &[Vec<u8>]) -> Table {
    let fs = mem_fs();
    let dir = Path::new(DIR);
    let header = b"machine header".to_vec();
    let size = write(
        Arc::new(fs.clone()),
        dir,
        model,
        spec(tagged, block_bytes),
        &header,
    );
    let names: Vec<_> = fs.files(dir).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, vec![NAME.to_string()], "no temp file left behind");
    let k = key();
    let t = Table::open(&fs, &dir.join(NAME), tagged.then_some(&k)).unwrap();
    assert_eq!(t.size(), size);
    assert_eq!(
        (t.seq(), t.codec(), t.header()),
        (7, Codec::Binary, &header[..])
    );
    assert_eq!(t.store_id(), tagged.then_some(STORE_ID));
    check(&t, model, probes);
    t
}

fn small_key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', b'b', 0xff]), 0..6)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn agrees_with_a_btreemap(
        model in prop::collection::btree_map(small_key(), prop::collection::vec(any::<u8>(), 0..40), 0..120),
        probes in prop::collection::vec(small_key(), 0..12),
        tagged in any::<bool>(),
        block_bytes in prop::sample::select(vec![0usize, 1, 64, 300, TABLE_BLOCK_BYTES]),
    ) {
        let t = mem_round_trip(&model, tagged, block_bytes, &probes);
        let total: usize = model.iter().map(|(k, v)| 6 + k.len() + v.len()).sum();
        prop_assert!(t.blocks() <= model.len() as u64);
        if total > block_bytes && model.len() > 1 {
            prop_assert!(t.blocks() > 1, "{} bytes of entries in one block", total);
        }
    }
}

#[test]
fn empty_tables_untagged_and_tagged() {
    for tagged in [false, true] {
        let t = mem_round_trip(&Model::new(), tagged, TABLE_BLOCK_BYTES, &[vec![], vec![1]]);
        assert_eq!((t.blocks(), t.iter().count()), (0, 0));
    }
}

#[test]
fn huge_entries_get_blocks_of_their_own() {
    let mut model = Model::new();
    model.insert(b"a".to_vec(), b"small".to_vec());
    model.insert(
        vec![b'b'; MAX_TABLE_KEY_LEN],
        vec![0xee; MAX_TABLE_VALUE_LEN],
    );
    model.insert(b"c".to_vec(), b"small".to_vec());
    model.insert(b"d".to_vec(), vec![0x11; MAX_TABLE_VALUE_LEN]);
    model.insert(b"e".to_vec(), Vec::new());
    for tagged in [false, true] {
        let t = mem_round_trip(
            &model,
            tagged,
            TABLE_BLOCK_BYTES,
            &[b"b".to_vec(), b"cc".to_vec()],
        );
        // a | huge b | c | huge d | e
        assert_eq!(t.blocks(), 5);
    }
}

#[test]
fn many_small_blocks() {
    let model: Model = (0u32..2000)
        .map(|i| {
            (
                format!("unit/{i:06}").into_bytes(),
                i.to_le_bytes().repeat(i as usize % 7),
            )
        })
        .collect();
    let probes = vec![b"unit/".to_vec(), b"unit/000999x".to_vec(), b"z".to_vec()];
    for tagged in [false, true] {
        let t = mem_round_trip(&model, tagged, 64, &probes);
        assert!(t.blocks() > 500, "{} blocks", t.blocks());
    }
}

#[test]
fn real_fs_round_trip_through_a_memory_map() {
    let dir = tempfile::tempdir().unwrap();
    let model: Model = (0u32..5000)
        .map(|i| {
            (
                format!("k{i:08}").into_bytes(),
                format!("value {i}").into_bytes(),
            )
        })
        .collect();
    for tagged in [false, true] {
        let size = write(
            Arc::new(RealFs),
            dir.path(),
            &model,
            spec(tagged, TABLE_BLOCK_BYTES),
            b"h",
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec![NAME.to_string()]);
        let path = dir.path().join(NAME);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
        let k = key();
        let t = Table::open(&RealFs, &path, tagged.then_some(&k)).unwrap();
        // The table is read through a map of its file, not a copy: the kernel
        // lists the mapping while the table is open.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let shown = path.canonicalize().unwrap().display().to_string();
        assert!(
            maps.lines().any(|l| l.ends_with(&shown)),
            "{shown} is not mapped while the table is open"
        );
        check(&t, &model, &[b"k".to_vec(), b"k00002500".to_vec()]);
        // Shared across threads by reference.
        std::thread::scope(|s| {
            for n in 0..2u32 {
                let t = &t;
                s.spawn(move || {
                    let k = format!("k{:08}", 4000 + n);
                    assert!(t.get(k.as_bytes()).unwrap().is_some());
                });
            }
        });
    }
}

#[test]
fn the_key_must_fit_the_table() {
    let model: Model = [(b"a".to_vec(), b"1".to_vec())].into();
    let fs = mem_fs();
    let path = PathBuf::from(DIR).join(NAME);
    let k = key();
    write(
        Arc::new(fs.clone()),
        Path::new(DIR),
        &model,
        spec(true, 64),
        b"",
    );
    let e = Table::open(&fs, &path, None).unwrap_err();
    assert!(matches!(e, Error::Key { .. }), "{e}");
    let wrong = Key::from_bytes([8; KEY_LEN]);
    let e = Table::open(&fs, &path, Some(&wrong)).unwrap_err();
    assert!(
        matches!(&e, Error::Tampered { path: p, .. } if *p == path),
        "{e}"
    );
    write(
        Arc::new(fs.clone()),
        Path::new(DIR),
        &model,
        spec(false, 64),
        b"",
    );
    let e = Table::open(&fs, &path, Some(&k)).unwrap_err();
    assert!(matches!(e, Error::Key { .. }), "{e}");
}

#[test]
fn writer_refuses_bad_keys_and_stays_usable() {
    let fs = mem_fs();
    let dir = Path::new(DIR);
    let mut w = TableWriter::create(Arc::new(fs.clone()), dir, NAME, spec(false, 64)).unwrap();
    w.add(b"b", b"1").unwrap();
    for bad in [&b"b"[..], b"a", b""] {
        let e = w.add(bad, b"x").unwrap_err();
        assert!(
            matches!(&e, Error::Mismatch { reason, .. } if reason.contains("strictly increasing")),
            "{e}"
        );
    }
    let long_key = vec![b'c'; MAX_TABLE_KEY_LEN + 1];
    let e = w.add(&long_key, b"x").unwrap_err();
    assert!(
        matches!(
            e,
            Error::TooLarge {
                what: "table key",
                ..
            }
        ),
        "{e}"
    );
    let e = w.add(b"c", &vec![0; MAX_TABLE_VALUE_LEN + 1]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::TooLarge {
                what: "table value",
                ..
            }
        ),
        "{e}"
    );
    w.add(b"c", b"2").unwrap();
    assert_eq!(w.entries(), 2);
    w.finish(b"").unwrap();
    let t = Table::open(&fs, &dir.join(NAME), None).unwrap();
    let model: Model = [
        (b"b".to_vec(), b"1".to_vec()),
        (b"c".to_vec(), b"2".to_vec()),
    ]
    .into();
    check(&t, &model, &[long_key]);
}

#[test]
fn a_dropped_writer_leaves_no_temp_file() {
    let fs = mem_fs();
    let dir = Path::new(DIR);
    let mut w = TableWriter::create(Arc::new(fs.clone()), dir, NAME, spec(false, 64)).unwrap();
    w.add(b"a", &[1; 500]).unwrap();
    w.add(b"b", &[2; 500]).unwrap();
    assert_eq!(fs.files(dir).len(), 1);
    drop(w);
    assert!(fs.files(dir).is_empty());
}

/// Writes a table of ~160 KiB (so several buffered writes) on `fs`; the error
/// of the first failing call, if any.
fn sim_write(fs: &SimFs) -> Result<u64, Error> {
    let mut w = TableWriter::create(Arc::new(fs.clone()), Path::new("/"), NAME, spec(true, 4096))?;
    for i in 0u16..400 {
        w.add(&i.to_be_bytes(), &[i as u8; 400])?;
    }
    w.finish(b"header")
}

#[test]
fn every_failing_operation_leaves_no_temp_and_no_target() {
    let clean = SimFs::new();
    let size = sim_write(&clean).unwrap();
    let ops = clean.op_log();
    let writes = ops.iter().filter(|o| **o == Op::Write).count();
    assert!(writes >= 3, "{ops:?}");
    let mut failed = 0;
    for at in 0..ops.len() as u64 {
        for kind in [
            FaultKind::Eio,
            FaultKind::Enospc,
            FaultKind::ShortWrite,
            FaultKind::Eintr,
        ] {
            if !ops[at as usize].accepts(kind) {
                continue;
            }
            let fs = SimFs::new();
            fs.inject(Some(Fault {
                at,
                kind,
                persistent: false,
            }));
            let r = sim_write(&fs);
            let files = fs.with_state(|s| s.live_files());
            let temps = files
                .keys()
                .filter(|p| p.to_string_lossy().contains(".tmp-"))
                .count();
            assert_eq!(
                temps, 0,
                "fault {kind:?} at op {at} ({:?}) left a temp file",
                ops[at as usize]
            );
            let target = files.get(Path::new(&format!("/{NAME}")));
            match (&r, kind) {
                // Retried, or a short write continued: the table is whole.
                (Ok(n), FaultKind::ShortWrite | FaultKind::Eintr) => {
                    assert_eq!(*n, size);
                    let t = Table::from_bytes(
                        NAME.into(),
                        Box::new(target.unwrap().clone()),
                        Some(&key()),
                    )
                    .unwrap();
                    t.verify().unwrap();
                }
                (Ok(_), _) => panic!(
                    "fault {kind:?} at op {at} ({:?}) not reported",
                    ops[at as usize]
                ),
                (Err(_), _) if ops[at as usize] == Op::SyncDir => {
                    // After the rename: the table is installed and whole, but
                    // not known durable; the caller must not rely on it.
                    failed += 1;
                    let t = Table::from_bytes(
                        NAME.into(),
                        Box::new(target.unwrap().clone()),
                        Some(&key()),
                    )
                    .unwrap();
                    t.verify().unwrap();
                }
                (Err(_), _) => {
                    failed += 1;
                    assert!(
                        target.is_none(),
                        "fault {kind:?} at op {at} left the target"
                    );
                }
            }
        }
    }
    assert!(
        failed >= ops.len(),
        "{failed} failures over {} ops",
        ops.len()
    );
}

#[test]
fn tables_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Table>();
    assert_send_sync::<TableWriter>();
}

/// A table writer used again after a failed write says so, as its own error:
/// not `Poisoned`, which speaks of a store that accepts no more writes.
#[test]
fn a_writer_used_after_a_failed_write_says_so() {
    let fs = SimFs::new();
    let mut w =
        TableWriter::create(Arc::new(fs.clone()), Path::new("/"), NAME, spec(true, 4096)).unwrap();
    // Every write from here on fails.
    fs.inject(Some(Fault {
        at: fs.op_log().len() as u64,
        kind: FaultKind::Eio,
        persistent: true,
    }));
    let mut first = None;
    for i in 0u32..10_000 {
        if let Err(e) = w.add(&i.to_be_bytes(), &[7; 400]) {
            first = Some(e);
            break;
        }
    }
    let first = first.expect("a buffered write reaches the file");
    assert!(
        matches!(
            &first,
            Error::Io {
                op: "write table temp file",
                ..
            }
        ),
        "{first:?}"
    );
    let again = w.add(b"\xff\xff\xff\xff\xff", b"v").unwrap_err();
    let Error::TableWriterFailed { path } = &again else {
        panic!("{again:?}")
    };
    assert!(path.to_string_lossy().contains(".tmp-"), "{path:?}");
    assert_eq!(
        again.to_string(),
        format!(
            "table writer for {} used after an earlier write to it failed: it accepts nothing more and installs no snapshot",
            path.display()
        )
    );
    let end = w.finish(b"header").unwrap_err();
    assert!(matches!(end, Error::TableWriterFailed { .. }), "{end:?}");
}
