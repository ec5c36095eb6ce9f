//! How a test that cannot run says so where everyone sees it. libtest captures
//! what a test prints with `print!`/`eprint!` and shows it only on failure, so
//! a test that returns early is listed as `ok` with its reason hidden. [`skip`]
//! writes its `SKIPPED` line to file descriptor 2 itself, which no capture
//! intercepts: a bare `cargo test` shows it on the terminal beside the `ok`.
//!
//! Each skippable component has a `RUNLOG_REQUIRE_*` variable; set to `1` it
//! makes the skip a failure (`scripts/test` sets it for what it set up). With
//! `RUNLOG_SKIP_LOG` naming a file, each skip is also appended to it as one
//! line `VARIABLE<TAB>test<TAB>reason`, from which `scripts/test` prints its
//! summary.
#![allow(dead_code)]

use std::io::Write;
use std::os::fd::AsFd;

/// The variable that names the file skips are appended to.
pub const ENV_SKIP_LOG: &str = "RUNLOG_SKIP_LOG";

/// True when `require` (a `RUNLOG_REQUIRE_*` variable) is set to `1`.
pub fn required(require: &str) -> bool {
    std::env::var(require).as_deref() == Ok("1")
}

/// Reports that `test` did not run because `why`, or fails it when `require`
/// is `1`. The caller returns right after.
pub fn skip(test: &str, require: &str, why: &str) {
    assert!(
        !required(require),
        "{test}: {require}=1 but it cannot run: {why}"
    );
    to_fd2(&format!(
        "SKIPPED {test}: {why} (set {require}=1 to make this a failure)\n"
    ));
    let entry = format!("{require}\t{test}\t{}", why.replace(['\t', '\n'], " "));
    append_to_log(
        ENV_SKIP_LOG,
        &entry,
        &format!("{test}: cannot record the skip"),
    );
}

/// Appends `line` and a newline to the file `$var` names, when it names one:
/// one write on an `O_APPEND` file, so that lines from parallel tests (and
/// test binaries) do not interleave. A failure panics with `what`, the
/// variable and the path.
pub fn append_to_log(var: &str, line: &str, what: &str) {
    if let Some(log) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
        if let Err(e) = written {
            panic!(
                "{what} in ${var}={}: {e}",
                std::path::Path::new(&log).display()
            );
        }
    }
}

/// Fails the child side of a test run by hand (`--ignored`) without the
/// variable `var` its parent sets: passing would claim a test that tested nothing.
pub fn child_only(test: &str, var: &str) -> ! {
    panic!("{test} is the child side of another test, which sets ${var}; run bare it tests nothing")
}

/// Writes `line` to file descriptor 2 through a descriptor of its own, so it
/// reaches the terminal (or wherever stderr points) and not std's capturable
/// print path.
pub fn to_fd2(line: &str) {
    match std::io::stderr().as_fd().try_clone_to_owned() {
        Ok(fd) => {
            let _ = std::fs::File::from(fd).write_all(line.as_bytes());
        }
        Err(_) => {
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }
}
