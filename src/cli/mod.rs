//! The `runlog` command line: parses arguments, calls the library, prints the
//! result on stdout (JSON with `--json`) and maps errors to exit codes:
//! 0 done, 2 refused (nothing written), 1 failed.

pub mod apply;
pub mod args;
mod commands;
pub mod remote;
mod render;
mod serve;
mod ui;
pub mod wait;
pub mod watch;

use runlog::engine::{self, ErrorChain};
use runlog::run::{Clock, RuleError, RunError, Runs, SystemClock};
use std::process::ExitCode;
use std::sync::Arc;

/// Exit status: done.
pub const EXIT_DONE: u8 = 0;
/// Exit status: failed (I/O error, corruption, lock wait timed out).
pub const EXIT_FAILED: u8 = 1;
/// Exit status: stopped by Ctrl-C (128 + SIGINT, as a shell reports it).
pub const EXIT_INTERRUPTED: u8 = 130;
/// Exit status: refused (invalid argument or a transition the rules forbid).
pub const EXIT_REFUSED: u8 = 2;

/// Environment variable fixing the clock (an RFC 3339 timestamp), for tests.
pub const ENV_NOW: &str = "RUNLOG_NOW";
/// Environment variable naming the key file when `--key-file` is not given.
pub const ENV_KEY_FILE: &str = "RUNLOG_KEY_FILE";

/// Runs the CLI with the process's arguments.
pub fn main() -> ExitCode {
    let cli = match args::parse() {
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
        // The reader of stdout went away (`runlog status | head`): end quietly,
        // as a Unix tool does, by SIGPIPE.
        Err(e) if is_broken_pipe(&e) => {
            crate::sys::end_by_sigpipe();
            ExitCode::from(EXIT_SIGPIPE)
        }
        Err(e) => {
            eprintln!("runlog: {}", report(&e));
            ExitCode::from(e.exit_code())
        }
    }
}

/// How the CLI reports an error, on stderr and in `apply`'s acks: the error and
/// its causes, each once, then the command to run where there is one (the
/// library's messages never name commands or flags; this is where they are added).
pub fn report(e: &RunError) -> String {
    let chain = ErrorChain(e);
    match e {
        RunError::Engine {
            id,
            source: engine::Error::Key { path, reason },
        } if reason.starts_with("store is tagged") => format!(
            "run {id}: {}: the run is tagged; pass its key with --key-file PATH (or ${ENV_KEY_FILE})",
            path.display()
        ),
        RunError::Engine { id, source } if source.is_corrupt() => {
            format!("{chain}; `runlog verify {id}` reports every damaged record")
        }
        RunError::Engine {
            source: engine::Error::Key { .. },
            ..
        } => format!("{chain}; the key is read from --key-file FILE or ${ENV_KEY_FILE}"),
        RunError::NotArchived { .. } => format!("{chain} (see `runlog archive list`)"),
        RunError::Io { .. } if e.outcome_unknown() => {
            format!("{chain}; `runlog get` shows whether it did")
        }
        RunError::Refused {
            id,
            source: RuleError::UnknownBudget { name },
        } => {
            format!("{chain}; declare it with `runlog budget {id} {name} --owner WHO [--limit X]`")
        }
        _ => chain.to_string(),
    }
}

/// The clock of `$RUNLOG_NOW`: always that time (for reproducible output).
struct FixedClock(i64);

impl FixedClock {
    fn at(rfc3339: &str) -> Option<FixedClock> {
        SystemClock::parse_rfc3339(rfc3339).map(FixedClock)
    }
}

impl Clock for FixedClock {
    fn now_millis(&self) -> i64 {
        self.0
    }
}

/// The status a shell reports for a process killed by SIGPIPE (128 + 13),
/// used only if the signal could not be raised.
const EXIT_SIGPIPE: u8 = 141;

/// True when `e` is a write to a stdout whose reader has gone.
fn is_broken_pipe(e: &RunError) -> bool {
    matches!(e, RunError::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
}

/// Writes `text` to stdout and flushes; a closed stdout is an error (never a panic).
pub(crate) fn write_out(text: &str) -> Result<(), RunError> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .map_err(stdout_error)
}

/// The error of a failed write to stdout.
pub(crate) fn stdout_error(e: std::io::Error) -> RunError {
    RunError::Io {
        op: "write stdout",
        path: "-".into(),
        source: e,
    }
}

