//! Reading a run without loading it: the document's run-level fields and the
//! unit counts at once, one unit by lookup, every unit by iteration in name
//! order. The whole [`RunDoc`] is built only when asked for.

use super::doc::{RunDoc, Unit, UnitStatus};
use super::error::{Result, RunError};
use super::machine::RunKeyed;
use super::resume::ResumeSet;
use super::units::UnitCounts;
use crate::engine::KeyedState;
use std::collections::BTreeMap;

/// The state of a run as its store holds it.
pub(crate) type RunState = KeyedState<RunKeyed>;

/// A unit held back: its name, status and not-done dependencies.
type HeldRow = (String, UnitStatus, Vec<String>);

/// A run's state, read by lookup.
#[derive(Clone, Copy)]
pub struct RunView<'a> {
    id: &'a str,
    state: &'a RunState,
}

impl std::fmt::Debug for RunView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunView")
            .field("id", &self.id)
            .field("counts", &self.counts())
            .finish_non_exhaustive()
    }
}

impl<'a> RunView<'a> {
    pub(crate) fn new(id: &'a str, state: &'a RunState) -> RunView<'a> {
        RunView { id, state }
    }

    /// The run document without its units (`units` is empty): id, task,
    /// status, timestamps, phases, items, budgets, fingerprint, checkpoint.
    pub fn header(&self) -> &'a RunDoc {
        &self.state.header().doc
    }

    /// How many units have each status.
    pub fn counts(&self) -> UnitCounts {
        self.state.header().counts
    }

    /// One unit, by name.
    pub fn unit(&self, name: &str) -> Result<Option<Unit>> {
        self.state
            .get(name)
            .map(|r| r.map(|r| r.to_unit()))
            .map_err(|e| RunError::engine(self.id, e))
    }

    /// Every unit from `start` on (all with `None`), in name order, read as the
    /// iteration goes: memory stays flat whatever the run's size.
    pub fn units_from(
        &self,
        start: Option<&str>,
    ) -> impl Iterator<Item = Result<(String, Unit)>> + 'a {
        let id = self.id;
        self.state.iter_from(start).map(move |e| {
            e.map(|(n, r)| (n.into_owned(), r.to_unit()))
                .map_err(|e| RunError::engine(id, e))
        })
    }

    /// Every unit, in name order.
    pub fn units(&self) -> impl Iterator<Item = Result<(String, Unit)>> + 'a {
        self.units_from(None)
    }

    /// The not-done units, split as the resume set splits them: each one
    /// whose every dependency is done goes to `eligible`, in name order; the
    /// ones waiting on a not-done unit come back with their not-done
    /// dependencies, the only rows the blocking roots need. Memory: the units
    /// held back, whatever the number eligible.
    fn open_units(&self, eligible: &mut dyn FnMut(String)) -> Result<Vec<HeldRow>> {
        let mut held = Vec::new();
        for u in self.units() {
            let (name, u) = u?;
            if u.status == UnitStatus::Done {
                continue;
            }
            // Only not-done dependencies matter; one the run does not have is
            // not done (and, absent from the rows, a root).
            let mut open_deps = Vec::new();
            for d in u.depends_on {
                let done = self.unit(&d)?.is_some_and(|x| x.status == UnitStatus::Done);
                if !done {
                    open_deps.push(d);
                }
            }
            if open_deps.is_empty() {
                eligible(name);
            } else {
                held.push((name, u.status, open_deps));
            }
        }
        Ok(held)
    }

    /// The resume set as the units are read, without its `skip` list: each
    /// eligible unit's name goes to `eligible`, in name order, as it is read,
    /// and the units held back come back with the roots blocking them.
    /// Memory: the units held back, whatever the number done or eligible. For
    /// callers that list the done units themselves.
    pub fn resume_streamed(
        &self,
        eligible: &mut dyn FnMut(String),
    ) -> Result<BTreeMap<String, Vec<String>>> {
        let held = self.open_units(eligible)?;
        // Every held-back row waits on a not-done unit: none is eligible, and
        // an eligible unit it waits on, absent from the rows, is a root, as
        // the resume set says it is.
        Ok(super::resume::resume_set_from_rows(held).dep_blocked)
    }

    /// The resume set, whole.
    pub fn resume_set(&self) -> Result<ResumeSet> {
        let mut eligible = Vec::new();
        let dep_blocked = self.resume_streamed(&mut |n| eligible.push(n))?;
        let mut set = ResumeSet {
            skip: Vec::new(),
            eligible,
            dep_blocked,
        };
        for u in self.units() {
            let (name, u) = u?;
            if u.status == UnitStatus::Done {
                set.skip.push(name);
            }
        }
        Ok(set)
    }

    /// Writes the resume set to `w` as JSON (`pretty`: indented): the same
    /// bytes as serde_json's text of [`RunView::resume_set`], with memory in
    /// proportion to the units held back (not to the units done or eligible).
    /// The units are read three times: once to work out what is held back,
    /// before anything is written, then once for each list, `skip` and
    /// `eligible`, as it is written. Damage met part-way is the error, typed
    /// as the read's, with what was written so far left in `w`; so is a
    /// failed write.
    pub fn write_resume_json(&self, w: impl std::io::Write, pretty: bool) -> Result<()> {
        // `dep_blocked` is `ResumeSet`'s own serialization; the two lists are
        // filled in as they are read.
        let held = ResumeSet {
            dep_blocked: self.resume_streamed(&mut |_| {})?,
            ..ResumeSet::default()
        };
        let open = to_json(&held, pretty)?;
        let mut out = Spliced::open(w, &open, "skip", pretty)?;
        for u in self.units() {
            let (name, unit) = u?;
            if unit.status == UnitStatus::Done {
                out.entry(None, &name)?;
            }
        }
        let mut out = out.then("eligible")?;
        for u in self.units() {
            let (name, unit) = u?;
            if unit.status != UnitStatus::Done && !held.dep_blocked.contains_key(&name) {
                out.entry(None, &name)?;
            }
        }
        out.close()
    }

    /// Writes the whole document to `w` as JSON (`pretty`: indented), one
    /// unit read at a time, so printing a run of any size holds one unit at
    /// a time: the same bytes as serde_json's text of [`RunView::to_doc`].
    /// Damage met part-way is the error, typed as the read's, with what was
    /// written so far left in `w`; so is a failed write.
    pub fn write_json(&self, w: impl std::io::Write, pretty: bool) -> Result<()> {
        // Every field but `units` is `RunDoc`'s own serialization of the header
        // (whose `units` is empty), so the two cannot drift apart.
        let header = to_json(self.header(), pretty)?;
        let mut out = Spliced::open(w, &header, "units", pretty)?;
        for u in self.units() {
            let (name, unit) = u?;
            out.entry(Some(&name), &unit)?;
        }
        out.close()
    }

    /// The whole document, units included: memory in proportion to the run.
    pub fn to_doc(&self) -> Result<RunDoc> {
        let mut doc = self.header().clone();
        for u in self.units() {
            let (n, u) = u?;
            doc.units.insert(n, u);
        }
        Ok(doc)
    }
}

