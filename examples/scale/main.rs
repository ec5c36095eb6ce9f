//! What opening a run costs against run size. For each size N a run of N units
//! is built through the library (a snapshot plus a 1,000-record tail), then
//! every way a process touches it is measured from outside, in a child process:
//! opening it for writing, a one-shot `runlog unit`, `status`, `apply` to its
//! first ack, `resume`, a compaction, and eight one-shot writers at once beside
//! the bare cost of spawning `runlog --version`.
//!
//! With `--live ROUNDS` it measures the live cycle instead (`live.rs`): after
//! the build, ROUNDS times one `runlog apply` of `--live-batch` random
//! transitions, then a one-shot `runlog unit` and a `status`, each a whole
//! process; then `--live-oneshots` one-shot calls in a row with nothing
//! between them; medians, p90 and worst, against the smallest size's medians.
//!
//! ```text
//! cargo build --release --features cli
//! cargo run --release --example scale -- [--units 1000,100000,1000000] [--reps 5]
//!     [--json] [--out FILE] [--bin PATH] [--codec jsonl|binary] [--atomic] [--latency]
//!     [--writers 8] [--spawns 400] [--concurrent-budget SECS] [--tail 1000] [--batch 10000]
//!     [--live ROUNDS] [--live-batch 2000] [--live-secs SECS] [--live-oneshots 0]
//!     [--processes 1,2,8,32] [--rounds 5] [--serve] [--serve-commit-delay SECS]
//! ```
//!
//! With `--processes COUNTS` it measures many one-shot writer processes at
//! once instead (`processes.rs`): for each count, checkpoints/s of that many
//! concurrent `runlog unit` spawners against the same spawners running
//! `runlog --version` (the process floor), and fdatasyncs per checkpoint,
//! counted by `perf stat`: `--rounds` rounds of the two side by side per
//! count, medians quoted (the ratio's with its range).
//!
//! Times are wall clock from the parent (spawn to reap); peak RSS is the
//! child's `ru_maxrss` from `wait4`. Per-call rows are medians of `--reps`
//! calls, interleaved (one of each per round). The fsyncs of one one-shot
//! call are counted under `strace -f -c` when strace is installed, else null.
//! The 8-writer row spawns `--spawns` calls, fewer at sizes where one call is
//! slow (about `--concurrent-budget` seconds of work on the machine's cores),
//! and is skipped, saying why, when eight such processes would not fit in the
//! memory available. A failed measurement is reported in its place.

mod args;
mod atomic;
mod binary;
mod build;
mod child;
mod latency;
mod live;
#[path = "../shared/machine.rs"]
mod machine;
mod measure;
mod processes;
mod report;

use args::{Config, USAGE, parse_args};
use build::{Pool, RUN_ID};
use measure::{Ctx, Samples};
use runlog::engine::Codec;
use runlog::run::Runs;
use serde_json::{Value, json};
use std::path::Path;
use std::process::ExitCode;

fn arg<T: std::str::FromStr>(rest: &[String], i: usize, what: &str) -> Result<T, String> {
    rest.get(i)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("child: argument {i} ({what}) missing or malformed"))
}

fn codec_name(c: Codec) -> &'static str {
    match c {
        Codec::Jsonl => "jsonl",
        _ => "binary",
    }
}

