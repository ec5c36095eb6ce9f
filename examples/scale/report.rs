//! The human table (one row per size).

use serde_json::Value;

fn ms(v: &Value) -> String {
    v.as_f64().map_or("-".into(), |s| format!("{:.1}", s * 1e3))
}

fn secs(v: &Value) -> String {
    v.as_f64().map_or("-".into(), |s| format!("{s:.2}"))
}

fn mib(v: &Value) -> String {
    v.as_f64().map_or("-".into(), |m| format!("{m:.0}"))
}

fn num(v: &Value, digits: usize) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// Prints one row per size, then every error met, so none goes unseen.
pub fn print(out: &Value) {
    let m = &out["machine"];
    println!("{}", crate::binary::line(&out["binary"]));
    println!(
        "machine: {} cores ({}), Linux {}, temp dir {} on {} ({}); codec {}; medians of {} calls",
        m["cores"],
        m["cpu"].as_str().unwrap_or("?"),
        m["kernel"].as_str().unwrap_or("?"),
        m["temp_dir"].as_str().unwrap_or("?"),
        m["temp_fs"].as_str().unwrap_or("?"),
        m["temp_device"].as_str().unwrap_or("?"),
        out["codec"].as_str().unwrap_or("?"),
        out["reps"]
    );
    let head = [
        ("units", 9),
        ("build s", 8),
        ("open ms", 9),
        ("MiB", 6),
        ("unit ms", 9),
        ("MiB", 6),
        ("fsyncs", 6),
        ("status ms", 9),
        ("apply ack ms", 12),
        ("resume s", 8),
        ("MiB", 6),
        ("compact s", 9),
        ("MiB", 6),
        ("snap B/unit", 11),
        ("8w ckpt/s", 9),
        ("floor/s", 8),
        ("ratio", 6),
        ("atomic ms", 9),
    ];
    let line = |cells: &[String]| {
        let row: Vec<String> = cells
            .iter()
            .zip(head.iter())
            .map(|(c, (_, w))| format!("{c:>w$}"))
            .collect();
        println!("| {} |", row.join(" | "));
    };
    line(&head.iter().map(|(h, _)| h.to_string()).collect::<Vec<_>>());
    line(&head.iter().map(|(_, w)| "-".repeat(*w)).collect::<Vec<_>>());
    let mut errors = vec![];
    for s in out["sizes"].as_array().into_iter().flatten() {
        let n = s["units"].clone();
        collect_errors(s, &format!("{n} units"), &mut errors);
        if s.get("error").is_some() {
            continue;
        }
        let c = &s["concurrent"];
        line(&[
            n.to_string(),
            secs(&s["build"]["secs"]),
            ms(&s["open"]["secs"]),
            mib(&s["open"]["rss_mib"]),
            ms(&s["oneshot"]["secs"]),
            mib(&s["oneshot"]["rss_mib"]),
            num(&s["oneshot"]["fsyncs"], 0),
            ms(&s["status"]["secs"]),
            ms(&s["apply_first_ack"]["secs"]),
            secs(&s["resume"]["secs"]),
            mib(&s["resume"]["rss_mib"]),
            secs(&s["compaction"]["secs"]),
            mib(&s["compaction"]["rss_mib"]),
            num(&s["snapshot_bytes_per_unit"], 1),
            num(&c["checkpoints_per_sec"], 1),
            num(&c["version_per_sec"], 1),
            num(&c["ratio_to_floor"], 3),
            ms(&s["atomic_rewrite"]["secs"]),
        ]);
    }
    for e in errors {
        println!("{e}");
    }
}

