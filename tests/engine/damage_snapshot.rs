//! Proves that flipping any bit of a snapshot (both codecs) is never silent: the
//! pure decoder rejects every flip, and an open either fails (changing no byte)
//! or falls back LOUDLY (`snapshot_fallbacks` names the file) to the previous
//! snapshot or to the empty state plus the full log, reaching the same state.
use crate::common;
use common::*;
use runlog::engine::snapfile::decode_snapshot;
use runlog::engine::{Codec, Error, Options, RealFs, Store, Vfs};
use std::path::Path;
use std::sync::Arc;

/// A store in memory: records 1..=per*rounds + 10, a compaction after each round.
fn build(codec: Codec, rounds: u64, per: u64) -> (Vec<(String, Vec<u8>)>, usize) {
    let fs = mem_fs();
    let s = Store::<Ledger>::open(Path::new(MEM_DIR), mem_opts(codec, &fs)).unwrap();
    let mut n = 0;
    for _ in 0..rounds {
        for _ in 0..per {
            let v = value(n);
            s.append(&entry(v, pad_of(v))).unwrap();
            n += 1;
        }
        s.compact().unwrap();
    }
    for _ in 0..10 {
        let v = value(n);
        s.append(&entry(v, pad_of(v))).unwrap();
        n += 1;
    }
    drop(s);
    (fs.files(Path::new(MEM_DIR)), n as usize)
}

fn snaps(files: &[(String, Vec<u8>)]) -> Vec<String> {
    files
        .iter()
        .filter(|f| f.0.ends_with(".snap"))
        .map(|f| f.0.clone())
        .collect()
}

/// Opens with `name` damaged by `p ^ mask`: an error changing nothing, or a loud
/// fallback to `fallback_seq` with the full state.
fn check_open(
    o: &Options,
    dir: &Path,
    name: &str,
    n: usize,
    fallback_seq: Option<Option<u64>>,
    snapshot: &dyn Fn() -> Vec<(String, Vec<u8>)>,
    what: &str,
) {
    let before = snapshot();
    match Store::<Ledger>::open(dir, o.clone()) {
        Ok(s) => {
            let r = s.recovery();
            let Some(expect_base) = fallback_seq else {
                panic!("{what}: opened although no fallback exists: {r:?}");
            };
            assert_eq!(r.snapshot_seq, expect_base, "{what}");
            assert!(
                r.snapshot_fallbacks
                    .iter()
                    .any(|(p, _)| p == &dir.join(name)),
                "{what}: silent fallback {:?}",
                r.snapshot_fallbacks
            );
            assert_eq!(s.read(|st| st.clone()), log_model(n), "{what}");
        }
        Err(e) => {
            assert!(
                fallback_seq.is_none(),
                "{what}: refused although {fallback_seq:?} exists: {e}"
            );
            match e {
                Error::Corrupt { path, .. } => assert_eq!(path, dir.join(name), "{what}"),
                e => panic!("{what}: {e}"),
            }
            assert_eq!(
                snapshot(),
                before,
                "{what}: a refused open modified the store"
            );
        }
    }
}

/// Flips every bit (every `step`th) of snapshot `name` and checks pure decode and open.
fn sweep(
    codec: Codec,
    files: &[(String, Vec<u8>)],
    n: usize,
    name: &str,
    fallback: Option<Option<u64>>,
) {
    let fs = mem_fs();
    let dir = Path::new(MEM_DIR);
    let o = mem_opts(codec, &fs);
    let good = files.iter().find(|f| f.0 == name).unwrap().1.clone();
    assert!(decode_snapshot(&good).is_ok());
    for b in 0..good.len() * 8 {
        let mut bad = good.clone();
        bad[b / 8] ^= 1 << (b % 8);
        let what = format!("{codec:?} {name} bit {b}");
        assert!(decode_snapshot(&bad).is_err(), "{what}: decodes");
        let mut damaged = files.to_vec();
        damaged.iter_mut().find(|f| f.0 == name).unwrap().1 = bad;
        fs.set_files(dir, &damaged);
        check_open(&o, dir, name, n, fallback, &|| fs.files(dir), &what);
    }
}

#[test]
fn damaged_only_snapshot_falls_back_to_empty_plus_full_log() {
    for codec in codecs() {
        let (files, n) = build(codec, 1, 50);
        assert_eq!(snaps(&files), ["snap-00000000000000000050.snap"]);
        sweep(
            codec,
            &files,
            n,
            "snap-00000000000000000050.snap",
            Some(None),
        );
    }
}

#[test]
fn damaged_newest_snapshot_falls_back_to_the_previous_one() {
    for codec in codecs() {
        let (files, n) = build(codec, 3, 40);
        let s = snaps(&files);
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(!files.iter().any(|f| f.0 == "seg-00000000000000000001.log"));
        sweep(codec, &files, n, &s[1], Some(Some(80)));
    }
}

#[test]
fn damaged_snapshot_without_a_fallback_is_refused() {
    for codec in codecs() {
        let (mut files, n) = build(codec, 3, 40);
        let s = snaps(&files);
        // The previous snapshot is gone (deleted by hand): nothing reaches back.
        files.retain(|f| f.0 != s[0]);
        sweep(codec, &files, n, &s[1], None);
    }
}

#[test]
fn damaged_snapshot_on_the_real_filesystem() {
    for codec in codecs() {
        let (files, n) = build(codec, 3, 40);
        let name = snaps(&files)[1].clone();
        let good = files.iter().find(|f| f.0 == name).unwrap().1.clone();
        let t = tempfile::tempdir().unwrap();
        let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
        let o = Options { vfs, ..opts(codec) };
        for b in (0..good.len() * 8).step_by(61) {
            let dir = t.path().join(format!("s{b}"));
            std::fs::create_dir(&dir).unwrap();
            std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
                .unwrap();
            for (f, bytes) in &files {
                let mut bytes = bytes.clone();
                if *f == name {
                    bytes[b / 8] ^= 1 << (b % 8);
                }
                std::fs::write(dir.join(f), bytes).unwrap();
            }
            let what = format!("{codec:?} real {name} bit {b}");
            check_open(
                &o,
                &dir,
                &name,
                n,
                Some(Some(80)),
                &|| dir_bytes(&dir),
                &what,
            );
        }
    }
}
