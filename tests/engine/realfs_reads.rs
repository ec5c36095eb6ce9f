//! `RealFs::read_from` (a one-shot writer's catch-up read, FORMAT.md §5.8)
//! reads a file's tail in one call into a buffer sized from the file's length;
//! it returns exactly what the trait's plain definition does (the simulator's:
//! the whole file read, then sliced) for every offset and limit, past the end
//! included. `RealFs::open_write_read_from` reads the same through one
//! descriptor that it then hands back for writing.
use runlog::engine::sim::SimFs;
use runlog::engine::{RealFs, Vfs};
use std::path::Path;

#[test]
fn read_from_matches_the_plain_definition_at_every_offset_and_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
    let real = tmp.path().join("seg");
    std::fs::write(&real, &bytes).unwrap();
    let sim = SimFs::new();
    sim.put(Path::new("/d/seg"), bytes.clone());
    let mut checked = 0;
    for offset in (0..=5100u64).step_by(97).chain([4999, 5000, 5001]) {
        for max in [0usize, 1, 511, 4096, 5000, 1 << 20] {
            let a = RealFs.read_from(&real, offset, max).unwrap();
            let b = sim.read_from(Path::new("/d/seg"), offset, max).unwrap();
            assert_eq!(a, b, "offset {offset} max {max}");
            checked += 1;
        }
    }
    assert!(checked > 300);
    // A missing file is NotFound, as the catch-up expects of a rotated-away segment.
    let e = RealFs
        .read_from(&tmp.path().join("gone"), 0, 10)
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn open_write_read_from_reads_what_read_from_does_and_writes_through_the_same_file() {
    let tmp = tempfile::tempdir().unwrap();
    let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
    let path = tmp.path().join("seg");
    let mut checked = 0;
    for offset in (0..=5100u64).step_by(97).chain([4999, 5000, 5001]) {
        for max in [0usize, 1, 511, 4096, 5000, 1 << 20] {
            std::fs::write(&path, &bytes).unwrap();
            let want = RealFs.read_from(&path, offset, max).unwrap();
            let (f, got) = RealFs.open_write_read_from(&path, offset, max).unwrap();
            assert_eq!(got, want, "offset {offset} max {max}");
            // The handle writes the file it read (an append at its end).
            runlog::engine::vfs::write_all_at(f.as_ref(), b"next", 5000).unwrap();
            let now = std::fs::read(&path).unwrap();
            assert_eq!((&now[..5000], &now[5000..]), (&bytes[..], &b"next"[..]));
            checked += 1;
        }
    }
    assert!(checked > 300);
    // A missing file is NotFound (the catch-up's rotated-away segment), and a
    // symlink is never followed.
    let e = RealFs
        .open_write_read_from(&tmp.path().join("gone"), 0, 10)
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    assert!(RealFs.open_write_read_from(&link, 0, 10).is_err());
    assert_eq!(
        std::fs::read(&path).unwrap().len(),
        5004,
        "nothing written through the link"
    );
}
