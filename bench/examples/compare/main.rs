//! Every contender in one run, on this machine, with the same ~120-byte record:
//! runlog beside raw fdatasync loops, SQLite (WAL, synchronous=FULL), redb,
//! okaywal and the "rewrite the whole JSON document" approach, plus replay and
//! parse rates. Repetitions are interleaved (round-robin over contenders) so a
//! noisy neighbour hurts all of them alike; each row is the median.
//!
//! ```text
//! cargo run --release -p runlog-bench --example compare -- [--quick] [--json] [--cost-curve]
//!     [--only NAME,PREFIX*] [--reps N] [--secs S]
//! cargo run --release -p runlog-bench --example compare -- --memory [--units N] [--json]
//! ```
//!
//! `--memory` is a separate mode (see `memory.rs`): resident memory of an
//! N-unit run (default 1,000,000) held by runlog vs the bare state.

// The workload the benches use too (bench/src/lib.rs).
use runlog_bench as common;
mod contenders;
mod cost_curve;
// Shared with the root package's `scale` example.
#[path = "../../../examples/shared/machine.rs"]
mod machine;
mod memory;
#[cfg(feature = "remote")]
mod remote;

pub use machine::machine;
use serde_json::{Value, json};
use std::time::Duration;

/// A measured contender: what one repetition returns is a rate (per second).
pub struct Contender {
    pub name: &'static str,
    pub threads: usize,
    /// What is counted: "ops/s" (durable operations) or "records/s".
    pub unit: &'static str,
    /// One pass per repetition, not a timed loop; run in the first `ONE_SHOT_REPS` rounds only.
    pub one_shot: bool,
    pub run: Box<dyn FnMut(Duration) -> Result<f64, String>>,
}

/// A contender that could not be set up or run, with why.
pub struct Skipped {
    pub name: &'static str,
    pub reason: String,
}

pub struct Config {
    pub quick: bool,
    pub reps: usize,
    pub secs: Duration,
    pub only: Option<Vec<String>>,
}

impl Config {
    pub fn wants(&self, name: &str) -> bool {
        self.only.as_ref().is_none_or(|o| {
            o.iter().any(|w| match w.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => name == w,
            })
        })
    }
}

/// Repetitions of the one-pass (CPU-bound) contenders.
const ONE_SHOT_REPS: usize = 3;

/// The ratios the issue sets as targets: (numerator, denominator, at least).
const TARGETS: &[(&str, &str, f64)] = &[
    ("runlog_sync_1t", "raw_fdatasync", 1.2),
    ("runlog_sync_1t", "sqlite_wal_full_1t", 1.0),
    ("runlog_sync_1t", "okaywal_1t", 1.0),
    ("runlog_group_64t", "runlog_sync_1t", 15.0),
    ("runlog_group_8t", "okaywal_8t", 1.2),
    ("runlog_sync_1t_state_1m", "runlog_sync_1t", 0.8),
    ("replay_binary_1m", "parse_binary_1m", 0.7),
    ("replay_jsonl_1m", "parse_jsonl_1m", 0.7),
    ("apply_pipe", "runlog_group_64t", 0.5),
    ("runlog_remote_async_8t", "runlog_group_8t", 0.9),
    ("runlog_remote_sync_64t", "runlog_group_64t", 0.25),
];

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--memory-child") {
        memory::child(&args[1..]);
        return;
    }
    #[cfg(feature = "remote")]
    let _delay = remote::delay_from_env().unwrap_or_else(|e| {
        eprintln!("compare: {e}");
        std::process::exit(2)
    });
    let has = |f: &str| args.iter().any(|a| a == f);
    let value = |f: &str| {
        args.iter()
            .position(|a| a == f)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let quick = has("--quick");
    let as_json = has("--json");
    let cfg = Config {
        quick,
        reps: value("--reps")
            .and_then(|v| v.parse().ok())
            .unwrap_or(if quick { 11 } else { 21 })
            .max(1),
        secs: Duration::from_secs_f64(
            value("--secs")
                .and_then(|v| v.parse().ok())
                .unwrap_or(if quick { 0.15 } else { 0.4 }),
        ),
        only: value("--only").map(|v| v.split(',').map(str::to_string).collect()),
    };
    if has("--memory") {
        let units = value("--units")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000_000u64)
            .max(1);
        match memory::run(units) {
            Ok(out) if as_json => {
                println!("{}", serde_json::to_string_pretty(&out).expect("json"))
            }
            Ok(out) => memory::print(&out),
            Err(e) => {
                eprintln!("memory: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    if has("--cost-curve") {
        let out = cost_curve::run(&cfg);
        if as_json {
            println!("{}", serde_json::to_string_pretty(&out).expect("json"));
        } else {
            cost_curve::print(&out);
        }
        return;
    }
    let started = std::time::Instant::now();
    let cache = contenders::Cache::default();
    let (mut contenders, skipped) = contenders::all(&cfg, &cache);
    let n = contenders.len();
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); n];
    // The same samples by round, for ratios paired within a round.
    let mut by_round: Vec<Vec<Option<f64>>> = vec![vec![None; cfg.reps]; n];
    let mut errors: Vec<Option<String>> = vec![None; n];
    // `rep` indexes each contender's per-round samples, not one slice.
    #[allow(clippy::needless_range_loop)]
    for rep in 0..cfg.reps {
        // Each round starts one contender later, so none always follows the same one.
        for i in (0..n).map(|k| (k + rep) % n) {
            let c = &mut contenders[i];
            if errors[i].is_some() || (c.one_shot && rep >= ONE_SHOT_REPS) {
                continue;
            }
            match (c.run)(cfg.secs) {
                Ok(rate) => {
                    samples[i].push(rate);
                    by_round[i][rep] = Some(rate);
                }
                Err(e) => errors[i] = Some(e),
            }
            eprintln!(
                "rep {}/{} {:<26} {:>12}",
                rep + 1,
                cfg.reps,
                c.name,
                samples[i]
                    .last()
                    .map_or("error".into(), |r| format!("{r:.0}"))
            );
        }
    }
    let mut rows: Vec<Value> = Vec::new();
    for (i, c) in contenders.iter().enumerate() {
        rows.push(match &errors[i] {
            Some(e) => json!({"name": c.name, "threads": c.threads, "unit": c.unit,
                              "ops_per_sec": null, "skipped": e}),
            None => json!({"name": c.name, "threads": c.threads, "unit": c.unit,
                           "ops_per_sec": median(&samples[i]),
                           "min": samples[i].iter().copied().fold(f64::INFINITY, f64::min),
                           "max": samples[i].iter().copied().fold(0.0, f64::max),
                           "reps": samples[i]}),
        });
    }
    for s in &skipped {
        rows.push(json!({"name": s.name, "ops_per_sec": null, "skipped": s.reason}));
    }
    let rate = |n: &str| {
        rows.iter()
            .find(|r| r["name"] == n)
            .and_then(|r| r["ops_per_sec"].as_f64())
    };
    // The disk's fsync latency shifts between regimes that last seconds, so the
    // ratio of two medians can compare different regimes; the median of ratios
    // taken within each round compares like with like and is the one judged.
    let paired = |a: &str, b: &str| {
        let ia = contenders.iter().position(|c| c.name == a)?;
        let ib = contenders.iter().position(|c| c.name == b)?;
        let r: Vec<f64> = (0..cfg.reps)
            .filter_map(|k| Some(by_round[ia][k]? / by_round[ib][k]?))
            .collect();
        (!r.is_empty()).then(|| median(&r))
    };
    let ratios: Vec<Value> = TARGETS
        .iter()
        .map(|(a, b, want)| {
            let of_medians = rate(a).zip(rate(b)).map(|(x, y)| x / y);
            let got = paired(a, b).or(of_medians);
            json!({"ratio": format!("{a} / {b}"), "value": got, "of_medians": of_medians,
                   "target": want, "met": got.map(|g| g >= *want)})
        })
        .collect();
    let out = json!({
        "machine": machine(),
        "reps": cfg.reps,
        "secs_per_rep": cfg.secs.as_secs_f64(),
        "elapsed_secs": started.elapsed().as_secs_f64(),
        "rows": rows,
        "ratios": ratios,
    });
    if as_json {
        println!("{}", serde_json::to_string_pretty(&out).expect("json"));
    } else {
        print_table(&out);
    }
}

