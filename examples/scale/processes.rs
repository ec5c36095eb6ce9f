//! Many one-shot writer processes at once (`--processes 1,2,8,32`), the
//! measurement of FORMAT.md §5.8. For each count W, W threads spawn one-shot
//! `runlog unit` calls back to back (each unit `in_progress`, then `done`, on
//! units no other call touches), then the same W threads spawn `runlog
//! --version` as many times: the process floor, what spawning the process at
//! all costs. Each pass runs in a child of this example under `perf stat`
//! counting the `fdatasync` and `fsync` syscall tracepoints of every process
//! it starts (when perf can: else the counts are null and the pass runs bare),
//! so fdatasyncs per checkpoint are counted, not estimated. The writer and
//! floor passes alternate, `--rounds` times per count, so both see the same
//! machine; the ratio quoted is the median of the rounds' ratios. With
//! `--serve`, each round also runs a served pass: the same calls while a
//! `runlog serve` of the run (started in the pass's child, so that perf
//! counts its fdatasyncs too) takes their changes (docs/CLI.md, "serve").

use crate::args::Config;
use crate::build::{Pool, RUN_ID};
use crate::child;
use crate::measure::{Ctx, spawn_all};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

/// The jobs of one pass: `spawns` calls in pairs, each pair one unit's.
fn jobs(kind: &str, spawns: u64, pool: &mut Pool) -> Vec<Vec<Vec<String>>> {
    (0..spawns.div_ceil(2))
        .map(|_| match kind {
            "unit" => {
                let (unit, statuses) = pool.next_pair();
                statuses
                    .iter()
                    .map(|s| vec!["unit".into(), RUN_ID.into(), unit.clone(), s.to_string()])
                    .collect()
            }
            _ => vec![vec!["--version".to_string()]; 2],
        })
        .collect()
}

