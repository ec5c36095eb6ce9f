//! The command line, declared with clap; parsing of the small argument syntaxes
//! (`--units a,b`, `--deps U=D+E`, `--budget NAME=LIMIT@OWNER`).

use clap::{Args, Parser, Subcommand};
use runlog::run::{BudgetSpec, Change, RunError};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// runlog: durable, resumable runs on an fsync'd transition log.
#[derive(Debug, Parser)]
#[command(
    name = "runlog",
    version,
    about,
    propagate_version = true,
    after_help = EXIT_CODES_HELP
)]
pub struct Cli {
    /// The runs root (else $RUNLOG_DIR, else the nearest .runlog/ above the
    /// working directory; for `demo`: else a temporary directory, removed at the end).
    #[arg(long, global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Print machine-readable JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// How long a writer waits for another writer's lock (0 fails at once; after a second of waiting it says on stderr who holds the lock).
    #[arg(
        long,
        global = true,
        value_name = "SECS",
        default_value_t = 30.0,
        allow_negative_numbers = true
    )]
    pub lock_timeout: f64,
    /// The key of tagged runs (else $RUNLOG_KEY_FILE): 32 raw bytes or 64 hex digits, mode 0600. Runs created with it are tagged (tamper-evident); tagged runs need it.
    #[arg(long, global = true, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The exit codes, shown under every `--help`.
pub const EXIT_CODES_HELP: &str = "\
Exit codes: 0 done; 1 failed (I/O error, corruption, tampering, the writer lock
not obtained within --lock-timeout, a run that can't be read); 2 refused
(invalid argument, unknown run, or a transition the rules forbid: nothing was
written). Killed by SIGPIPE (shell status 141) when stdout's reader goes away.
Reference: `runlog COMMAND --help`, the man page (`runlog man | man -l -`), and
docs/CLI.md in runlog's source repository (JSON shapes, the run document).";