fn runs_for(cli: &args::Cli) -> Result<Runs, RunError> {
    let cwd = std::env::current_dir().map_err(|e| RunError::Io {
        op: "read the working directory",
        path: ".".into(),
        source: e,
    })?;
    let env = std::env::var(Runs::ENV_DIR).ok();
    let root = Runs::locate_root(cli.dir.as_deref(), env.as_deref(), &cwd);
    let clock: Arc<dyn Clock> = match std::env::var(ENV_NOW) {
        Ok(ts) => Arc::new(FixedClock::at(&ts).ok_or_else(|| {
            RunError::Invalid(format!("${ENV_NOW} {ts:?} is not an RFC 3339 timestamp"))
        })?),
        Err(_) => Arc::new(SystemClock),
    };
    let wait = args::seconds("--lock-timeout", cli.lock_timeout, 0.0..=f64::INFINITY)?;
    let key_file = cli.key_file.clone().or_else(|| {
        std::env::var_os(ENV_KEY_FILE)
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
    });
    let key = key_file
        .map(|p| engine::Key::from_file(&p))
        .transpose()
        .map_err(|e| match e {
            // A key file that is not there is an argument naming nothing: refused
            // (2), as one of the wrong shape or mode is.
            engine::Error::Io { path, source, .. }
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                RunError::Invalid(format!(
                    "key file {} does not exist (--key-file PATH or ${ENV_KEY_FILE})",
                    path.display()
                ))
            }
            // Reading it failed otherwise (exit 1).
            engine::Error::Io { op, path, source } => RunError::Io { op, path, source },
            e => RunError::Invalid(ErrorChain(&e).to_string()),
        })?;
    // The remote root comes from the environment here, never in the library.
    let remote_root = runlog::remote::RemoteRoot::from_env().map_err(|e| RunError::Remote {
        op: "read",
        at: format!("${}", runlog::remote::ENV_REMOTE_ROOT),
        source: e.into(),
    })?;
    Ok(Runs::new(root)
        .with_clock(clock)
        .with_lock_wait(Some(wait))
        .with_key(key)
        .with_remote_root(remote_root))
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
            remote,
            lose_host,
            ui,
        } => {
            let opts = crate::demo::DemoOptions {
                units,
                workers,
                kills,
                work_us,
                seed,
                dir: cli.dir.clone(),
                progress: !cli.json,
                remote,
                lose_host,
                ui,
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
        args::Command::Completions { shell } => {
            let mut text = Vec::new();
            clap_complete::generate(shell, &mut args::command(), "runlog", &mut text);
            write_out(&String::from_utf8_lossy(&text))?;
            return Ok(EXIT_DONE);
        }
        args::Command::Man => {
            let mut text = Vec::new();
            clap_mangen::Man::new(args::command())
                .render(&mut text)
                .map_err(stdout_error)?;
            write_out(&String::from_utf8_lossy(&text))?;
            return Ok(EXIT_DONE);
        }
        _ => {}
    }
    let runs = runs_for(&cli)?;
    commands::dispatch(&runs, cli.json, cli.command)
}

fn demo(opts: &crate::demo::DemoOptions, json: bool) -> Result<u8, RunError> {
    let exe = std::env::current_exe().map_err(|e| {
        let argv0 = std::env::args_os().next().unwrap_or_default();
        RunError::Io {
            op: "find the runlog binary to start workers",
            path: argv0.into(),
            source: e,
        }
    })?;
    if opts.dir.is_none() && !json {
        eprintln!(
            "runlog demo: working in a temporary runs root; pass --dir DIR to keep it and watch it with `runlog --dir DIR status demo --watch`"
        );
    }
    let report = match crate::demo::run_demo(opts, &exe) {
        Ok(r) => r,
        Err(e) if crate::demo::is_interrupted(&e) => {
            eprintln!(
                "runlog demo: interrupted; the worker was stopped and the temporary runs root removed"
            );
            return Ok(EXIT_INTERRUPTED);
        }
        Err(e) => return Err(e),
    };
    if json {
        let line = serde_json::to_string(&report).map_err(|e| RunError::Invalid(e.to_string()))?;
        write_out(&format!("{line}\n"))?;
    } else {
        write_out(&crate::demo::render(&report))?;
    }
    Ok(if report.ok() { EXIT_DONE } else { EXIT_FAILED })
}