/// The machine line every table starts with, from [`machine`]'s object.
pub fn print_machine(m: &Value) {
    println!(
        "machine: {} cores ({}), Linux {}, temp dir {} on {} ({})",
        m["cores"],
        m["cpu"].as_str().unwrap_or(""),
        m["kernel"].as_str().unwrap_or(""),
        m["temp_dir"].as_str().unwrap_or(""),
        m["temp_fs"].as_str().unwrap_or(""),
        m["temp_device"].as_str().unwrap_or("")
    );
}

fn print_table(out: &Value) {
    let m = &out["machine"];
    print_machine(m);
    println!(
        "median of {} interleaved rounds of {:.2} s (replay/parse/apply_pipe: {} one-pass rounds); {:.0} s in all\n",
        out["reps"],
        out["secs_per_rep"].as_f64().unwrap_or(0.0),
        ONE_SHOT_REPS,
        out["elapsed_secs"].as_f64().unwrap_or(0.0)
    );
    println!(
        "| {:<26} | {:>3} | {:>13} | {:>25} | {:<9} |",
        "contender", "thr", "median", "min .. max", "unit"
    );
    println!(
        "|{:-<28}|{:->5}|{:->15}|{:->27}|{:-<11}|",
        "", "", "", "", ""
    );
    for r in out["rows"].as_array().into_iter().flatten() {
        let name = r["name"].as_str().unwrap_or("");
        match r["ops_per_sec"].as_f64() {
            Some(v) => println!(
                "| {:<26} | {:>3} | {:>13.0} | {:>25} | {:<9} |",
                name,
                r["threads"].as_u64().unwrap_or(0),
                v,
                format!(
                    "{:.0} .. {:.0}",
                    r["min"].as_f64().unwrap_or(0.0),
                    r["max"].as_f64().unwrap_or(0.0)
                ),
                r["unit"].as_str().unwrap_or("")
            ),
            None => println!(
                "| {:<26} | skipped: {}",
                name,
                r["skipped"].as_str().unwrap_or("")
            ),
        }
    }
    println!(
        "\n| {:<48} | {:>7} | {:>10} | {:>6} | met |",
        "ratio (median of per-round ratios)", "value", "of medians", "target"
    );
    println!("|{:-<50}|{:->9}|{:->12}|{:->8}|-----|", "", "", "", "");
    for r in out["ratios"].as_array().into_iter().flatten() {
        let v = r["value"]
            .as_f64()
            .map_or("n/a".to_string(), |v| format!("{v:.2}"));
        let met = match r["met"].as_bool() {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "n/a",
        };
        let om = r["of_medians"]
            .as_f64()
            .map_or("n/a".to_string(), |v| format!("{v:.2}"));
        println!(
            "| {:<48} | {:>7} | {:>10} | {:>6} | {:<3} |",
            r["ratio"].as_str().unwrap_or(""),
            v,
            om,
            format!("{:.1}x", r["target"].as_f64().unwrap_or(0.0)),
            met
        );
    }
}
