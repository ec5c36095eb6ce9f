//! `--memory`: resident memory of a run of N units (1,000,000 by default) held by
//! runlog, against the same state built in memory with no engine.
//!
//! Every measurement runs in a fresh child process (this binary re-executed with
//! the hidden `--memory-child STEP ...`), so each starts from a clean heap; each
//! child reads `VmRSS`, `VmHWM`, `RssAnon` and `RssFile` from `/proc/self/status`.
//!
//! The workload is the run model's own machine (`runlog::run::RunMachine`, state
//! `RunDoc`): one `init`, then one `unit` transition (status `pending`) per unit,
//! names `unit-0000000` .. , each stamped with its own RFC 3339 time. The store
//! uses the run model's engine options except `SyncPolicy::Never` (the build
//! syncs once at the end) and `CompactionPolicy::Manual` (so the one compaction
//! is the one measured).
//!
//! Steps (each a child process):
//! 1. `baseline`: nothing built.
//! 2. `state`: the `RunDoc` built by `RunMachine::apply` over the same
//!    transitions, in batches of the same size; no engine.
//! 3. `append`: a new store, the transitions appended with `append_batch`,
//!    `sync`; steady memory after it.
//! 4. `reopen` (log only): open (replays every record from the log); then
//!    `compact()` (rebuilds the state from disk beside the live one, encodes and
//!    writes the snapshot); then a tail of re-touches (`unit-k` set to `pending`
//!    again: the state keeps its size) appended and synced, then a second
//!    `compact()`. `malloc_trim(0)` after the first compaction shows how much of
//!    the freed copy the allocator kept. Then a second tail, so the log goes on
//!    past the newest snapshot.
//! 5. `reopen` (snapshot + tail): open again; decodes the snapshot and replays
//!    the second tail.
//!
//! The peak of a step is `VmHWM` after resetting it (`5 > /proc/self/clear_refs`)
//! just before the step, plus a sampler thread reading `/proc/self/status` every
//! 2 ms for the anonymous / file-backed split of that peak.

use runlog::engine::{CompactionPolicy, Machine, Options, Store, SyncPolicy};
use runlog::run::clock::format_rfc3339;
use runlog::run::{Change, InitSpec, RunDoc, RunMachine, Transition, UnitStatus};
use serde_json::{Value, json};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// Transitions per `append_batch` (and per in-memory batch for the bare state).
const BATCH: u64 = 4096;
/// Milliseconds since the epoch of the first transition (2026-01-01T00:00:00Z).
const T0: i64 = 1_767_225_600_000;

/// Memory figures from `/proc/self/status`, in KiB.
#[derive(Debug, Clone, Copy, Default)]
struct Mem {
    rss: u64,
    hwm: u64,
    anon: u64,
    file: u64,
}

fn status() -> Mem {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    Mem {
        rss: field("VmRSS:"),
        hwm: field("VmHWM:"),
        anon: field("RssAnon:"),
        file: field("RssFile:"),
    }
}

fn mem_json(m: Mem) -> Value {
    json!({"rss_kib": m.rss, "hwm_kib": m.hwm, "anon_kib": m.anon, "file_kib": m.file})
}

/// Runs `f` and returns its peak: `VmHWM` (reset just before, when the kernel
/// allows) and the largest `RssAnon`, `RssFile` and `VmRSS` a 2 ms sampler saw.
fn peak<R>(f: impl FnOnce() -> R) -> (R, Value) {
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let stop = Arc::new(AtomicBool::new(false));
    let maxes = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
    let sampler = {
        let (stop, maxes) = (stop.clone(), maxes.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let m = status();
                maxes[0].fetch_max(m.rss, Ordering::Relaxed);
                maxes[1].fetch_max(m.anon, Ordering::Relaxed);
                maxes[2].fetch_max(m.file, Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        })
    };
    let started = Instant::now();
    let r = f();
    let secs = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let m = status();
    (
        r,
        json!({
            "hwm_kib": m.hwm,
            "hwm_reset": reset,
            "sampled_rss_kib": maxes[0].load(Ordering::Relaxed),
            "sampled_anon_kib": maxes[1].load(Ordering::Relaxed),
            "sampled_file_kib": maxes[2].load(Ordering::Relaxed),
            "secs": secs,
        }),
    )
}

