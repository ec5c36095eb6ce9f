//! The command line of `scale`: sizes, repetitions, outputs and the knobs of
//! the 8-writer row.

use runlog::engine::Codec;
use std::path::PathBuf;

/// Settings from the command line.
#[derive(Debug)]
pub struct Config {
    pub units: Vec<u64>,
    pub reps: usize,
    pub json: bool,
    pub out: Option<PathBuf>,
    pub bin: PathBuf,
    pub codec: Codec,
    pub atomic: bool,
    pub latency: bool,
    pub writers: usize,
    pub spawns: u64,
    pub concurrent_budget: f64,
    pub tail: u64,
    pub batch: usize,
    /// Live-cycle rounds (0: the usual measurements instead).
    pub live: usize,
    pub live_batch: usize,
    pub live_secs: f64,
    pub live_oneshots: usize,
    /// Writer-process counts for the processes mode (empty: not run).
    pub processes: Vec<usize>,
    /// Rounds of a writer pass beside a floor pass, per count, in that mode.
    pub rounds: usize,
    /// With `--processes`: also a served pass per round (`runlog serve`).
    pub serve: bool,
    /// The served passes' `runlog serve --commit-delay` (implies `--serve`).
    pub serve_commit_delay: Option<f64>,
}

pub const USAGE: &str =
    "usage: scale [--units 1000,100000,1000000] [--reps 5] [--json] [--out FILE]
    [--bin PATH] [--codec jsonl|binary] [--atomic] [--latency] [--writers 8] [--spawns 400]
    [--concurrent-budget SECS] [--tail 1000] [--batch 10000]
    [--live ROUNDS] [--live-batch 2000] [--live-secs SECS] [--live-oneshots 0]
    [--processes 1,2,8,32] [--rounds 5] [--serve] [--serve-commit-delay SECS]";

fn default_bin() -> PathBuf {
    // target/<profile>/examples/scale -> target/<profile>/runlog
    std::env::current_exe()
        .ok()
        .and_then(|p| Some(p.parent()?.parent()?.join("runlog")))
        .unwrap_or_else(|| PathBuf::from("target/release/runlog"))
}

pub fn parse_args(args: &[String]) -> Result<Config, String> {
    let mut c = Config {
        units: vec![1_000, 100_000, 1_000_000],
        reps: 5,
        json: false,
        out: None,
        bin: default_bin(),
        codec: Codec::Jsonl,
        atomic: false,
        latency: false,
        writers: 8,
        spawns: 400,
        concurrent_budget: 60.0,
        tail: 1_000,
        batch: 10_000,
        live: 0,
        live_batch: 2_000,
        live_secs: 0.0,
        live_oneshots: 0,
        processes: vec![],
        rounds: 5,
        serve: false,
        serve_commit_delay: None,
    };
    let mut it = args.iter();
    let num = |v: Option<&String>, flag: &str| -> Result<u64, String> {
        v.ok_or(format!("{flag} needs a value"))?
            .replace('_', "")
            .parse::<u64>()
            .map_err(|e| format!("{flag}: {e}"))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--units" => {
                let v = it.next().ok_or("--units needs a value")?;
                c.units = v
                    .split(',')
                    .map(|s| num(Some(&s.to_string()), "--units"))
                    .collect::<Result<_, _>>()?;
            }
            "--reps" => c.reps = num(it.next(), a)?.max(1) as usize,
            "--json" => c.json = true,
            "--atomic" => c.atomic = true,
            "--latency" => c.latency = true,
            "--out" => c.out = Some(it.next().ok_or("--out needs a path")?.into()),
            "--bin" => c.bin = it.next().ok_or("--bin needs a path")?.into(),
            "--codec" => {
                c.codec = match it.next().map(String::as_str) {
                    Some("jsonl") => Codec::Jsonl,
                    Some("binary") => Codec::Binary,
                    other => return Err(format!("--codec: jsonl or binary, not {other:?}")),
                }
            }
            "--writers" => c.writers = num(it.next(), a)?.max(1) as usize,
            "--spawns" => c.spawns = num(it.next(), a)?,
            "--concurrent-budget" => {
                c.concurrent_budget = it
                    .next()
                    .ok_or("--concurrent-budget needs seconds")?
                    .parse()
                    .map_err(|e| format!("--concurrent-budget: {e}"))?
            }
            "--tail" => c.tail = num(it.next(), a)?,
            "--batch" => c.batch = num(it.next(), a)?.max(1) as usize,
            "--live" => c.live = num(it.next(), a)? as usize,
            "--live-batch" => c.live_batch = num(it.next(), a)?.max(1) as usize,
            "--live-oneshots" => c.live_oneshots = num(it.next(), a)? as usize,
            "--processes" => {
                let v = it.next().ok_or("--processes needs a value")?;
                c.processes = v
                    .split(',')
                    .map(|s| num(Some(&s.to_string()), "--processes").map(|n| n.max(1) as usize))
                    .collect::<Result<_, _>>()?;
            }
            "--rounds" => c.rounds = num(it.next(), a)?.max(1) as usize,
            "--serve" => c.serve = true,
            "--serve-commit-delay" => {
                c.serve = true;
                c.serve_commit_delay = Some(
                    it.next()
                        .ok_or("--serve-commit-delay needs seconds")?
                        .parse()
                        .map_err(|e| format!("--serve-commit-delay: {e}"))?,
                )
            }
            "--live-secs" => {
                c.live_secs = it
                    .next()
                    .ok_or("--live-secs needs seconds")?
                    .parse()
                    .map_err(|e| format!("--live-secs: {e}"))?
            }
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if let Some(&n) = c.units.iter().find(|&&n| n < 2) {
        return Err(format!("--units: {n} is too few (at least 2)"));
    }
    Ok(c)
}
