//! How deep the long sweeps go (crash states, kill -9 iterations, fault soaks).
//!
//! `scripts/test` runs them at the **quick** depth by default, to keep the
//! everyday suite short; `scripts/test --full` (CI's `.ci/run`) sets
//! `RUNLOG_TEST_DEPTH=full` for the depth the sweeps were written for. A
//! sweep's own variable (`RUNLOG_KILL9_ITERS`, `RUNLOG_CRASH_SEEDS`, ...)
//! overrides both. Every sweep still asserts a floor on what it explored, and
//! one that samples draws its sample from a seed it prints, so a failure can be
//! replayed at either depth.
//!
//! With `RUNLOG_SWEEP_LOG` naming a file, each sweep appends one line
//! `sweep<TAB>depth<TAB>what it explored` to it, from which `scripts/test`
//! prints what this run explored (through `skip_support::append_to_log`: a
//! crate that includes this module includes that one too).
#![allow(dead_code)]

use std::io::Write;

/// The variable that selects the depth: `full`, or anything else for quick.
pub const ENV_DEPTH: &str = "RUNLOG_TEST_DEPTH";
/// The variable that names the file each sweep's summary is appended to.
pub const ENV_SWEEP_LOG: &str = "RUNLOG_SWEEP_LOG";
/// The variable that fixes the seed a quick sweep draws its sample from.
pub const ENV_SAMPLE_SEED: &str = "RUNLOG_SAMPLE_SEED";

/// True at the full depth (`RUNLOG_TEST_DEPTH=full`).
pub fn full() -> bool {
    std::env::var(ENV_DEPTH).as_deref() == Ok("full")
}

/// The depth's name, as the summaries print it.
pub fn name() -> &'static str {
    if full() { "full" } else { "quick" }
}

/// `var` from the environment if set (a number), else `quick` or `full` by
/// the depth. A value that is not a number fails: a typo must not quietly
/// run the default.
pub fn scaled(var: &str, quick: u64, full: u64) -> u64 {
    match std::env::var(var) {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("${var}={s:?} is not a number")),
        Err(_) if self::full() => full,
        Err(_) => quick,
    }
}

/// The seed a sampling sweep draws from: `RUNLOG_SAMPLE_SEED` if set, else
/// one taken from the clock (a different sample each run). The caller prints
/// it in its summary.
pub fn sample_seed() -> u64 {
    match std::env::var(ENV_SAMPLE_SEED) {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("${ENV_SAMPLE_SEED}={s:?} is not a number")),
        Err(_) => {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            // A short number is easier to paste back.
            (t ^ (t >> 29)) % 1_000_000
        }
    }
}

/// Reports what sweep `sweep` explored: on stderr (shown by `cargo test`
/// beside the test, captured or not) and, with `RUNLOG_SWEEP_LOG` set, as a
/// line of that file.
pub fn explored(sweep: &str, what: std::fmt::Arguments<'_>) {
    let line = format!("{sweep}\t{}\t{what}", name());
    let _ = writeln!(
        std::io::stderr().lock(),
        "sweep {}",
        line.replace('\t', " ")
    );
    crate::skip_support::append_to_log(
        ENV_SWEEP_LOG,
        &line.replace('\n', " "),
        &format!("{sweep}: cannot record what it explored"),
    );
}
