//! `apply`'s protocol (docs/CLI.md, "apply"): operations as JSON lines in,
//! one ack line each out. Lines already buffered are applied together with
//! one write and one fdatasync; no ack is written before the fdatasync that
//! covers it. `runlog apply` runs it on stdin and stdout ([`Run::apply_lines`]),
//! a server on each connection (`server.rs`).

use super::batch::{Deferral, apply_batch};
use super::ops::{Line, MAX_OP_LINE_BYTES, OP_SHAPE, parse_op_line, read_line_capped};
use super::protocol::{Acked, error_line};
use crate::run::error::{Result, RunError};
use crate::run::handle::Run;
use crate::run::open::Warning;
use crate::run::transition::Change;
use std::io::{BufReader, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};

/// Most lines applied as one batch.
const MAX_BATCH: usize = 1024;

/// What a stream of operations tells its front end besides the acks it
/// writes ([`Run::apply_lines`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum Notice<'a> {
    /// A line was refused (nothing written) or failed: its number (from 1)
    /// and its ack's message. After a failure the stream ends.
    Line {
        /// The line's number, from 1.
        line: u64,
        /// Its ack's message.
        message: &'a str,
        /// True when refused (exit 2), false when failed (exit 1).
        refused: bool,
    },
    /// A warning of the writer's (a compaction deferred).
    Warning(&'a Warning),
}

/// The changes of one stream, applied in batches, each result in order.
pub(super) type Commit<'a> = dyn Fn(Vec<Change>) -> Vec<Result<Acked, RunError>> + 'a;

/// Applies the operations read from `input` with `commit`, writing one ack
/// per non-blank line to `out`; each error ack's message is `render`ed, and a
/// refusal of a line's shape ends with `shape_hint` (where to read more).
/// `Ok(false)` after a failure that is not a refusal: the store accepts no
/// more writes, and the stream ends there. `acked` counts the changes
/// acknowledged durable.
pub(super) fn apply_stream(
    commit: &Commit<'_>,
    input: &mut BufReader<impl Read>,
    out: &mut impl Write,
    render: &dyn Fn(&RunError) -> String,
    shape_hint: &str,
    notice: &mut dyn FnMut(Notice<'_>),
    acked: &AtomicU64,
) -> Result<bool> {
    let io_err = |e: std::io::Error| RunError::Io {
        op: "apply: read operations or write acks",
        path: "-".into(),
        source: e,
    };
    let mut line_no = 0u64;
    loop {
        // Block for one line, then take every line already buffered.
        let mut lines = vec![];
        match read_line_capped(input, MAX_OP_LINE_BYTES).map_err(io_err)? {
            None => return Ok(true),
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
                    Ok(text) => parse_op_line(text.trim()).map_err(|why| {
                        if why.ends_with(OP_SHAPE) {
                            format!("{why}{shape_hint}")
                        } else {
                            why
                        }
                    }),
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
        // `commit` returns only after the fdatasync covering every accepted change.
        let mut results = commit(changes).into_iter();
        let mut failed = false;
        for (n, ack) in acks {
            let (line, message, refused) = match ack {
                Some(why) => (error_line(&why, 2, None), why, true),
                None => match results.next() {
                    Some(Ok(a)) => {
                        writeln!(out, "{}", a.line()).map_err(io_err)?;
                        acked.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    Some(Err(e)) => {
                        let message = render(&e);
                        (
                            error_line(&message, e.exit_code(), Some(&e)),
                            message,
                            e.is_refused(),
                        )
                    }
                    None => {
                        let message = "internal: a change of the batch has no result".to_string();
                        (error_line(&message, 1, None), message, false)
                    }
                },
            };
            failed |= !refused;
            notice(Notice::Line {
                line: n,
                message: &message,
                refused,
            });
            writeln!(out, "{line}").map_err(io_err)?;
        }
        out.flush().map_err(io_err)?;
        if failed {
            return Ok(false);
        }
    }
}

impl Run {
    /// `apply`'s protocol (docs/CLI.md, "apply") on this run, of which this
    /// process is the writer: operations as JSON lines from `input`, one ack
    /// line each to `out` once durable (lines already buffered share one
    /// write and one fdatasync). `render` gives an error ack's message, and a
    /// line refused for its shape ends with `shape_hint` (say, where the
    /// caller's users read about lines); `notice` hears of each refused or
    /// failed line and of warnings.
    /// `Ok(true)` at the end of `input`; `Ok(false)` after a failed change
    /// (the run accepts no more writes); an error when `input` or `out` fails.
    pub fn apply_lines(
        &self,
        input: &mut BufReader<impl Read>,
        out: &mut impl Write,
        render: &dyn Fn(&RunError) -> String,
        shape_hint: &str,
        notice: &mut dyn FnMut(Notice<'_>),
    ) -> Result<bool> {
        let deferral = Deferral::new();
        // Warnings come from inside a batch, lines after it: never both at
        // once, so one cell lends `notice` to each in turn.
        let notice = std::cell::RefCell::new(notice);
        let commit = |changes| {
            apply_batch(self, changes, &deferral, &|w: &Warning| {
                (notice.borrow_mut())(Notice::Warning(w))
            })
        };
        let mut line = |n: Notice<'_>| (notice.borrow_mut())(n);
        apply_stream(
            &commit,
            input,
            out,
            render,
            shape_hint,
            &mut line,
            &AtomicU64::new(0),
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn capped_lines_are_consumed_whole() {
        use super::super::ops::{Line, read_line_capped};
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
