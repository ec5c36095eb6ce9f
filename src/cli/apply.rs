//! `runlog apply`: operations as JSON lines on stdin, one ack line each on
//! stdout. Lines already buffered are applied together with one write and one
//! fsync; no ack is written before the fsync that covers it.

use super::ack::Acked;
use super::ops::{Line, MAX_OP_LINE_BYTES, parse_op_line, read_line_capped};
use super::{EXIT_DONE, EXIT_FAILED, EXIT_REFUSED};
use runlog::run::{Change, RunError, Runs};
use serde_json::json;
use std::io::{BufReader, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};

/// Most lines applied as one batch.
const MAX_BATCH: usize = 1024;

fn ack_error(msg: &str, code: u8) -> String {
    json!({ "error": msg, "code": code }).to_string()
}

/// Applies the operations read from `input` with `commit` (`ack::apply_batch`,
/// or `serve`'s committer), writing one ack per
/// non-blank line to `out`. Returns the exit status (1 after a failure that
/// is not a refusal: the store no longer accepts writes). Failures are also
/// written to stderr, and refusals too when `echo_refusals` (`apply`'s own
/// stdin; `serve` leaves a refusal to the client it refused). `acked` counts
/// the changes acknowledged durable.
pub fn apply_stream(
    commit: &dyn Fn(Vec<Change>) -> Vec<Result<Acked, RunError>>,
    input: &mut BufReader<impl Read>,
    out: &mut impl Write,
    echo_refusals: bool,
    acked: &AtomicU64,
) -> Result<u8, RunError> {
    let io_err = |e: std::io::Error| RunError::Io {
        op: "apply: stdin/stdout",
        path: "-".into(),
        source: e,
    };
    let mut line_no = 0u64;
    loop {
        // Block for one line, then take every line already buffered.
        let mut lines = vec![];
        match read_line_capped(input, MAX_OP_LINE_BYTES).map_err(io_err)? {
            None => return Ok(EXIT_DONE),
            Some(l) => lines.push(l),
        }
        while lines.len() < MAX_BATCH && input.buffer().contains(&b'\n') {
            match read_line_capped(input, MAX_OP_LINE_BYTES).map_err(io_err)? {
                Some(l) => lines.push(l),
                None => break,
            }
        }
        // Parse; refused lines get their ack in place, accepted ones go in the batch.
        // Each ack: (line number, refusal or None for a line in the batch).
        let mut acks: Vec<(u64, Option<String>)> = vec![];
        let mut changes = vec![];
        for l in lines {
            line_no += 1;
            let parsed = match l {
                Line::TooLong(n) => Err(format!(
                    "line of {n} bytes exceeds the limit of {MAX_OP_LINE_BYTES}"
                )),
                // Invalid UTF-8 is refused, never repaired into U+FFFD.
                Line::Text(t) => match std::str::from_utf8(&t) {
                    Err(e) => Err(format!(
                        "line is not UTF-8 (invalid byte at offset {})",
                        e.valid_up_to()
                    )),
                    Ok(text) if text.trim().is_empty() => continue,
                    Ok(text) => parse_op_line(text.trim()),
                },
            };
            match parsed {
                Ok(c) => {
                    acks.push((line_no, None));
                    changes.push(c);
                }
                Err(e) => acks.push((line_no, Some(e))),
            }
        }
        // `commit` returns only after the fsync covering every accepted change.
        let mut results = commit(changes).into_iter();
        let mut failed = false;
        for (n, ack) in acks {
            let (msg, code) = match ack {
                Some(why) => (why, EXIT_REFUSED),
                None => match results.next() {
                    Some(Ok(a)) => {
                        writeln!(out, "{}", a.line()).map_err(io_err)?;
                        acked.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    Some(Err(e)) => (super::report(&e), e.exit_code()),
                    None => ("internal: missing result".to_string(), EXIT_FAILED),
                },
            };
            failed |= code == EXIT_FAILED;
            // Failures go to stderr as well as into the ack (docs/CLI.md).
            if echo_refusals || code == EXIT_FAILED {
                eprintln!("runlog: apply: line {n}: {msg}");
            }
            writeln!(out, "{}", ack_error(&msg, code)).map_err(io_err)?;
        }
        out.flush().map_err(io_err)?;
        if failed {
            return Ok(EXIT_FAILED);
        }
    }
}

/// `runlog apply RUN`: holds the writer lock while stdin lasts.
pub fn apply_stdin(runs: &Runs, id: &str) -> Result<u8, RunError> {
    let run = super::wait::with_lock_notice(runs, |r| r.open(id))?;
    let stdin = std::io::stdin();
    let mut input = std::io::BufReader::with_capacity(256 << 10, stdin.lock());
    let mut out = std::io::stdout().lock();
    let commit = |changes| super::ack::apply_batch(&run, changes);
    apply_stream(&commit, &mut input, &mut out, true, &AtomicU64::new(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_lines_are_consumed_whole() {
        let mut r = std::io::BufReader::with_capacity(4, &b"ab\nlonglongline\nc"[..]);
        assert_eq!(
            read_line_capped(&mut r, 5).unwrap(),
            Some(Line::Text(b"ab".to_vec()))
        );
        assert_eq!(
            read_line_capped(&mut r, 5).unwrap(),
            Some(Line::TooLong(12))
        );
        assert_eq!(
            read_line_capped(&mut r, 5).unwrap(),
            Some(Line::Text(b"c".to_vec()))
        );
        assert_eq!(read_line_capped(&mut r, 5).unwrap(), None);
    }
}