/// `--child MODE ROOT [ARGS…]`: work done in a child process, so that this
/// (parent) process never grows. On Linux a spawned child's `ru_maxrss` starts
/// at its parent's peak (the spawn shares the parent's memory until `exec`),
/// so a parent that had built a large run in-process would hide every child's
/// own peak under its own.
fn child_main(mode: &str, root: &Path, rest: &[String]) -> Result<Value, String> {
    if matches!(mode, "build" | "tail" | "atomic") && arg::<u64>(rest, 0, "units")? < 2 {
        return Err("child: at least 2 units".into());
    }
    match mode {
        "build" => {
            let n: u64 = arg(rest, 0, "units")?;
            let codec = match rest.get(1).map(String::as_str) {
                Some("binary") => Codec::Binary,
                _ => Codec::Jsonl,
            };
            let mut pool = Pool::new(n);
            let b = build::build(
                root,
                n,
                codec,
                arg(rest, 2, "batch")?,
                arg(rest, 3, "tail")?,
                &mut pool,
            )?;
            return Ok(json!({
                "secs": b.secs, "compact_secs": b.compact_secs, "records": b.records,
                "next": pool.next_index(),
            }));
        }
        "tail" => {
            let mut pool = Pool::at(arg(rest, 0, "units")?, arg(rest, 3, "next")?);
            let written = build::append_tail(
                root,
                arg(rest, 1, "count")?,
                arg(rest, 2, "batch")?,
                &mut pool,
            )?;
            return Ok(json!({"written": written, "next": pool.next_index()}));
        }
        "atomic" => return atomic::measure(root, arg(rest, 0, "units")?, arg(rest, 1, "reps")?),
        "spawn" => return processes::child(root, rest),
        _ => {}
    }
    let run = Runs::new(root)
        .open(RUN_ID)
        .map_err(|e| format!("open: {e}"))?;
    let units = run.counts().total();
    match mode {
        "open" => Ok(json!({"units": units, "last_seq": run.store().last_seq()})),
        "compact" => {
            let c = run.compact().map_err(|e| format!("compact: {e}"))?;
            Ok(json!({
                "units": units,
                "compact_secs": c.elapsed.as_secs_f64(),
                "snapshot_bytes": c.snapshot_bytes,
            }))
        }
        "latency" => latency::measure(&run),
        other => Err(format!("unknown child mode {other:?}")),
    }
}

/// Runs `--child MODE ROOT ARGS…` and parses the JSON it prints.
fn in_child(me: &Path, mode: &str, root: &Path, args: &[String]) -> Result<Value, String> {
    let mut cmd = std::process::Command::new(me);
    cmd.args(["--child", mode]).arg(root).args(args);
    let f = child::run(&mut cmd)?.ok(&format!("child {mode}"))?;
    serde_json::from_slice(&f.stdout).map_err(|e| format!("child {mode} output: {e}"))
}

fn result(r: Result<Value, String>) -> Value {
    r.unwrap_or_else(|e| json!({"error": e}))
}

/// This process's own peak RSS (VmHWM), MiB: the floor under every child's
/// `ru_maxrss` (see `child_main`).
fn parent_peak_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// MemAvailable from /proc/meminfo, MiB.
fn mem_available_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// How many one-shot spawns the 8-writer row makes at this size.
fn concurrent_spawns(cfg: &Config, oneshot_secs: Option<f64>) -> u64 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let floor = 2 * cfg.writers as u64;
    let n = match oneshot_secs {
        Some(s) if s > 0.0 => {
            ((cfg.concurrent_budget * cores / s) as u64).clamp(floor, cfg.spawns.max(floor))
        }
        _ => cfg.spawns,
    };
    n - n % 2
}

/// A fresh temp root with the run of `n` units built in it by a child
/// (`root/` under the temp dir), and what the build reported; on failure the
/// size's result, naming what failed.
fn build_in_child(cfg: &Config, me: &Path, n: u64) -> Result<(tempfile::TempDir, Value), Value> {
    let tmp =
        tempfile::tempdir().map_err(|e| json!({"units": n, "error": format!("tempdir: {e}")}))?;
    eprintln!("{n} units: building");
    let build_args = [
        n.to_string(),
        codec_name(cfg.codec).into(),
        cfg.batch.to_string(),
        cfg.tail.to_string(),
    ];
    let built = in_child(me, "build", &tmp.path().join("root"), &build_args)
        .map_err(|e| json!({"units": n, "error": format!("build: {e}")}))?;
    Ok((tmp, built))
}

