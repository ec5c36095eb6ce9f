//! A scan of a mapped table keeps only a window of it resident: iterating a
//! table end to end (a streamed document, a resume set, the view's lists)
//! lets go of the pages behind it every `RELEASE_EVERY` bytes, so a scan of a
//! 10M-unit run's table does not hold the whole file in the process's memory.
//! Measured on the map itself, as the kernel counts it (/proc/self/smaps).
use runlog::engine::table::{RELEASE_EVERY, Table, TableSpec, TableWriter};
use runlog::engine::{Codec, RealFs, Vfs};
use std::path::Path;
use std::sync::Arc;

const NAME: &str = "snap-00000000000000000007.snap";

/// The resident KiB of the mapping of `file`, from /proc/self/smaps.
fn resident_kib(file: &Path) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let want = file.to_str()?;
    let mut in_map = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            in_map = line.ends_with(want);
        } else if in_map && first == "Rss:" {
            return line.split_whitespace().nth(1)?.parse().ok();
        }
    }
    None
}

#[test]
fn a_full_scan_keeps_a_window_of_the_mapped_table_resident() {
    let dir = tempfile::tempdir().unwrap();
    let vfs: Arc<dyn Vfs> = Arc::new(RealFs);
    let spec = TableSpec {
        codec: Codec::Binary,
        seq: 7,
        tagging: None,
        block_bytes: 4096,
        parent: None,
        page_entries: runlog::engine::table::TABLE_PAGE_ENTRIES,
    };
    // About 48 MiB: six times the release step.
    let value = vec![0x5au8; 500];
    let n = 100_000u32;
    let mut w = TableWriter::create(vfs.clone(), dir.path(), NAME, spec).unwrap();
    for i in 0..n {
        w.add(format!("unit-{i:08}").as_bytes(), &value).unwrap();
    }
    w.finish(b"header").unwrap();
    let file = dir.path().join(NAME);
    let size = std::fs::metadata(&file).unwrap().len();
    assert!(size > 6 * RELEASE_EVERY as u64, "table of {size} bytes");

    let t = Table::open(vfs.as_ref(), &file, None).unwrap();
    let mut seen = 0u32;
    let mut peak = 0u64;
    for (k, e) in t.iter().enumerate() {
        let (key, v) = e.unwrap();
        assert_eq!(key, format!("unit-{k:08}").as_bytes());
        assert_eq!(v, value.as_slice());
        seen += 1;
        if k % 5_000 == 0 {
            peak = peak.max(resident_kib(&file).expect("the table's map in smaps"));
        }
    }
    assert_eq!(seen, n);
    let end = resident_kib(&file).expect("the table's map in smaps");
    let whole = size / 1024;
    // The window, the block being read, read-ahead around the faults, and the
    // index at the end of the file: well under half of the file at any time.
    let bound = 2 * (RELEASE_EVERY as u64 / 1024) + whole / 8;
    assert!(
        peak.max(end) < bound && bound < whole,
        "resident during the scan: {peak} KiB at most, {end} KiB at its end; \
         the file is {whole} KiB, the bound {bound} KiB"
    );
    // Lookups after the scan read the released pages again: the same bytes.
    for i in [0u32, n / 2, n - 1] {
        assert_eq!(
            t.get(format!("unit-{i:08}").as_bytes()).unwrap(),
            Some(value.as_slice())
        );
    }
}