/// A run read lock-free: owns its state (a mapped table and the log's tail).
pub struct RunRead {
    pub(crate) id: String,
    pub(crate) state: RunState,
    /// What the read-only open found (damaged snapshots skipped, a torn tail).
    pub(crate) recovery: crate::engine::RecoveryReport,
}

impl std::fmt::Debug for RunRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.view().fmt(f)
    }
}

impl RunRead {
    /// The run's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The state, by lookup.
    pub fn view(&self) -> RunView<'_> {
        RunView::new(&self.id, &self.state)
    }

    /// What the open found on the way: every damaged snapshot it skipped
    /// (`snapshot_fallbacks`, loud by design), the base it used, a torn tail.
    pub fn recovery(&self) -> &crate::engine::RecoveryReport {
        &self.recovery
    }
}

/// `value` as serde_json writes it (`pretty`: `to_writer_pretty`).
fn to_json(value: &impl serde::Serialize, pretty: bool) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    append_json(&mut buf, value, pretty)?;
    Ok(buf)
}

/// Appends `value` as serde_json writes it to `buf`.
fn append_json(buf: &mut Vec<u8>, value: &impl serde::Serialize, pretty: bool) -> Result<()> {
    if pretty {
        serde_json::to_writer_pretty(buf, value)
    } else {
        serde_json::to_writer(buf, value)
    }
    // A failure, not a refusal: nothing the caller gave was wrong (exit 1).
    .map_err(|e| RunError::io("serialize JSON", "-", std::io::Error::other(e)))
}

/// A write to the output, failed.
fn write_err(e: std::io::Error) -> RunError {
    RunError::io("write JSON", "-", e)
}

/// JSON text as serde_json writes it, with one top-level field's entries
/// written one at a time: the rest of the value is serialized beforehand with
/// that field empty (`{}` or `[]`), and the entries go in between its brackets,
/// indented as serde_json's pretty printer would at that depth.
struct Spliced<'h, W: std::io::Write> {
    w: W,
    /// The whole serialized value, and where the open field's opening
    /// bracket is in it.
    text: &'h [u8],
    at: usize,
    pretty: bool,
    entries: u64,
    /// One entry's text.
    buf: Vec<u8>,
}

