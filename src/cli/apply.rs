//! `runlog apply RUN`: the library's `apply` protocol (`Run::apply_lines`,
//! docs/CLI.md "apply") on stdin and stdout, holding the writer lock while
//! stdin lasts. Refused and failed lines are said on stderr too.

use super::wait::with_lock_notice;
use super::{EXIT_DONE, EXIT_FAILED};
use runlog::run::{Notice, RunError, Runs};

/// Where a line refused for its shape sends its reader.
const SHAPE_HINT: &str = "; see: runlog apply --help";

/// `runlog apply RUN`.
pub fn apply_stdin(runs: &Runs, id: &str) -> Result<u8, RunError> {
    let run = with_lock_notice(runs, |r| r.open(id))?;
    let stdin = std::io::stdin();
    let mut input = std::io::BufReader::with_capacity(256 << 10, stdin.lock());
    let mut out = std::io::stdout().lock();
    let mut notice = |n: Notice<'_>| match n {
        Notice::Line { line, message, .. } => eprintln!("runlog: apply: line {line}: {message}"),
        Notice::Warning(w) => eprintln!("runlog: warning {}: {}", w.code, w.message),
        _ => {}
    };
    let ended = run.apply_lines(
        &mut input,
        &mut out,
        &super::report,
        SHAPE_HINT,
        &mut notice,
    )?;
    Ok(if ended { EXIT_DONE } else { EXIT_FAILED })
}