/// `apply --help`: the operation lines.
pub const APPLY_HELP: &str = "\
Each stdin line is one JSON object with an \"op\" field:
  {\"op\":\"unit\",\"unit\":\"u1\",\"status\":\"done\",\"note\":\"…\",\"deps\":[\"u0\"]}
  {\"op\":\"phase\",\"phase\":\"load\",\"status\":\"running\"}
  {\"op\":\"item\",\"item\":{…}}            (or an array of objects)
  {\"op\":\"resolve\",\"id\":\"item-1\",\"note\":\"…\"}
  {\"op\":\"budget\",\"name\":\"usd\",\"limit\":5,\"owner\":\"ops\"}
  {\"op\":\"spend\",\"budget\":\"usd\",\"amount\":0.5}
  {\"op\":\"checkpoint\",\"state\":{…}}
  {\"op\":\"finalize\",\"status\":\"done\",\"result\":\"…\"}
note, deps, limit and result are optional. Blank lines are skipped.
Each line gets one ack line on stdout once durable: {\"seq\":N} (an item's
also lists its \"ids\", a spend's the \"budget\" after it), or
{\"error\":\"…\",\"code\":2} for a refused line (also written to stderr); after a
failure (code 1) apply stops and exits 1. The full reference: docs/CLI.md.";

/// `serve --help`: what the server does and what its clients see.
pub const SERVE_HELP: &str = "\
The server holds the run's writer lock until it stops. It prints one line on
stdout once it accepts connections, at RUN's directory's SERVE socket. While it
runs, `runlog unit`, `phase`, `item`, `resolve`, `budget`, `spend` and
`finalize` on the run hand it their change and print its answer (the same
seq, item ids, warning, message and exit code as applying it themselves);
every other writer waits for the lock. A
client that finds no server (or a dead one's socket) applies its change
itself. A server killed after a client sent its change leaves that change's
outcome unknown: the client says so and exits 1. On stopping it removes the
socket, finishes the changes it was sent, and says on stderr how many it
acknowledged in how many fdatasyncs. One thread applies the changes in
batches; --commit-delay holds a batch while another connection is open, so
that more changes share its fdatasync. Tagged runs are not served. The full
reference: docs/CLI.md.";

// Fields shared by `init` and `start`. A plain comment: with `defer`, a doc
// comment here would become the about of both commands.
#[derive(Debug, Args)]
pub struct NewRun {
    /// Units known up front, comma-separated.
    #[arg(long, value_name = "a,b,c")]
    pub units: Option<String>,
    /// A unit's dependencies: UNIT=DEP+DEP (repeatable).
    #[arg(long = "deps", value_name = "UNIT=DEP+DEP")]
    pub deps: Vec<String>,
    /// The relaunch descriptor: {"scriptPath": "...", "args": {...}}.
    #[arg(long, value_name = "JSON")]
    pub launch: Option<String>,
    /// A budget: NAME=LIMIT@OWNER (LIMIT may be empty for unlimited; repeatable).
    #[arg(long = "budget", value_name = "NAME=LIMIT@OWNER")]
    pub budgets: Vec<String>,
    /// The codec of the run's store.
    #[arg(long, value_name = "jsonl|binary", default_value = "jsonl")]
    pub codec: String,
}

/// The commands.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Create a run (refused if a live run with that id exists; a finished one is
    /// archived first). Resume it later with `runlog start --id ID` and the same
    /// --fingerprint (none, if init was given none).
    Init {
        /// The run id: 1–128 letters, digits, '-', '_' or '.', starting with a
        /// letter or a digit, without ".." and not ending in '.'.
        #[arg(long)]
        id: String,
        /// What the run does.
        #[arg(long)]
        task: String,
        /// The inputs the progress depends on: name=value[,name=value…].
        #[arg(long, value_name = "PARTS")]
        fingerprint: Option<String>,
        /// Units, dependencies, launch, budgets, codec.
        #[command(flatten)]
        new: NewRun,
    },
    /// Resume the live run with this id and fingerprint, or start it fresh.
    ///
    /// A live run with the same fingerprint is resumed as it is: a --task,
    /// --units, --deps, --budget or --launch that differs from it is ignored,
    /// with a START_ARGS_IGNORED warning. A live run with another fingerprint
    /// (a run made by `init` without one counts as the empty fingerprint) is
    /// archived and a fresh one started (CHECKPOINT_DISCARDED). A finished run
    /// is archived and started afresh (RUN_FINISHED_STARTED_FRESH), unless
    /// --keep-finished: then it is left as it is and start exits 0.
    /// Warnings go to stderr, and into "warnings" with --json.
    Start {
        /// The run id: 1–128 letters, digits, '-', '_' or '.', starting with a
        /// letter or a digit, without ".." and not ending in '.'.
        #[arg(long)]
        id: String,
        /// The inputs the progress depends on: name=value[,name=value…]
        /// (default: none, which resumes a run made by `init` without one).
        #[arg(long, value_name = "PARTS", default_value = "")]
        fingerprint: String,
        /// What the run does (default: the live run's task, else the id).
        #[arg(long)]
        task: Option<String>,
        /// Resume the live run, or do nothing if it has finished (instead of
        /// archiving it and starting afresh).
        #[arg(long)]
        keep_finished: bool,
        /// Units, dependencies, launch, budgets, codec.
        #[command(flatten)]
        new: NewRun,
    },
    /// Set a unit's status (adding the unit if new).
    Unit {
        /// The run id.
        run: String,
        /// The unit.
        unit: String,
        /// pending | in_progress | done | blocked | dep_blocked.
        status: String,
        /// A note.
        #[arg(long)]
        note: Option<String>,
        /// The unit's dependencies, comma-separated (replaces).
        #[arg(long, value_name = "a,b")]
        deps: Option<String>,
    },
    /// Set a phase's status.
    Phase {
        /// The run id.
        run: String,
        /// The phase.
        phase: String,
        /// pending | running | done | blocked | skipped.
        status: String,
    },
    /// Add an open item (a JSON object, or an array of objects); prints each new item's id (item-N).
    Item {
        /// The run id.
        run: String,
        /// The item.
        #[arg(value_name = "JSON")]
        item: String,
    },
    /// Resolve an open item.
    Resolve {
        /// The run id.
        run: String,
        /// The item's id (item-N).
        item_id: String,
        /// Why or how.
        #[arg(long)]
        note: Option<String>,
    },
    /// Declare a budget, or change its limit or owner (spending is kept).
    Budget {
        /// The run id.
        run: String,
        /// The budget.
        name: String,
        /// The limit (omit for unlimited).
        #[arg(long)]
        limit: Option<f64>,
        /// Who owns the limit.
        #[arg(long)]
        owner: String,
    },
    /// Record spending against a declared budget (a BUDGET_EXCEEDED warning on
    /// stderr, and in --json, once the spending reaches the limit).
    Spend {
        /// The run id.
        run: String,
        /// The budget.
        budget: String,
        /// The amount spent (a number ≥ 0).
        #[arg(allow_negative_numbers = true)]
        amount: String,
    },
    /// Close the run: done | needs_attention | aborted.
    Finalize {
        /// The run id.
        run: String,
        /// done | needs_attention | aborted.
        status: String,
        /// A result text.
        #[arg(long)]
        result: Option<String>,
    },
    /// Apply JSON-line operations from stdin, acknowledging each once durable.
    #[command(after_long_help = APPLY_HELP)]
    Apply {
        /// The run id.
        run: String,
    },
    /// Serve the run's one-shot writers over a Unix socket: `unit`, `phase`, `item`, `resolve`, `budget`, `spend` and `finalize` calls hand it their change and share its fdatasyncs.
    #[command(after_long_help = SERVE_HELP)]
    Serve {
        /// The run id.
        run: String,
        /// Stop after this many seconds without a connection (default: serve until SIGTERM or Ctrl-C).
        #[arg(long, value_name = "SECS")]
        idle: Option<f64>,
        /// Hold each batch up to this long (0 to 0.1) while another connection is open, so that more changes share its fdatasync: fewer fdatasyncs when writers outnumber the cores or the disk syncs slowly; a lone writer is never held (default 0).
        #[arg(long, value_name = "SECS", default_value_t = 0.0)]
        commit_delay: f64,
    },
    /// Print the run document, or one unit of it with --unit.
    Get {
        /// The run id (a unique prefix will do).
        run: String,
        /// Print only this unit: its fields as in the document's `units`, plus `name` (exit 2 if the run has no such unit).
        #[arg(long, value_name = "UNIT")]
        unit: Option<String>,
    },
    /// Print the resume set: skip, eligible, dep_blocked.
    Resume {
        /// The run id (a unique prefix will do).
        run: String,
    },
    /// Show a run (the newest when none is named), or every run with --list.
    Status {
        /// The run id (a unique prefix will do).
        run: Option<String>,
        /// List every run, newest first.
        #[arg(long)]
        list: bool,
        /// Redraw every --interval seconds (lock-free) until the run is finalized or Ctrl-C.
        #[arg(long, conflicts_with = "list")]
        watch: bool,
        /// Seconds between redraws with --watch (0.05 to 3600).
        #[arg(long, value_name = "SECS", default_value_t = 1.0, requires = "watch")]
        interval: f64,
    },
    /// Check the integrity of a run's files (read-only).
    Verify {
        /// The run id (a unique prefix will do).
        run: String,
        /// Check the run's remote chain at this URL instead (every object, frame, checksum, tag).
        #[arg(long, value_name = "URL")]
        remote: Option<String>,
    },
    /// Recover a run (dropping a torn tail), snapshot and compact it.
    Rebuild {
        /// The run id.
        run: String,
    },
    /// Snapshot a run and trim its log.
    Compact {
        /// The run id.
        run: String,
    },
    /// Print a run's log records as JSON lines {"seq": N, "t": ...}.
    Dump {
        /// The run id (a unique prefix will do).
        run: String,
    },
    /// Remove terminal runs (and archived runs) older than N days. A run in use
    /// is skipped at once; runs that can't be read are left and listed (exit 1).
    Gc {
        /// Keep runs finished less than this many days ago.
        #[arg(long, default_value_t = 7)]
        keep_days: u64,
        /// Collect a remote instead: delete what none of the last --keep-manifests manifests references.
        #[arg(long, value_name = "URL")]
        remote: Option<String>,
        /// With --remote: how many of the newest manifests to keep.
        #[arg(long, default_value_t = 3, requires = "remote")]
        keep_manifests: usize,
    },
    /// List archived runs, or restore one (`start` and `init` archive the runs
    /// they replace; `gc` removes archived runs after --keep-days).
    #[command(subcommand)]
    Archive(ArchiveCommand),
    /// Print a shell completion script, generated from this command line:
    /// `runlog completions bash > /etc/bash_completion.d/runlog`.
    Completions {
        /// bash | zsh | fish | elvish | powershell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), generated from this command line: `runlog man | man -l -`.
    Man,
    /// Restore a run from its remote into the runs root (the run must not exist locally).
    Restore {
        /// The run id.
        run: String,
        /// The remote: s3://bucket/prefix or file:///path.
        #[arg(long, value_name = "URL")]
        remote: String,
    },
    /// A run's remote: attach one, or show its status.
    #[command(subcommand)]
    Remote(crate::cli::remote::RemoteCommand),
    /// Show what runlog is for: a run killed with SIGKILL K times and resumed,
    /// then checked: every unit done exactly once, nothing acknowledged lost.
    /// Uses a fresh temporary runs root unless --dir is given.
    Demo {
        /// Units in the dependency graph.
        #[arg(long, default_value_t = 5000)]
        units: usize,
        /// Worker threads.
        #[arg(long, default_value_t = 8)]
        workers: usize,
        /// Times the worker process is killed with SIGKILL and restarted.
        #[arg(long, default_value_t = 3)]
        kills: usize,
        /// Simulated work per unit, in microseconds.
        #[arg(long, default_value_t = 500)]
        work_us: u64,
        /// Seed for the kill timing (default: from the clock).
        #[arg(long)]
        seed: Option<u64>,
        /// Ship the run to this remote (s3://bucket/prefix with AWS_* variables, or
        /// file:///path) under the sync policy; the prefix must hold no run yet.
        #[arg(long, value_name = "URL")]
        remote: Option<String>,
        /// With --remote: after the middle kill, delete the worker's run directory
        /// (the host is lost), restore the run from the remote into DIR/new-host
        /// (a new host) and finish there.
        #[arg(long, requires = "remote")]
        lose_host: bool,
        /// Serve the web view (`runlog ui`) of the demo's run while it runs,
        /// and print its URL (`--units 20000 --work-us 20000` lasts about a minute).
        #[arg(long)]
        ui: bool,
    },
    /// Serve a read-only web view of the runs root (every run; one run's page
    /// live): binds 127.0.0.1 on a free port and prints the URL. Never takes a
    /// lock, never writes. Off loopback it needs --token or --token-file.
    Ui {
        /// The run whose page the printed URL opens (a unique prefix will do;
        /// default: the runs page).
        run: Option<String>,
        /// Listen here (HOST:PORT); default 127.0.0.1:0, a free loopback port.
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
        listen: std::net::SocketAddr,
        /// Require this token (16+ visible ASCII characters) on every request.
        #[arg(long, value_name = "TOKEN", conflicts_with = "token_file")]
        token: Option<String>,
        /// Read the token from the first line of this file.
        #[arg(long, value_name = "PATH")]
        token_file: Option<PathBuf>,
        /// Open the URL in a browser (xdg-open); a failure is reported, not fatal.
        #[arg(long)]
        open: bool,
    },
    /// The demo's worker process (started by `demo`).
    #[command(hide = true)]
    DemoWorker {
        /// The run id.
        #[arg(long)]
        run: String,
        /// Worker threads.
        #[arg(long)]
        workers: usize,
        /// Simulated work per unit, in microseconds.
        #[arg(long)]
        work_us: u64,
    },
}

// `runlog archive …`. A plain comment: with `defer`, a doc comment here would
// replace the `archive` variant's about.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum ArchiveCommand {
    /// List archived runs, newest first, with the name `restore` takes.
    List,
    /// Move an archived run back to the live runs (refused while a run with its id exists).
    Restore {
        /// The archived run's name, as `archive list` shows it (`<id>.<timestamp>`).
        name: String,
    },
}

/// Commands that take no writer lock: `--lock-timeout` is hidden from their help.
pub const LOCK_FREE_COMMANDS: [&str; 12] = [
    "completions",
    "man",
    "get",
    "resume",
    "status",
    "verify",
    "dump",
    "gc",
    "archive",
    "ui",
    "demo",
    "demo-worker",
];
/// Commands that use no key: `--key-file` is hidden from their help.
pub const KEYLESS_COMMANDS: [&str; 4] = ["demo", "demo-worker", "completions", "man"];
/// The flags each command has, hidden where it does not use them.
const PER_COMMAND_FLAGS: [(&str, &[&str]); 2] = [
    ("lock_timeout", &LOCK_FREE_COMMANDS),
    ("key_file", &KEYLESS_COMMANDS),
];

/// The command line as clap sees it: the derived one, with `--lock-timeout`
/// and `--key-file` given to every command itself rather than as clap
/// globals, so each command's help lists them only where it uses them. They
/// are still accepted everywhere (a script may pass them to every command),
/// before the command or after it; [`parse`] merges the two places.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    for (id, hidden_in) in PER_COMMAND_FLAGS {
        let Some(arg) = cmd.get_arguments().find(|a| a.get_id() == id).cloned() else {
            continue;
        };
        let arg = arg.global(false);
        cmd = cmd.mut_arg(id, |a| a.global(false));
        // One pass over the commands: `mut_subcommand` by name moves the
        // whole list per command, most of a bare `runlog --version`'s time.
        cmd = cmd.mut_subcommands(|sc| {
            let hide = hidden_in.contains(&sc.get_name());
            // The flag keeps the display order it has in `Cli`; the
            // command's own arguments, added when clap builds the command
            // (`defer` on `Command`), number from 0 as they would without it.
            sc.arg(arg.clone().hide(hide)).next_display_order(0)
        });
    }
    cmd
}

/// Parses the process's arguments ([`command`]): a per-command flag given
/// after the command wins over the same flag given before it.
pub fn parse() -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    use clap::parser::ValueSource;
    let m = command().try_get_matches()?;
    let mut cli = Cli::from_arg_matches(&m)?;
    if let Some((_, sub)) = m.subcommand() {
        if sub.value_source("lock_timeout") == Some(ValueSource::CommandLine)
            && let Some(t) = sub.get_one::<f64>("lock_timeout")
        {
            cli.lock_timeout = *t;
        }
        if let Some(k) = sub.get_one::<PathBuf>("key_file") {
            cli.key_file = Some(k.clone());
        }
    }
    Ok(cli)
}

/// A refusal of a malformed argument (exit 2).
pub(super) fn invalid(s: impl Into<String>) -> RunError {
    RunError::Invalid(s.into())
}

/// Checks a seconds flag (`--lock-timeout`, `--idle`, `--interval`,
/// `--commit-delay`): a finite number in `range`. An open-ended range is
/// capped at 10⁹ s, which a `Duration` holds and no run outlives.
pub fn seconds(
    flag: &str,
    secs: f64,
    range: std::ops::RangeInclusive<f64>,
) -> Result<std::time::Duration, RunError> {
    if !(secs.is_finite() && range.contains(&secs)) {
        let (lo, hi) = (range.start(), range.end());
        let within = match hi.is_finite() {
            true => format!("in {lo}..={hi}"),
            false => format!("≥ {lo}"),
        };
        return Err(invalid(format!(
            "{flag} {secs} is not a number of seconds {within}"
        )));
    }
    Ok(std::time::Duration::from_secs_f64(secs.min(1e9)))
}

/// Splits `a,b,c` into names (empty: none).
pub fn parse_list(what: &str, s: &str) -> Result<Vec<String>, RunError> {
    if s.trim().is_empty() {
        return Ok(vec![]);
    }
    s.split(',')
        .map(|n| {
            let n = n.trim();
            Change::check_name(what, n).map_err(|e| invalid(e.to_string()))?;
            Ok(n.to_string())
        })
        .collect()
}

/// Parses repeated `UNIT=DEP+DEP`.
pub fn parse_deps(specs: &[String]) -> Result<BTreeMap<String, Vec<String>>, RunError> {
    let mut out = BTreeMap::new();
    for s in specs {
        let (u, d) = s
            .split_once('=')
            .ok_or_else(|| invalid(format!("--deps {s:?} is not UNIT=DEP+DEP")))?;
        let u = u.trim();
        Change::check_name("unit", u).map_err(|e| invalid(e.to_string()))?;
        let deps = d
            .split('+')
            .filter(|x| !x.trim().is_empty())
            .map(|x| {
                let x = x.trim();
                Change::check_name("dependency", x).map_err(|e| invalid(e.to_string()))?;
                Ok(x.to_string())
            })
            .collect::<Result<Vec<_>, RunError>>()?;
        out.entry(u.to_string())
            .or_insert_with(Vec::new)
            .extend(deps);
    }
    Ok(out)
}

/// Parses repeated `NAME=LIMIT@OWNER`.
pub fn parse_budgets(specs: &[String]) -> Result<BTreeMap<String, BudgetSpec>, RunError> {
    let mut out = BTreeMap::new();
    for s in specs {
        let bad = || invalid(format!("--budget {s:?} is not NAME=LIMIT@OWNER"));
        let (name, rest) = s.split_once('=').ok_or_else(bad)?;
        let (limit, owner) = rest.rsplit_once('@').ok_or_else(bad)?;
        let limit = match limit.trim() {
            "" => None,
            l => Some(parse_amount(l)?),
        };
        out.insert(
            name.trim().to_string(),
            BudgetSpec {
                limit,
                owner: owner.trim().to_string(),
            },
        );
    }
    Ok(out)
}

/// Parses a finite, non-negative number.
pub fn parse_amount(s: &str) -> Result<f64, RunError> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(invalid(format!("{s:?} is not a finite number ≥ 0"))),
    }
}