/// The live cycle at one size, in a fresh temp root.
fn live_size(cfg: &Config, me: &Path, n: u64) -> Value {
    let (tmp, built) = match build_in_child(cfg, me, n) {
        Ok(b) => b,
        Err(e) => return e,
    };
    let root = tmp.path().join("root");
    eprintln!(
        "{n} units: built in {:.1} s; live cycle",
        built["secs"].as_f64().unwrap_or(0.0)
    );
    let ctx = Ctx {
        bin: &cfg.bin,
        me,
        root: &root,
    };
    let plan = live::Plan {
        batches: cfg.live,
        batch: cfg.live_batch,
        min_secs: cfg.live_secs,
        oneshots: cfg.live_oneshots,
    };
    json!({"units": n, "build": built, "live": live::cycle(&ctx, n, built["next"].as_u64().unwrap_or(0), plan)})
}

/// Many one-shot writer processes at one size, in a fresh temp root.
fn processes_size(cfg: &Config, me: &Path, n: u64) -> Value {
    let (tmp, built) = match build_in_child(cfg, me, n) {
        Ok(b) => b,
        Err(e) => return e,
    };
    let root = tmp.path().join("root");
    let mut pool = Pool::at(n, built["next"].as_u64().unwrap_or(0));
    let ctx = Ctx {
        bin: &cfg.bin,
        me,
        root: &root,
    };
    let processes = processes::measure(&ctx, n, &mut pool, cfg, tmp.path());
    json!({"units": n, "build": built, "processes": processes})
}

/// Each live call's median, p90 and worst over the smallest size's median.
fn live_ratios(sizes: &mut [Value]) {
    let base = sizes.first().map(|s| s["live"].clone()).unwrap_or_default();
    for s in sizes.iter_mut() {
        let mut r = serde_json::Map::new();
        for call in ["oneshot", "status", "apply", "oneshots_in_a_row"] {
            // One-shot calls in a row are compared with the cycle's one-shot.
            let b = match call {
                "oneshots_in_a_row" => base["oneshot"]["secs"].as_f64(),
                _ => base[call]["secs"].as_f64(),
            };
            let of = |k: &str| match (s["live"][call][k].as_f64(), b) {
                (Some(x), Some(b)) if b > 0.0 => json!(x / b),
                _ => Value::Null,
            };
            r.insert(
                call.into(),
                json!({"median": of("secs"), "p90": of("secs_p90"), "worst": of("secs_max")}),
            );
        }
        s["live"]["vs_smallest_median"] = Value::Object(r);
    }
}

