//! The `runlog` command line: parses arguments, calls the library, prints the
//! result on stdout (JSON with `--json`) and maps errors to exit codes:
//! 0 done, 2 refused (nothing written), 1 failed.

pub mod apply;
pub mod args;
mod commands;
pub mod remote;
pub mod watch;

use crate::run::{Clock, ManualClock, RunError, Runs, SystemClock, locate_root};
use clap::Parser;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Exit status: done.
pub const EXIT_DONE: u8 = 0;
/// Exit status: failed (I/O error, corruption, lock wait timed out).
pub const EXIT_FAILED: u8 = 1;
/// Exit status: refused (invalid argument or a transition the rules forbid).
pub const EXIT_REFUSED: u8 = 2;

/// Environment variable fixing the clock (an RFC 3339 timestamp), for tests.
pub const ENV_NOW: &str = "RUNLOG_NOW";
/// Environment variable naming the key file when `--key-file` is not given.
pub const ENV_KEY_FILE: &str = "RUNLOG_KEY_FILE";

/// Runs the CLI with the process's arguments.
pub fn main() -> ExitCode {
    let cli = match args::Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            // clap usage errors are refusals (2); --help and --version are not errors.
            return ExitCode::from(if e.use_stderr() {
                EXIT_REFUSED
            } else {
                EXIT_DONE
            });
        }
    };
    match run_cli(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("runlog: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn runs_for(cli: &args::Cli) -> Result<Runs, RunError> {
    let cwd = std::env::current_dir()
        .map_err(|e| RunError::Invalid(format!("cannot read the working directory: {e}")))?;
    let env = std::env::var(crate::run::ENV_DIR).ok();
    let root = locate_root(cli.dir.as_deref(), env.as_deref(), &cwd);
    let clock: Arc<dyn Clock> = match std::env::var(ENV_NOW) {
        Ok(ts) => Arc::new(ManualClock::at(&ts).ok_or_else(|| {
            RunError::Invalid(format!("${ENV_NOW} {ts:?} is not an RFC 3339 timestamp"))
        })?),
        Err(_) => Arc::new(SystemClock),
    };
    if !(cli.lock_timeout.is_finite() && cli.lock_timeout >= 0.0) {
        return Err(RunError::Invalid(format!(
            "--lock-timeout {} is not a number of seconds ≥ 0",
            cli.lock_timeout
        )));
    }
    let wait = Duration::from_secs_f64(cli.lock_timeout.min(1e9));
    let key_file = cli.key_file.clone().or_else(|| {
        std::env::var_os(ENV_KEY_FILE)
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
    });
    let key = key_file
        .map(|p| crate::engine::Key::from_file(&p))
        .transpose()
        .map_err(RunError::Invalid)?;
    Ok(Runs::new(root)
        .with_clock(clock)
        .with_lock_wait(Some(wait))
        .with_key(key))
}

/// Runs a parsed command line; returns the exit status for a completed command.
pub fn run_cli(cli: args::Cli) -> Result<u8, RunError> {
    match cli.command {
        args::Command::Demo {
            units,
            workers,
            kills,
            work_us,
            seed,
        } => {
            let opts = crate::demo::DemoOptions {
                units,
                workers,
                kills,
                work_us,
                seed,
                dir: cli.dir.clone(),
                progress: !cli.json,
            };
            return demo(&opts, cli.json);
        }
        args::Command::DemoWorker {
            run,
            workers,
            work_us,
        } => {
            let root = cli
                .dir
                .clone()
                .ok_or_else(|| RunError::Invalid("demo-worker needs --dir".into()))?;
            crate::demo::run_worker(&crate::demo::WorkerOptions {
                root,
                run,
                workers,
                work_us,
            })?;
            return Ok(EXIT_DONE);
        }
        _ => {}
    }
    let runs = runs_for(&cli)?;
    commands::dispatch(&runs, cli.json, cli.command)
}

fn demo(opts: &crate::demo::DemoOptions, json: bool) -> Result<u8, RunError> {
    let exe = std::env::current_exe().map_err(|e| {
        RunError::Invalid(format!(
            "cannot find the runlog binary to start workers: {e}"
        ))
    })?;
    if opts.dir.is_none() && !json {
        eprintln!(
            "runlog demo: working in a temporary runs root; pass --dir DIR to keep it and watch it with `runlog --dir DIR status demo --watch`"
        );
    }
    let report = crate::demo::run_demo(opts, &exe)?;
    if json {
        let line = serde_json::to_string(&report).map_err(|e| RunError::Invalid(e.to_string()))?;
        println!("{line}");
    } else {
        print!("{}", crate::demo::render(&report));
    }
    Ok(if report.ok() { EXIT_DONE } else { EXIT_FAILED })
}
