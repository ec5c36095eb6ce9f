//! Proves eight processes writing to one run at once lose nothing: each waits
//! for the writer lock and every update lands.
use crate::cli_support;
use cli_support::*;

#[test]
fn eight_parallel_writers_lose_nothing() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().to_path_buf();
    ok(&root, &["init", "--id", "par", "--task", "parallel"]);
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let root = root.clone();
            std::thread::spawn(move || {
                for i in 0..25 {
                    let unit = format!("w{w}-u{i}");
                    let o = runlog(
                        &root,
                        &["unit", "par", &unit, "done", "--lock-timeout", "60"],
                    );
                    assert_eq!(
                        o.status.code(),
                        Some(0),
                        "{unit}: {}",
                        String::from_utf8_lossy(&o.stderr)
                    );
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let doc = ok_json(&root, &["get", "par"]);
    let units = doc["units"].as_object().unwrap();
    assert_eq!(units.len(), 200);
    assert!(units.values().all(|u| u["status"] == "done"));
    // init + 200 units, none twice: the last seq is 201. (The log may start
    // later: a delta flush trims what its table holds, FORMAT.md §14.)
    let dump = ok(&root, &["dump", "par"]);
    let seqs: Vec<u64> = dump
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs.last(), Some(&201), "init + 200 units, none twice");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
}