fn init() -> Transition {
    Transition {
        at: format_rfc3339(T0),
        change: Change::Init(InitSpec {
            id: "memory-1m".into(),
            task: "memory measurement".into(),
            ..InitSpec::default()
        }),
    }
}

/// Transition `i` (0-based) of the build: unit `i` appears, pending. With
/// `units` set, transition `i` re-touches unit `i % units` (still pending).
fn unit(i: u64, units: u64) -> Transition {
    Transition {
        at: format_rfc3339(T0 + 1 + i as i64),
        change: Change::Unit {
            unit: format!("unit-{:07}", i % units),
            status: UnitStatus::Pending,
            note: None,
            deps: None,
        },
    }
}

/// Calls `f` with the transitions `from..to` in batches of `BATCH`.
fn batches(from: u64, to: u64, units: u64, mut f: impl FnMut(&[Transition])) {
    let mut i = from;
    while i < to {
        let end = (i + BATCH).min(to);
        let b: Vec<Transition> = (i..end).map(|j| unit(j, units)).collect();
        f(&b);
        i = end;
    }
}

fn options(create: bool) -> Options {
    Options {
        create,
        sync: SyncPolicy::Never,
        compaction: CompactionPolicy::Manual,
        ..Options::default()
    }
}

fn append_all(store: &Store<RunMachine>, from: u64, to: u64, units: u64) -> Result<(), String> {
    let mut err = None;
    batches(from, to, units, |b| {
        for r in store.append_batch(b) {
            if let Err(e) = r {
                err.get_or_insert(e.to_string());
            }
        }
    });
    match err {
        Some(e) => Err(e),
        None => store.sync().map_err(|e| e.to_string()),
    }
}

fn dir_bytes(dir: &str) -> Value {
    let mut files = serde_json::Map::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let len = e.metadata().map_or(0, |m| m.len());
            files.insert(e.file_name().to_string_lossy().into_owned(), json!(len));
        }
    }
    Value::Object(files)
}

