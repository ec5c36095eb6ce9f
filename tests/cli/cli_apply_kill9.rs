//! Proves `apply` killed with SIGKILL mid-stream, again and again, loses no
//! acknowledged transition: on reopen every acked one is present, in order,
//! none twice. `RUNLOG_SOAK_ITERS` sets the number of kills (default 20).
use crate::cli_support;
use cli_support::*;
use runlog::run::Runs;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

/// The `k` values of the open items, in order.
fn items(root: &std::path::Path) -> Vec<u64> {
    let doc = Runs::new(root).read("k").unwrap();
    doc.open_items
        .iter()
        .map(|i| i.item.0["k"].as_u64().unwrap())
        .collect()
}

#[test]
fn sigkill_mid_stream_never_loses_an_acked_transition() {
    let iters: u64 = std::env::var("RUNLOG_SOAK_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let d = tempfile::tempdir().unwrap();
    let root = d.path().to_path_buf();
    ok(&root, &["init", "--id", "k", "--task", "kill -9 soak"]);
    let mut total_acked = 0u64;
    for it in 0..iters {
        let present = items(&root);
        assert_eq!(
            present,
            (0..present.len() as u64).collect::<Vec<_>>(),
            "gap or duplicate"
        );
        let next = present.len() as u64;
        let mut child = cmd(&root)
            .args(["apply", "k"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let feeder = std::thread::spawn(move || {
            // Bursts of lines, so some arrive together and share one fsync.
            let mut k = next;
            for burst in 0..200u64 {
                let mut text = String::new();
                for _ in 0..(1 + burst % 7) {
                    text.push_str(&format!("{{\"op\":\"item\",\"item\":{{\"k\":{k}}}}}\n"));
                    k += 1;
                }
                if stdin.write_all(text.as_bytes()).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        let kill_after = 3 + (it * 37) % 60;
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut acked = 0usize;
        let mut last_seq = 0;
        let mut line = String::new();
        while acked < kill_after as usize {
            line.clear();
            if out.read_line(&mut line).unwrap() == 0 {
                break;
            }
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            let seq = v["seq"]
                .as_u64()
                .unwrap_or_else(|| panic!("error ack {line}"));
            assert!(seq > last_seq);
            last_seq = seq;
            acked += 1;
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        feeder.join().unwrap();
        total_acked += acked as u64;

        let after = items(&root);
        assert_eq!(
            after,
            (0..after.len() as u64).collect::<Vec<_>>(),
            "iteration {it}: out of order or twice"
        );
        assert!(
            after.len() >= next as usize + acked,
            "iteration {it}: {} present < {next} + {acked} acked",
            after.len()
        );
    }
    assert!(total_acked >= iters * 3);
}
