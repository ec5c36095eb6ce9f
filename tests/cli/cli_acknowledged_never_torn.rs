//! Regression (issue 19): one bit flipped in record 38 of 41, each record
//! acknowledged by its own one-shot `runlog unit` process, was reported by
//! `verify` as a "torn tail … dropped by the next writer", `get` showed four
//! fewer units done, and the next `unit` call was acknowledged as seq 38 again.
//! Now the durability mark (FORMAT.md §5.7) proves every acknowledged record:
//! a flip in ANY record of such a run is corruption naming the segment and the
//! record's offset, for `verify`, `get` and the next writer alike (exit 1), and
//! no file changes. The same for the segment zeroed from byte 512 on.
use crate::cli_support::*;
use runlog::engine::scan::scan_segment;
use std::path::{Path, PathBuf};

const UNITS: usize = 41;

/// A run of `UNITS` units, each marked done by its own one-shot process.
fn one_shot_run(root: &Path, codec: &str) -> PathBuf {
    let units: Vec<String> = (0..UNITS).map(|i| format!("u{i}")).collect();
    let list = units.join(",");
    ok(
        root,
        &[
            "init", "--id", "r", "--task", "t", "--units", &list, "--codec", codec,
        ],
    );
    for u in &units[..UNITS - 1] {
        ok(root, &["unit", "r", u, "done"]);
    }
    let dir = root.join("runs").join("r");
    let mut segs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    assert_eq!(segs.len(), 1, "{segs:?}");
    segs.pop().unwrap()
}

/// (start, end) of every record in a segment.
fn records(seg: &[u8]) -> Vec<(u64, u64)> {
    let mut starts = vec![];
    let scan = scan_segment::<()>(seg, |_, _, off| {
        starts.push(off);
        Ok(())
    })
    .unwrap();
    let mut ends: Vec<u64> = starts[1..].to_vec();
    ends.push(scan.valid_len);
    starts.into_iter().zip(ends).collect()
}

fn refused_as_corrupt_at(root: &Path, seg: &Path, offset: u64, what: &str) {
    let before = tree_bytes_but_locks(root);
    for verb in [
        &["verify", "r"][..],
        &["get", "r"],
        &["unit", "r", "u40", "done"],
    ] {
        let o = runlog(root, verb);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{what}: {verb:?}: {t}");
        assert!(
            t.contains(&format!("offset {offset}")) && t.contains(&seg.display().to_string()),
            "{what}: {verb:?} names the segment and offset {offset}: {t}"
        );
        assert!(!t.contains("torn tail"), "{what}: {verb:?}: {t}");
    }
    assert_eq!(tree_bytes_but_locks(root), before, "{what}: a file changed");
}

#[test]
fn a_flipped_bit_in_any_acknowledged_record_is_corruption_with_its_offset() {
    for codec in ["jsonl", "binary"] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let seg = one_shot_run(root, codec);
        let clean = std::fs::read(&seg).unwrap();
        let recs = records(&clean);
        assert_eq!(
            recs.len(),
            UNITS,
            "{codec}: init and {} one-shot records",
            UNITS - 1
        );
        for (i, &(start, end)) in recs.iter().enumerate() {
            let mut bad = clean.clone();
            bad[((start + end) / 2) as usize] ^= 0x10;
            std::fs::write(&seg, &bad).unwrap();
            refused_as_corrupt_at(root, &seg, start, &format!("{codec} record {}", i + 1));
        }
        std::fs::write(&seg, &clean).unwrap();
        // Zeros from byte 512 on (issue 19's reproduction).
        let mut zeroed = clean.clone();
        zeroed[512..].fill(0);
        std::fs::write(&seg, &zeroed).unwrap();
        let at = recs.iter().find(|r| r.1 > 512).unwrap().0;
        refused_as_corrupt_at(root, &seg, at, &format!("{codec} zeroed from 512"));
        // Put back, the run goes on at the next seq.
        std::fs::write(&seg, &clean).unwrap();
        ok(root, &["unit", "r", "u40", "done"]);
        let v = ok(root, &["verify", "r"]);
        assert!(
            v.contains(&format!("{} records", UNITS + 1)),
            "{codec}: {v}"
        );
    }
}