/// Every measurement at one size, in a fresh temp root.
fn measure_size(cfg: &Config, me: &Path, n: u64) -> Value {
    let (tmp, built) = match build_in_child(cfg, me, n) {
        Ok(b) => b,
        Err(e) => return e,
    };
    let root = tmp.path().join("root");
    let mut pool = Pool::at(n, built["next"].as_u64().unwrap_or(0));
    let reserved = pool.reserved();
    let snapshot_bytes = build::newest_snapshot_bytes(&root);
    let ctx = Ctx {
        bin: &cfg.bin,
        me,
        root: &root,
    };
    eprintln!(
        "{n} units: built in {:.1} s; measuring",
        built["secs"].as_f64().unwrap_or(0.0)
    );
    let fsyncs = measure::oneshot_fsyncs(&ctx, &reserved, tmp.path());
    let mut open = Samples::default();
    let mut oneshot = Samples::default();
    let mut status = Samples::default();
    let mut apply = Samples::default();
    let mut resume = Samples::default();
    for _ in 0..cfg.reps {
        open.push(measure::open(&ctx, n));
        oneshot.push(measure::oneshot(&ctx, &reserved));
        status.push(measure::reader(&ctx, &["status", RUN_ID]));
        apply.push(measure::apply_first_ack(&ctx, &reserved));
        resume.push(measure::reader(&ctx, &["--json", "resume", RUN_ID]));
    }
    let mut oneshot_json = oneshot.to_json();
    oneshot_json["fsyncs"] = match fsyncs {
        None => Value::Null,
        Some(Ok(k)) => json!(k),
        Some(Err(e)) => {
            oneshot_json["fsyncs_error"] = json!(e);
            Value::Null
        }
    };
    eprintln!("{n} units: concurrent writers");
    let spawns = concurrent_spawns(cfg, oneshot.median_secs());
    let need = oneshot.median_rss_mib().unwrap_or(0.0) * cfg.writers as f64;
    let concurrent = match mem_available_mib() {
        Some(avail) if need > 0.7 * avail => json!({
            "writers": cfg.writers,
            "error": format!("skipped: {} writers x {:.0} MiB each would need {need:.0} MiB of {avail:.0} MiB available", cfg.writers, need / cfg.writers as f64),
        }),
        _ => measure::concurrent(&ctx, cfg.writers, spawns, &mut pool),
    };
    eprintln!("{n} units: compaction");
    let tail_args = [
        n.to_string(),
        cfg.tail.to_string(),
        cfg.batch.to_string(),
        pool.next_index().to_string(),
    ];
    let compaction =
        result(in_child(me, "tail", &root, &tail_args).and_then(|_| measure::compaction(&ctx, n)));
    let latency = if cfg.latency {
        eprintln!("{n} units: append latency beside a compaction");
        result(in_child(me, "latency", &root, &[]))
    } else {
        Value::Null
    };
    let atomic = if cfg.atomic {
        eprintln!("{n} units: atomic rewrite");
        result(in_child(
            me,
            "atomic",
            tmp.path(),
            &[n.to_string(), cfg.reps.to_string()],
        ))
    } else {
        Value::Null
    };
    json!({
        "units": n,
        "build": built,
        "open": open.to_json(),
        "oneshot": oneshot_json,
        "status": status.to_json(),
        "apply_first_ack": apply.to_json(),
        "resume": resume.to_json(),
        "compaction": compaction,
        "snapshot_bytes": snapshot_bytes.as_ref().ok(),
        "snapshot_bytes_per_unit": snapshot_bytes.as_ref().ok().map(|&b| b as f64 / n as f64),
        "snapshot_error": snapshot_bytes.err(),
        "concurrent": concurrent,
        "atomic_rewrite": atomic,
        "append_latency": latency,
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, mode, root, rest @ ..] = args.as_slice()
        && flag == "--child"
    {
        return match child_main(mode, Path::new(root), rest) {
            Ok(v) => {
                println!("{v}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("scale --child {mode}: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let cfg = match parse_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("scale: {e}");
            return ExitCode::from(2);
        }
    };
    if !cfg.bin.is_file() {
        eprintln!(
            "scale: no runlog binary at {} (run `cargo build --release --features cli` first, or pass --bin)",
            cfg.bin.display()
        );
        return ExitCode::from(2);
    }
    let me = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("scale: cannot find this example's own path: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Other tenants of the machine skew every figure: say how busy it was.
    let loadavg = std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .ok();
    let started = std::time::Instant::now();
    let mut sizes: Vec<Value> = cfg
        .units
        .iter()
        .map(|&n| match cfg.live {
            _ if !cfg.processes.is_empty() => processes_size(&cfg, &me, n),
            0 => measure_size(&cfg, &me, n),
            _ => live_size(&cfg, &me, n),
        })
        .collect();
    if cfg.live > 0 {
        live_ratios(&mut sizes);
    }
    let out = json!({
        "machine": machine::machine(),
        "binary": binary::describe(&cfg.bin),
        "loadavg_at_start": loadavg,
        "codec": codec_name(cfg.codec),
        "parent_peak_rss_mib": parent_peak_mib(),
        "reps": cfg.reps,
        "tail": cfg.tail,
        "live_rounds": cfg.live,
        "elapsed_secs": started.elapsed().as_secs_f64(),
        "sizes": sizes,
    });
    let text = serde_json::to_string_pretty(&out).unwrap_or_default();
    if let Some(path) = &cfg.out
        && let Err(e) = std::fs::write(path, format!("{text}\n"))
    {
        eprintln!("scale: write {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    if cfg.json {
        println!("{text}");
    } else if !cfg.processes.is_empty() {
        report::print_processes(&out);
    } else if cfg.live > 0 {
        report::print_live(&out);
    } else {
        report::print(&out);
    }
    ExitCode::SUCCESS
}