/// Starts `runlog serve` on the run, with `--commit-delay` when given;
/// returns once it said it serves.
fn start_server(
    bin: &Path,
    root: &Path,
    commit_delay: Option<&String>,
) -> Result<std::process::Child, String> {
    use std::io::BufRead;
    let mut c = Command::new(bin)
        .arg("--dir")
        .arg(root)
        .args(["serve", RUN_ID])
        .args(commit_delay.map(|d| format!("--commit-delay={d}")))
        .env_remove("RUNLOG_DIR")
        .env_remove("RUNLOG_KEY_FILE")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn runlog serve: {e}"))?;
    let mut line = String::new();
    let out = c.stdout.as_mut().ok_or("runlog serve: no stdout")?;
    std::io::BufReader::new(out)
        .read_line(&mut line)
        .map_err(|e| format!("read runlog serve's first line: {e}"))?;
    if !line.starts_with("serving") {
        let _ = c.kill();
        let o = c.wait_with_output().map_err(|e| e.to_string())?;
        return Err(format!(
            "runlog serve did not start: {line}{}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(c)
}

/// Stops the server (SIGTERM) and returns how many changes it acknowledged.
fn stop_server(c: std::process::Child) -> Result<u64, String> {
    let pid = c.id().to_string();
    child::run(Command::new("kill").args(["-TERM", &pid]))?.ok("kill -TERM runlog serve")?;
    let o = c
        .wait_with_output()
        .map_err(|e| format!("wait for runlog serve: {e}"))?;
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() {
        return Err(format!("runlog serve: {}: {err}", o.status));
    }
    err.split(" changes acknowledged")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("runlog serve's summary: {err}"))
}

/// Child mode `spawn`: ROOT BIN WRITERS KIND UNITS NEXT SPAWNS [DELAY]. Runs
/// one pass and prints what it did. KIND `served` runs `unit`'s calls while a
/// server of the run takes them, with `--commit-delay DELAY` when given.
pub fn child(root: &Path, rest: &[String]) -> Result<Value, String> {
    let get = |i: usize, what: &str| {
        rest.get(i)
            .ok_or_else(|| format!("spawn: argument {i} ({what}) missing"))
    };
    let num = |i: usize, what: &str| -> Result<u64, String> {
        get(i, what)?
            .parse()
            .map_err(|e| format!("spawn: {what}: {e}"))
    };
    let bin = Path::new(get(0, "bin")?);
    let writers = num(1, "writers")? as usize;
    let kind = get(2, "kind")?.as_str();
    let mut pool = Pool::at(num(3, "units")?, num(4, "next")?);
    let spawns = num(5, "spawns")?;
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let ctx = Ctx { bin, me: &me, root };
    let server = match kind {
        "served" => Some(start_server(bin, root, rest.get(6))?),
        _ => None,
    };
    let jobs = jobs(
        if kind == "served" { "unit" } else { kind },
        spawns,
        &mut pool,
    );
    let (ok, errors, secs) = spawn_all(&ctx, writers, &jobs);
    let served = server.map(stop_server).transpose()?;
    Ok(json!({
        "ok": ok,
        "failed": errors.len(),
        "secs": secs,
        "error": errors.first(),
        "next": pool.next_index(),
        "served": served,
    }))
}

/// Whether `perf stat` can count the fdatasync tracepoint here.
pub fn perf_counts() -> bool {
    Command::new("perf")
        .args([
            "stat",
            "-x,",
            "-e",
            "syscalls:sys_enter_fdatasync",
            "--",
            "true",
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// One pass in a child, under perf when `counted`: its JSON plus the counts.
fn pass(
    ctx: &Ctx,
    counted: bool,
    tmp: &Path,
    args: &[String],
) -> Result<(Value, Option<(u64, u64)>), String> {
    let out = tmp.join("perf-stat.csv");
    let mut cmd = if counted {
        let mut c = Command::new("perf");
        c.args(["stat", "-x,", "-o"])
            .arg(&out)
            .args([
                "-e",
                "syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync",
                "--",
            ])
            .arg(ctx.me);
        c
    } else {
        Command::new(ctx.me)
    };
    cmd.args(["--child", "spawn"]).arg(ctx.root).args(args);
    let f = child::run(&mut cmd)?.ok("child spawn")?;
    let v: Value =
        serde_json::from_slice(&f.stdout).map_err(|e| format!("child spawn output: {e}"))?;
    if !counted {
        return Ok((v, None));
    }
    let text = std::fs::read_to_string(&out).map_err(|e| format!("read perf output: {e}"))?;
    let count = |event: &str| {
        text.lines()
            .find(|l| l.contains(event))
            .and_then(|l| l.split(',').next())
            .and_then(|n| n.trim().parse::<u64>().ok())
    };
    match (count("sys_enter_fdatasync"), count("sys_enter_fsync")) {
        (Some(d), Some(s)) => Ok((v, Some((d, s)))),
        _ => Err(format!("perf output without the counts: {text}")),
    }
}

/// The served passes of one writer count (`--serve`).
#[derive(Default)]
struct Served {
    rates: Vec<f64>,
    ratios: Vec<f64>,
    ok: u64,
    failed: u64,
    acked_by_server: u64,
    fdatasyncs: Option<u64>,
    counted: bool,
    error: Option<String>,
    first_failure: Value,
}

impl Served {
    /// One served pass, beside its round's floor rate.
    fn add(&mut self, (v, counts): &(Value, Option<(u64, u64)>), floor: Option<f64>) {
        let ok = v["ok"].as_u64().unwrap_or(0);
        self.ok += ok;
        self.failed += v["failed"].as_u64().unwrap_or(0);
        self.acked_by_server += v["served"].as_u64().unwrap_or(0);
        if self.first_failure.is_null() {
            self.first_failure = v["error"].clone();
        }
        if let Some((d, _)) = counts {
            self.counted = true;
            *self.fdatasyncs.get_or_insert(0) += d;
        }
        let rate = v["secs"]
            .as_f64()
            .filter(|s| *s > 0.0)
            .map(|s| ok as f64 / s);
        self.rates.extend(rate);
        self.ratios.extend(rate.zip(floor).map(|(r, f)| r / f));
    }

    fn row(self, range: impl Fn(&[f64]) -> Option<Value>) -> Value {
        json!({
            "ok": self.ok,
            "failed": self.failed,
            "error": self.error.map(Value::from).unwrap_or(self.first_failure),
            "acked_by_server": self.acked_by_server,
            "checkpoints_per_sec": median(self.rates),
            "ratio_range": range(&self.ratios),
            "ratio_to_floor": median(self.ratios),
            "fdatasyncs_per_checkpoint": self.fdatasyncs.filter(|_| self.counted && self.ok > 0).map(|c| c as f64 / self.ok as f64),
        })
    }
}

/// The median of `v` (the mean of the middle two when even); `None` if empty.
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Every writer count at one size: checkpoints/s, the floor, their ratio,
/// and fdatasyncs per checkpoint. Each count runs `rounds` rounds of a
/// writer pass and a floor pass, side by side (odd rounds floor first, so a
/// drift of the machine falls on both); the ratio is the median of the
/// rounds' own ratios, quoted with its range. `cfg` gives the counts
/// (`--processes`), `--spawns`, `--rounds` and `--serve`.
pub fn measure(ctx: &Ctx, n: u64, pool: &mut Pool, cfg: &Config, tmp: &Path) -> Value {
    let (counts, spawns, rounds, serve) = (&cfg.processes, cfg.spawns, cfg.rounds, cfg.serve);
    let delay = cfg.serve_commit_delay;
    let counted = perf_counts();
    let bin = ctx.bin.to_string_lossy().to_string();
    let rows: Vec<Value> = counts
        .iter()
        .map(|&w| {
            // At least four calls per writer, so that every writer overlaps.
            let calls = spawns.max(4 * w as u64).next_multiple_of(2);
            eprintln!("{n} units: {w} one-shot writer processes, {rounds} rounds of {calls} calls");
            let args = |kind: &str, next: u64| {
                let mut a = vec![
                    bin.clone(),
                    w.to_string(),
                    kind.to_string(),
                    n.to_string(),
                    next.to_string(),
                    calls.to_string(),
                ];
                a.extend(delay.filter(|_| kind == "served").map(|d| d.to_string()));
                a
            };
            let rate = |v: &Value| {
                let (ok, secs) = (v["ok"].as_f64().unwrap_or(0.0), v["secs"].as_f64());
                secs.filter(|s| *s > 0.0).map(|s| ok / s)
            };
            let (mut rates, mut floors, mut ratios) = (vec![], vec![], vec![]);
            let (mut ok, mut failed, mut floor_failed) = (0u64, 0u64, 0u64);
            let (mut fdatasyncs, mut fsyncs) = (Some(0u64), Some(0u64));
            let mut first_error = Value::Null;
            let mut served = Served::default();
            for round in 0..rounds {
                let floor_first = round % 2 == 1;
                let floor_pass = |tmp: &Path| pass(ctx, counted, tmp, &args("version", 0));
                let early = if floor_first { Some(floor_pass(tmp)) } else { None };
                let writers = pass(ctx, counted, tmp, &args("unit", pool.next_index()));
                if let Ok((v, _)) = &writers {
                    *pool = Pool::at(n, v["next"].as_u64().unwrap_or(pool.next_index()));
                }
                let served_pass = serve.then(|| {
                    let r = pass(ctx, counted, tmp, &args("served", pool.next_index()));
                    if let Ok((v, _)) = &r {
                        *pool = Pool::at(n, v["next"].as_u64().unwrap_or(pool.next_index()));
                    }
                    r
                });
                let floor = match early {
                    Some(f) => f,
                    None => floor_pass(tmp),
                };
                if let (Some(p), Ok(f)) = (served_pass, &floor) {
                    match p {
                        Ok(p) => served.add(&p, rate(&f.0)),
                        Err(e) => {
                            served.error.get_or_insert(e);
                        }
                    }
                }
                let (writers, floor) = match (writers, floor) {
                    (Ok(a), Ok(b)) => (a, b),
                    (Err(e), _) | (_, Err(e)) => return json!({"writers": w, "error": e}),
                };
                ok += writers.0["ok"].as_u64().unwrap_or(0);
                failed += writers.0["failed"].as_u64().unwrap_or(0);
                floor_failed += floor.0["failed"].as_u64().unwrap_or(0);
                if first_error.is_null() {
                    first_error = writers.0["error"].clone();
                }
                fdatasyncs = fdatasyncs.zip(writers.1).map(|(a, c)| a + c.0);
                fsyncs = fsyncs.zip(writers.1).map(|(a, c)| a + c.1);
                let (r, f) = (rate(&writers.0), rate(&floor.0));
                rates.extend(r);
                floors.extend(f);
                ratios.extend(r.zip(f).map(|(r, f)| r / f));
            }
            let range = |v: &[f64]| {
                let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                (!v.is_empty()).then(|| json!([lo, hi]))
            };
            json!({
                "writers": w,
                "rounds": rounds,
                "calls": calls,
                "ok": ok,
                "failed": failed,
                "error": first_error,
                "checkpoints_per_sec": median(rates),
                "floor_per_sec": median(floors),
                "ratio_to_floor": median(ratios.clone()),
                "ratio_range": range(&ratios),
                "fdatasyncs": fdatasyncs,
                "fsyncs": fsyncs,
                "fdatasyncs_per_checkpoint": fdatasyncs.filter(|_| ok > 0).map(|c| c as f64 / ok as f64),
                "floor_failed": floor_failed,
                "served": serve.then(|| {
                    let mut row = served.row(range);
                    row["commit_delay_secs"] = json!(delay.unwrap_or(0.0));
                    row
                }),
            })
        })
        .collect();
    json!({"counted_by": if counted { "perf stat (syscall tracepoints)" } else { "not counted: perf stat cannot count syscall tracepoints here" }, "rows": rows})
}
