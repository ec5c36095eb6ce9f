//! The human `status` view: pure functions from a document to text, so a later
//! `--watch` only has to call them again every second.

use super::doc::UnitStatus;
use super::error::Result;
use super::runs::{ArchivedRun, RunSummary};
use super::view::RunView;
use std::fmt::Write;

const BAR_WIDTH: usize = 30;

/// A text progress bar: `[#########.........]  3/9`.
pub fn progress_bar(done: usize, total: usize) -> String {
    let filled = (done * BAR_WIDTH).checked_div(total).unwrap_or(0);
    format!(
        "[{}{}] {done}/{total}",
        "#".repeat(filled),
        ".".repeat(BAR_WIDTH - filled)
    )
}

/// Runs with at most this many units list every unit in `status`; larger
/// ones show counts only, so `status` costs the same at any size.
pub const STATUS_LIST_UNITS: u64 = 50;

/// `status --json`: the run document without its units, and the unit counts
/// (`unitCounts`). `get` prints the units.
pub fn status_json(view: &RunView<'_>) -> serde_json::Value {
    let mut v = serde_json::to_value(view.header()).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.remove("units");
        o.insert(
            "unitCounts".into(),
            serde_json::to_value(view.counts()).unwrap_or_default(),
        );
    }
    v
}

/// Renders one run: header, phases, unit counts with a progress bar (and each
/// unit, in small runs), open items, budgets, and how to resume. Reads the
/// header and the counts; units only up to [`STATUS_LIST_UNITS`].
pub fn render_status(view: &RunView<'_>) -> Result<String> {
    let doc = view.header();
    let counts = view.counts();
    let mut s = String::new();
    if !doc.is_initialized() {
        return Ok("run store exists but was never initialized\n".to_string());
    }
    let _ = writeln!(s, "run {}  [{}]", doc.id, doc.status);
    let _ = writeln!(s, "task: {}", doc.task);
    let _ = writeln!(s, "created {}  updated {}", doc.created_at, doc.updated_at);
    if let Some(f) = &doc.finished_at {
        let _ = writeln!(
            s,
            "finished {f}  result: {}",
            doc.result.as_deref().unwrap_or("-")
        );
    }
    if !doc.phases.is_empty() {
        let _ = writeln!(s, "\nphases:");
        for (n, p) in &doc.phases {
            let _ = writeln!(s, "  {:<12} {n}", p.status.as_str());
        }
    }
    let _ = writeln!(
        s,
        "\nunits {}",
        progress_bar(counts.done as usize, counts.total() as usize)
    );
    let small = counts.total() <= STATUS_LIST_UNITS;
    if small {
        for u in view.units() {
            let (n, u) = u?;
            let mut line = format!("  {:<12} {n}", u.status.as_str());
            if u.attempts > 1 {
                let _ = write!(line, "  (attempts {})", u.attempts);
            }
            if !u.depends_on.is_empty() {
                let _ = write!(line, "  after {}", u.depends_on.join(", "));
            }
            if !u.note.is_empty() {
                let _ = write!(line, "  — {}", u.note);
            }
            let _ = writeln!(s, "{line}");
        }
    } else {
        for st in UnitStatus::ALL {
            let n = match st {
                UnitStatus::Pending => counts.pending,
                UnitStatus::InProgress => counts.in_progress,
                UnitStatus::Done => counts.done,
                UnitStatus::Blocked => counts.blocked,
                UnitStatus::DepBlocked => counts.dep_blocked,
            };
            if n > 0 {
                let _ = writeln!(s, "  {:<12} {n}", st.as_str());
            }
        }
        let _ = writeln!(s, "  (one unit: runlog get {} --unit NAME)", doc.id);
    }
    if !doc.budgets.is_empty() {
        let _ = writeln!(s, "\nbudgets:");
        for (n, b) in &doc.budgets {
            let limit = b.limit.map_or("unlimited".to_string(), |l| l.to_string());
            let flag = if b.is_exhausted() { "  EXHAUSTED" } else { "" };
            let _ = writeln!(s, "  {n}: {} / {limit} (owner {}){flag}", b.spent, b.owner);
        }
    }
    if !doc.open_items.is_empty() {
        let _ = writeln!(s, "\nopen items:");
        for i in &doc.open_items {
            let _ = writeln!(s, "  {}  {}", i.id, i.item.0);
        }
    }
    if doc.is_closed() {
        let _ = writeln!(s, "\nclosed: a new run is needed to continue");
    } else {
        if small {
            let r = view.resume_set()?;
            let _ = writeln!(
                s,
                "\nresume: {} to skip, {} eligible ({}), {} held back",
                r.skip.len(),
                r.eligible.len(),
                r.eligible.join(", "),
                r.dep_blocked.len()
            );
        } else {
            let _ = writeln!(
                s,
                "\nresume: {} to skip, {} not done",
                counts.done,
                counts.open()
            );
        }
        let _ = writeln!(s, "  runlog resume {}", doc.id);
        if let Some(l) = &doc.launch {
            let args = l
                .args
                .as_ref()
                .map_or(String::new(), |a| format!(" {}", a.0));
            let _ = writeln!(s, "  relaunch: {}{args}", l.script_path);
        }
    }
    Ok(s)
}

/// Renders `status --list`: a header row, then one line per run, newest
/// first. Columns are as wide as their longest value, so any id (up to 128
/// bytes) keeps them aligned. A run that can't be read says so in its row.
pub fn render_list(runs: &[RunSummary]) -> String {
    let rows: Vec<[String; 5]> = runs.iter().map(list_row).collect();
    render_table(["ID", "STATUS", "UNITS", "CREATED", "TASK"], &rows)
}

/// Renders `archive list`: like `status --list`, keyed by the archived name.
pub fn render_archive_list(runs: &[ArchivedRun]) -> String {
    let rows: Vec<[String; 5]> = runs
        .iter()
        .map(|a| {
            let mut r = list_row(&a.summary);
            r[0] = a.name.clone();
            r
        })
        .collect();
    render_table(["NAME", "STATUS", "UNITS", "CREATED", "TASK"], &rows)
}

fn list_row(r: &RunSummary) -> [String; 5] {
    match &r.error {
        Some(e) => [
            r.id.clone(),
            "unreadable".into(),
            "-".into(),
            "-".into(),
            e.clone(),
        ],
        None => [
            r.id.clone(),
            r.status
                .map_or("uninitialized", |s| s.as_str())
                .to_string(),
            format!("{}/{}", r.units_done, r.units_total),
            r.created_at.clone(),
            r.task.clone(),
        ],
    }
}

/// Left-aligned columns as wide as their widest cell; the last is not padded.
fn render_table(head: [&str; 5], rows: &[[String; 5]]) -> String {
    let mut width = head.map(|h| h.chars().count());
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut s = String::new();
    let head = head.map(String::from);
    for r in std::iter::once(&head).chain(rows) {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                let _ = write!(line, "{c:<w$}  ", w = width[i]);
            }
        }
        let _ = writeln!(s, "{}", line.trim_end());
    }
    s
}