/// How a top-level field's entries are indented (serde_json's two spaces a level).
const ENTRY_INDENT: &[u8] = b"\n    ";
/// How the field's closing bracket is.
const CLOSE_INDENT: &[u8] = b"\n  ";

impl<'h, W: std::io::Write> Spliced<'h, W> {
    /// Writes `text` up to and with the opening bracket of its top-level field
    /// `key`, whose value must be empty.
    fn open(mut w: W, text: &'h [u8], key: &str, pretty: bool) -> Result<Self> {
        let at = empty_field(text, key, 0)?;
        w.write_all(&text[..=at]).map_err(write_err)?;
        Ok(Spliced {
            w,
            text,
            at,
            pretty,
            entries: 0,
            buf: Vec::new(),
        })
    }

    /// Closes the field and goes on to the next one to fill, `key`, which
    /// must come after it.
    fn then(mut self, key: &str) -> Result<Self> {
        let next = empty_field(self.text, key, self.at + 1)?;
        self.close_field()?;
        self.w
            .write_all(&self.text[self.at + 1..=next])
            .map_err(write_err)?;
        self.at = next;
        self.entries = 0;
        Ok(self)
    }

    /// Writes one entry: `key: value` in an object, `value` in an array.
    fn entry(&mut self, key: Option<&str>, value: &impl serde::Serialize) -> Result<()> {
        self.buf.clear();
        if self.entries > 0 {
            self.buf.push(b',');
        }
        if self.pretty {
            self.buf.extend_from_slice(ENTRY_INDENT);
        }
        if let Some(key) = key {
            append_json(&mut self.buf, &key, false)?;
            self.buf
                .extend_from_slice(if self.pretty { b": " } else { b":" });
        }
        let start = self.buf.len();
        append_json(&mut self.buf, value, self.pretty)?;
        self.entries += 1;
        if !self.pretty || !self.buf[start..].contains(&b'\n') {
            return self.w.write_all(&self.buf).map_err(write_err);
        }
        // Pretty and on several lines: each of its lines one entry deeper.
        // serde_json escapes a newline in a string, so every one here is
        // the pretty printer's.
        let (head, value) = self.buf.split_at(start);
        self.w.write_all(head).map_err(write_err)?;
        for (i, line) in value.split(|&b| b == b'\n').enumerate() {
            if i > 0 {
                self.w.write_all(ENTRY_INDENT).map_err(write_err)?;
            }
            self.w.write_all(line).map_err(write_err)?;
        }
        Ok(())
    }

    /// Closes the field and writes the rest of the value.
    fn close(mut self) -> Result<()> {
        self.close_field()?;
        self.w
            .write_all(&self.text[self.at + 1..])
            .map_err(write_err)
    }

    /// The indent before the field's closing bracket, when it has entries.
    fn close_field(&mut self) -> Result<()> {
        if self.pretty && self.entries > 0 {
            self.w.write_all(CLOSE_INDENT).map_err(write_err)?;
        }
        Ok(())
    }
}

/// Where the empty value (`{}` or `[]`) of the top-level field `key` of
/// `text` starts, at or after `from`.
fn empty_field(text: &[u8], key: &str, from: usize) -> Result<usize> {
    top_level_value(text, key)
        .filter(|&at| at >= from && matches!(text.get(at..at + 2), Some(b"{}" | b"[]")))
        .ok_or_else(|| {
            RunError::io(
                "serialize JSON",
                "-",
                std::io::Error::other(format!("no empty field {key:?} to fill")),
            )
        })
}

/// Where the value of the top-level field `key` starts in the JSON object
/// `text` (compact or pretty), skipping strings and nested values.
fn top_level_value(text: &[u8], key: &str) -> Option<usize> {
    let quoted = format!("\"{key}\":");
    super::json::walk_structure(text, |i, c, depth| {
        // Only a key is followed by `:`.
        (c == b'"' && depth == 1 && text[i..].starts_with(quoted.as_bytes())).then(|| {
            let at = i + quoted.len();
            if text.get(at) == Some(&b' ') {
                at + 1
            } else {
                at
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 49: a view that cannot be written is a failure (exit 1), never a
    /// refusal: nothing the caller asked for was wrong.
    #[test]
    fn a_json_view_that_cannot_be_written_is_a_failure_not_a_refusal() {
        let e = Spliced::open(Vec::new(), b"{\"units\":[1]}", "units", false)
            .err()
            .expect("no empty field to fill");
        assert!(!e.is_refused(), "{e}");
        assert!(e.to_string().contains("serialize JSON"), "{e}");
        // A map whose keys are not strings: serde_json's own error.
        let bad: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        let e = to_json(&bad, false).expect_err("tuple keys");
        assert!(!e.is_refused(), "{e}");
    }
}