/// The live cycle: one row per size; ratios are over the smallest size's median.
pub fn print_live(out: &Value) {
    let m = &out["machine"];
    println!("{}", crate::binary::line(&out["binary"]));
    println!(
        "machine: {} cores ({}), temp dir on {}; codec {}; live cycle, {} rounds at least",
        m["cores"],
        m["cpu"].as_str().unwrap_or("?"),
        m["temp_fs"].as_str().unwrap_or("?"),
        out["codec"].as_str().unwrap_or("?"),
        out["live_rounds"]
    );
    println!(
        "| units | rounds | apply ms | unit ms med / p90 / worst | (× smallest med) | MiB max | status ms med / p90 / worst | (× smallest med) | MiB max | disk B/unit | snaps |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut errors = vec![];
    for s in out["sizes"].as_array().into_iter().flatten() {
        let n = s["units"].clone();
        collect_errors(s, &format!("{n} units"), &mut errors);
        let l = &s["live"];
        if s.get("error").is_some() || l.is_null() {
            continue;
        }
        let three = |c: &Value| {
            format!(
                "{} / {} / {}",
                ms(&c["secs"]),
                ms(&c["secs_p90"]),
                ms(&c["secs_max"])
            )
        };
        let x = |c: &Value| {
            format!(
                "{} / {} / {}",
                num(&c["median"], 2),
                num(&c["p90"], 2),
                num(&c["worst"], 2)
            )
        };
        let r = &l["vs_smallest_median"];
        println!(
            "| {n} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            l["rounds"],
            ms(&l["apply"]["secs"]),
            three(&l["oneshot"]),
            x(&r["oneshot"]),
            mib(&l["oneshot"]["rss_mib_max"]),
            three(&l["status"]),
            x(&r["status"]),
            mib(&l["status"]["rss_mib_max"]),
            num(&l["disk_bytes_per_unit"], 1),
            l["snapshot_files"],
        );
    }
    let rows: Vec<&Value> = out["sizes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["live"]["oneshots_in_a_row"]["calls"].as_u64() > Some(0))
        .collect();
    if !rows.is_empty() {
        println!(
            "\n| units | one-shot calls in a row | ms med / p90 / worst | (× smallest cycle med) | MiB max |"
        );
        println!("|---:|---:|---:|---:|---:|");
    }
    for s in rows {
        let c = &s["live"]["oneshots_in_a_row"];
        let r = &s["live"]["vs_smallest_median"]["oneshots_in_a_row"];
        println!(
            "| {} | {} | {} / {} / {} | {} / {} / {} | {} |",
            s["units"],
            c["calls"],
            ms(&c["secs"]),
            ms(&c["secs_p90"]),
            ms(&c["secs_max"]),
            num(&r["median"], 2),
            num(&r["p90"], 2),
            num(&r["worst"], 2),
            mib(&c["rss_mib_max"]),
        );
    }
    for e in errors {
        println!("{e}");
    }
}

/// Every `"error"` string anywhere under `v`, with where it was.
fn collect_errors(v: &Value, at: &str, out: &mut Vec<String>) {
    if let Value::Object(map) = v {
        for (k, x) in map {
            match (k.as_str(), x) {
                ("error" | "fsyncs_error" | "snapshot_error", Value::String(e)) => {
                    out.push(format!("{at}: {e}"))
                }
                _ => collect_errors(x, &format!("{at} {k}"), out),
            }
        }
    }
}

/// The processes mode's table: one row per size and writer count.
pub fn print_processes(out: &Value) {
    let m = &out["machine"];
    println!("{}", crate::binary::line(&out["binary"]));
    println!(
        "machine: {} cores ({}), Linux {}, temp dir on {}; codec {}",
        m["cores"],
        m["cpu"].as_str().unwrap_or("?"),
        m["kernel"].as_str().unwrap_or("?"),
        m["temp_fs"].as_str().unwrap_or("?"),
        out["codec"].as_str().unwrap_or("?"),
    );
    println!(
        "{:>9} {:>7} {:>6} {:>10} {:>9} {:>6} {:>11} {:>12}  counted by",
        "units", "writers", "calls", "ckpt/s", "floor/s", "ratio", "range", "fdatasync/ck"
    );
    let f = |v: &Value, d: usize| v.as_f64().map_or("-".to_string(), |x| format!("{x:.d$}"));
    for s in out["sizes"].as_array().into_iter().flatten() {
        let p = &s["processes"];
        for r in p["rows"].as_array().into_iter().flatten() {
            if let Some(e) = r["error"].as_str().filter(|_| r["ok"].is_null()) {
                println!("{:>9} {:>7} error: {e}", s["units"], r["writers"]);
                continue;
            }
            let range = match r["ratio_range"].as_array().map(Vec::as_slice) {
                Some([lo, hi]) => format!("{}–{}", f(lo, 2), f(hi, 2)),
                _ => "-".into(),
            };
            println!(
                "{:>9} {:>7} {:>6} {:>10} {:>9} {:>6} {:>11} {:>12}  {}",
                s["units"],
                r["writers"],
                r["calls"],
                f(&r["checkpoints_per_sec"], 0),
                f(&r["floor_per_sec"], 0),
                f(&r["ratio_to_floor"], 2),
                range,
                f(&r["fdatasyncs_per_checkpoint"], 2),
                p["counted_by"].as_str().unwrap_or("?"),
            );
            if let Some(e) = r["error"].as_str() {
                println!("          {} calls failed; first: {e}", r["failed"]);
            }
            let sv = &r["served"];
            if sv.is_object() {
                let range = match sv["ratio_range"].as_array().map(Vec::as_slice) {
                    Some([lo, hi]) => format!("{}–{}", f(lo, 2), f(hi, 2)),
                    _ => "-".into(),
                };
                println!(
                    "{:>9} {:>7} {:>6} {:>10} {:>9} {:>6} {:>11} {:>12}  served: {} of {} acknowledged by `runlog serve --commit-delay {}`",
                    "",
                    "served",
                    "",
                    f(&sv["checkpoints_per_sec"], 0),
                    "",
                    f(&sv["ratio_to_floor"], 2),
                    range,
                    f(&sv["fdatasyncs_per_checkpoint"], 2),
                    sv["acked_by_server"],
                    sv["ok"],
                    sv["commit_delay_secs"],
                );
                if let Some(e) = sv["error"].as_str() {
                    println!(
                        "          served: {} calls failed; first: {e}",
                        sv["failed"]
                    );
                }
            }
        }
    }
}