/// The hidden child: `--memory-child STEP [DIR UNITS TAIL]`; prints one JSON object.
pub fn child(args: &[String]) {
    let step = args.first().map_or("", String::as_str);
    let dir = args.get(1).cloned().unwrap_or_default();
    let units: u64 = args
        .get(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let tail: u64 = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(0);
    let out = match step {
        "baseline" => Ok(json!({"now": mem_json(status())})),
        "state" => {
            let mut doc = RunDoc::default();
            let t = Instant::now();
            RunMachine::apply(&mut doc, &init()).expect("init applies");
            batches(0, units, units, |b| {
                for tr in b {
                    RunMachine::apply(&mut doc, tr).expect("unit applies");
                }
            });
            let secs = t.elapsed().as_secs_f64();
            let now = status();
            let n = std::hint::black_box(&doc).units.len();
            Ok(json!({"now": mem_json(now), "units": n, "secs": secs}))
        }
        "append" => (|| {
            let t = Instant::now();
            let store =
                Store::<RunMachine>::open(&dir, options(true)).map_err(|e| e.to_string())?;
            store.append(&init()).map_err(|e| e.to_string())?;
            append_all(&store, 0, units, units)?;
            let secs = t.elapsed().as_secs_f64();
            let now = status();
            let n = store.read(|d| d.units.len());
            Ok(json!({"now": mem_json(now), "units": n, "secs": secs,
                      "last_seq": store.last_seq(), "files": dir_bytes(&dir)}))
        })(),
        "reopen" => (|| {
            let (store, open_peak) = peak(|| Store::<RunMachine>::open(&dir, options(false)));
            let store = store.map_err(|e| e.to_string())?;
            let after_open = status();
            let rep = store.recovery();
            let mut out = json!({
                "files": dir_bytes(&dir),
                "open_peak": open_peak,
                "after_open": mem_json(after_open),
                "units": store.read(|d| d.units.len()),
                "records_replayed": rep.records_replayed,
                "snapshot_bytes": rep.snapshot_bytes,
                "segments": rep.segments,
                "bytes_scanned": rep.bytes_scanned,
            });
            if tail > 0 {
                let (c, compact_peak) = peak(|| store.compact());
                let c = c.map_err(|e| e.to_string())?;
                out["compact_peak"] = compact_peak;
                out["after_compact"] = mem_json(status());
                out["snapshot_written_bytes"] = json!(c.snapshot_bytes);
                // Diagnostic: how much of what compaction freed glibc still holds.
                // SAFETY: malloc_trim only returns free heap pages to the kernel.
                #[allow(unsafe_code)]
                unsafe {
                    libc::malloc_trim(0);
                }
                out["after_compact_trimmed"] = mem_json(status());
                append_all(&store, units, units + tail, units)?;
                out["after_tail"] = mem_json(status());
                // A second compaction: does the memory it needs come back each time?
                let (c, again) = peak(|| store.compact());
                c.map_err(|e| e.to_string())?;
                out["compact_again_peak"] = again;
                out["after_compact_again"] = mem_json(status());
                // A log after the newest snapshot, for the next open to replay.
                append_all(&store, units + tail, units + 2 * tail, units)?;
            }
            Ok(out)
        })(),
        other => Err(format!("unknown memory step {other:?}")),
    };
    match out {
        Ok(v) => println!("{v}"),
        Err(e) => {
            eprintln!("memory child {step}: {e}");
            std::process::exit(1);
        }
    }
}

fn spawn(step: &str, dir: &str, units: u64, tail: u64) -> Result<Value, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    eprintln!("memory: {step} ...");
    let out = Command::new(exe)
        .args([
            "--memory-child",
            step,
            dir,
            &units.to_string(),
            &tail.to_string(),
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("child {step} failed: {}", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).map_err(|e| format!("child {step}: {e}: {text}"))
}

fn kib(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// Runs every step and returns the measurements and ratios.
pub fn run(units: u64) -> Result<Value, String> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = tmp.path().join("store");
    let dir = dir.to_str().ok_or("temp path is not UTF-8")?.to_string();
    let tail = (units / 10).max(1);
    let baseline = spawn("baseline", "", units, 0)?;
    let state = spawn("state", "", units, 0)?;
    let append = spawn("append", &dir, units, 0)?;
    let reopen_log = spawn("reopen", &dir, units, tail)?;
    let reopen_snap = spawn("reopen", &dir, units, 0)?;

    let a = kib(&baseline["now"]["rss_kib"]);
    let a_anon = kib(&baseline["now"]["anon_kib"]);
    let b = kib(&state["now"]["rss_kib"]);
    let b_anon = kib(&state["now"]["anon_kib"]);
    let state_kib = b - a;
    let ratio = |c: f64| (c - a) / state_kib;
    let ratio_anon = |c: f64| (c - a_anon) / (b_anon - a_anon);
    let row = |name: &str, what: &str, m: &Value, rss: &str, anon: &str, file: &str| {
        let rss = kib(&m[rss]);
        json!({
            "name": name,
            "what": what,
            "rss_kib": rss,
            "anon_kib": m[anon],
            "file_kib": m[file],
            "over_state_kib": rss - b,
            "ratio": ratio(rss),
            "ratio_anon": m[anon].as_f64().map(ratio_anon),
        })
    };
    let rows = vec![
        row(
            "state",
            "RunDoc alone, no engine",
            &state["now"],
            "rss_kib",
            "anon_kib",
            "file_kib",
        ),
        row(
            "append_steady",
            "after 1 init + N unit appends and sync",
            &append["now"],
            "rss_kib",
            "anon_kib",
            "file_kib",
        ),
        row(
            "append_peak",
            "VmHWM of the append process",
            &append["now"],
            "hwm_kib",
            "-",
            "-",
        ),
        row(
            "reopen_log_after",
            "after open, replaying the whole log",
            &reopen_log["after_open"],
            "rss_kib",
            "anon_kib",
            "file_kib",
        ),
        row(
            "reopen_log_peak",
            "peak during that open",
            &reopen_log["open_peak"],
            "hwm_kib",
            "sampled_anon_kib",
            "sampled_file_kib",
        ),
        row(
            "compact_peak",
            "peak during compact()",
            &reopen_log["compact_peak"],
            "hwm_kib",
            "sampled_anon_kib",
            "sampled_file_kib",
        ),
        row(
            "after_compact",
            "after compact() returned",
            &reopen_log["after_compact"],
            "rss_kib",
            "anon_kib",
            "file_kib",
        ),
        row(
            "after_compact_trim",
            "same, after malloc_trim(0)",
            &reopen_log["after_compact_trimmed"],
            "rss_kib",
            "anon_kib",
            "file_kib",
        ),
        row(
            "compact_again_peak",
            "peak of a 2nd compact() after the tail",
            &reopen_log["compact_again_peak"],
            "hwm_kib",
            "sampled_anon_kib",
            "sampled_file_kib",
        ),
        row(
            "after_compact_2",
            "after it returned (not trimmed)",
            &reopen_log["after_compact_again"],
            "rss_kib",
            "anon_kib",
            "file_kib",
        ),
        row(
            "reopen_snap_after",
            "after open from snapshot + tail",
            &reopen_snap["after_open"],
            "rss_kib",
            "anon_kib",
            "file_kib",
        ),
        row(
            "reopen_snap_peak",
            "peak during that open",
            &reopen_snap["open_peak"],
            "hwm_kib",
            "sampled_anon_kib",
            "sampled_file_kib",
        ),
    ];
    Ok(json!({
        "machine": crate::machine(),
        "units": units,
        "tail": tail,
        "machine_type": "runlog::run::RunMachine (state RunDoc)",
        "baseline": baseline,
        "state": state,
        "append": append,
        "reopen_log": reopen_log,
        "reopen_snapshot": reopen_snap,
        "state_kib": state_kib,
        "rows": rows,
    }))
}

pub fn print(out: &Value) {
    let m = &out["machine"];
    crate::print_machine(m);
    let mib = |k: f64| k / 1024.0;
    let a = kib(&out["baseline"]["now"]["rss_kib"]);
    println!(
        "{} units, machine {}; baseline (a) {:.1} MiB RSS; state (b - a) {:.1} MiB; tail of {} re-touches\n",
        out["units"],
        out["machine_type"].as_str().unwrap_or(""),
        mib(a),
        mib(kib(&out["state_kib"])),
        out["tail"]
    );
    println!(
        "| {:<18} | {:>9} | {:>9} | {:>9} | {:>10} | {:>7} | {:>7} |",
        "measure", "RSS MiB", "anon MiB", "file MiB", "- state", "(c-a)/", "anon"
    );
    println!(
        "| {:<18} | {:>9} | {:>9} | {:>9} | {:>10} | {:>7} | {:>7} |",
        "", "", "", "", "MiB", "(b-a)", "ratio"
    );
    println!(
        "|{:-<20}|{:->11}|{:->11}|{:->11}|{:->12}|{:->9}|{:->9}|",
        "", "", "", "", "", "", ""
    );
    let opt = |v: &Value, scale: bool| match v.as_f64() {
        Some(x) if scale => format!("{:.1}", mib(x)),
        Some(x) => format!("{x:.2}"),
        None => "-".into(),
    };
    for r in out["rows"].as_array().into_iter().flatten() {
        println!(
            "| {:<18} | {:>9} | {:>9} | {:>9} | {:>10} | {:>7} | {:>7} |",
            r["name"].as_str().unwrap_or(""),
            opt(&r["rss_kib"], true),
            opt(&r["anon_kib"], true),
            opt(&r["file_kib"], true),
            opt(&r["over_state_kib"], true),
            opt(&r["ratio"], false),
            opt(&r["ratio_anon"], false),
        );
    }
    let files = |v: &Value| {
        v.as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| format!("{k} {:.1} MiB", kib(v) / 1048576.0))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    println!("\nafter append: {}", files(&out["append"]["files"]));
    println!(
        "reopen (log): {} records replayed in {:.2} s; compact {:.2} s, snapshot {:.1} MiB",
        out["reopen_log"]["records_replayed"],
        kib(&out["reopen_log"]["open_peak"]["secs"]),
        kib(&out["reopen_log"]["compact_peak"]["secs"]),
        kib(&out["reopen_log"]["snapshot_written_bytes"]) / 1048576.0
    );
    println!(
        "reopen (snapshot + tail): {}; {} records replayed in {:.2} s",
        files(&out["reopen_snapshot"]["files"]),
        out["reopen_snapshot"]["records_replayed"],
        kib(&out["reopen_snapshot"]["open_peak"]["secs"]),
    );
}
