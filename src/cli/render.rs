//! The human `status` view: pure functions from a document to text, so a later
//! `--watch` only has to call them again every second.

use runlog::run::RunView;
use runlog::run::UnitStatus;
use runlog::run::{ArchivedRun, RunSummary};
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
pub fn render_status(view: &RunView<'_>) -> Result<String, runlog::run::RunError> {
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
            r.status.map_or("uninitialized", |s| s.as_str()).to_string(),
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

/// What `status --watch` knows beyond the run itself: the space a frame may
/// take, how fast units are finishing, and the changes it has seen.
#[derive(Debug, Clone, Default)]
pub struct WatchContext {
    /// Lines a frame may take (`usize::MAX`: no limit).
    pub rows: usize,
    /// Characters a line may take (`usize::MAX`: no limit).
    pub cols: usize,
    /// Units done per second, over the last few redraws (`None`: not known yet).
    pub rate: Option<f64>,
    /// The most recent changes seen, oldest first.
    pub recent: Vec<String>,
    /// The run's remote line, as `status` shows it (`None`: no remote).
    pub remote: Option<String>,
}

/// Items shown per list before "… and N more".
const WATCH_LIST_ITEMS: usize = 5;

/// Renders the `--watch` summary: header, progress with counts per status,
/// rate and ETA, the remote line (when the run has a remote), budgets, phases and open items (the first few of each, with
/// "… and N more"), recent changes, and the eligible units of a small run.
/// Reads the header and the counts only (units only in runs of at most
/// [`STATUS_LIST_UNITS`]), so a redraw costs the same at any run size. The
/// frame never has more than `ctx.rows` lines nor a line wider than
/// `ctx.cols`: a line is cut with `…`, and the least important lines go first.
pub fn render_watch(
    view: &RunView<'_>,
    ctx: &WatchContext,
) -> Result<String, runlog::run::RunError> {
    let doc = view.header();
    if !doc.is_initialized() {
        return Ok(fit(
            vec!["run store exists but was never initialized".into()],
            ctx,
        ));
    }
    let c = view.counts();
    let mut l: Vec<String> = vec![];
    l.push(format!("run {}  [{}]", doc.id, doc.status));
    l.push(format!("task: {}", doc.task));
    if let Some(f) = &doc.finished_at {
        l.push(format!(
            "finished {f}  result: {}",
            doc.result.as_deref().unwrap_or("-")
        ));
    } else {
        l.push(format!("updated {}", doc.updated_at));
    }
    l.push(format!(
        "units {}",
        progress_bar(c.done as usize, c.total() as usize)
    ));
    let per_status: Vec<String> = UnitStatus::ALL
        .iter()
        .map(|st| (st, count_of(&c, *st)))
        .filter(|(_, n)| *n > 0)
        .map(|(st, n)| format!("{} {n}", st.as_str()))
        .collect();
    l.push(format!(
        "  {}",
        if per_status.is_empty() {
            "no units".to_string()
        } else {
            per_status.join(" · ")
        }
    ));
    let pct = if c.total() == 0 {
        0.0
    } else {
        c.done as f64 * 100.0 / c.total() as f64
    };
    let mut pace = format!("  {pct:.1}% done");
    match ctx.rate {
        Some(r) if r > 0.0 => {
            let eta = c.open() as f64 / r;
            pace.push_str(&format!(" · {r:.1} units/s · ETA {}", duration_text(eta)));
        }
        Some(_) if !doc.is_closed() && c.open() > 0 => pace.push_str(" · no units finishing"),
        _ => {}
    }
    l.push(pace);
    if let Some(r) = &ctx.remote {
        l.push(r.clone());
    }
    if !doc.budgets.is_empty() {
        let items = doc.budgets.iter().map(|(n, b)| {
            let limit = b.limit.map_or("unlimited".to_string(), |x| x.to_string());
            let flag = if b.is_exhausted() { " EXHAUSTED" } else { "" };
            format!("{n} {}/{limit}{flag}", b.spent)
        });
        l.push(fit_list("budgets: ", items, doc.budgets.len(), ctx.cols));
    }
    if !doc.phases.is_empty() {
        let items = doc
            .phases
            .iter()
            .map(|(n, p)| format!("{n} {}", p.status.as_str()));
        l.push(fit_list("phases: ", items, doc.phases.len(), ctx.cols));
    }
    if !doc.open_items.is_empty() {
        let items = doc
            .open_items
            .iter()
            .map(|i| format!("{} {}", i.id, i.item.0));
        let head = format!("open items ({}): ", doc.open_items.len());
        l.push(fit_list(&head, items, doc.open_items.len(), ctx.cols));
    }
    if !doc.is_closed() && c.total() <= STATUS_LIST_UNITS {
        let r = view.resume_set()?;
        let head = format!("eligible ({}): ", r.eligible.len());
        l.push(fit_list(
            &head,
            r.eligible.iter().cloned(),
            r.eligible.len(),
            ctx.cols,
        ));
        if !r.dep_blocked.is_empty() {
            let head = format!("held back ({}): ", r.dep_blocked.len());
            l.push(fit_list(
                &head,
                r.dep_blocked.keys().cloned(),
                r.dep_blocked.len(),
                ctx.cols,
            ));
        }
    }
    if !ctx.recent.is_empty() {
        l.push("recent:".into());
        for r in ctx.recent.iter().rev().take(WATCH_LIST_ITEMS) {
            l.push(format!("  {r}"));
        }
    }
    if doc.is_closed() {
        l.push("closed: a new run is needed to continue".into());
    } else {
        l.push(format!(
            "resume: runlog resume {}   one unit: runlog get {} --unit NAME",
            doc.id, doc.id
        ));
    }
    Ok(fit(l, ctx))
}

fn count_of(c: &runlog::run::UnitCounts, st: UnitStatus) -> u64 {
    match st {
        UnitStatus::Pending => c.pending,
        UnitStatus::InProgress => c.in_progress,
        UnitStatus::Done => c.done,
        UnitStatus::Blocked => c.blocked,
        UnitStatus::DepBlocked => c.dep_blocked,
    }
}

/// `3h02m`, `4m05s`, `12s`.
fn duration_text(secs: f64) -> String {
    if !secs.is_finite() || secs > 99.0 * 86_400.0 {
        return "-".into();
    }
    let s = secs.round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// `head` and as many of `items` as fit in `cols`, then "… and N more".
fn fit_list(head: &str, items: impl Iterator<Item = String>, total: usize, cols: usize) -> String {
    let mut line = head.to_string();
    let mut shown = 0usize;
    for item in items.take(WATCH_LIST_ITEMS) {
        let more = total - shown - 1;
        let tail = if more > 0 {
            format!(" … and {more} more")
        } else {
            String::new()
        };
        let sep = if shown == 0 { "" } else { ", " };
        let want = line.chars().count() + sep.len() + item.chars().count() + tail.chars().count();
        if shown > 0 && want > cols {
            break;
        }
        line.push_str(sep);
        line.push_str(&item);
        shown += 1;
    }
    if shown < total {
        line.push_str(&format!(" … and {} more", total - shown));
    }
    line
}

/// At most `ctx.rows` lines of at most `ctx.cols` characters.
fn fit(lines: Vec<String>, ctx: &WatchContext) -> String {
    let mut s = String::new();
    for line in lines.into_iter().take(ctx.rows.max(1)) {
        let _ = writeln!(s, "{}", cut(&line, ctx.cols.max(1)));
    }
    s
}

/// `line` cut to `cols` characters, ending in `…` when cut; control
/// characters (from a task or an item) are shown as `?`, so a line is one line.
pub fn cut(line: &str, cols: usize) -> String {
    let clean: String = line
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if clean.chars().count() <= cols {
        return clean;
    }
    let mut out: String = clean.chars().take(cols.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod watch_tests {
    use super::*;

    #[test]
    fn lists_fit_and_say_how_many_more() {
        let items = (0..1000).map(|i| format!("unit-{i}"));
        let l = fit_list("eligible (1000): ", items, 1000, 60);
        assert!(l.chars().count() <= 60, "{l}");
        assert!(l.ends_with("more") && l.contains("unit-0"), "{l}");
        let l = fit_list("x: ", ["a".to_string()].into_iter(), 1, 60);
        assert_eq!(l, "x: a");
    }

    #[test]
    fn frames_are_cut_to_rows_and_cols() {
        let ctx = WatchContext {
            rows: 2,
            cols: 5,
            ..Default::default()
        };
        let f = fit(vec!["abcdefgh".into(), "b".into(), "c".into()], &ctx);
        assert_eq!(f, "abcd…\nb\n");
        assert_eq!(cut("a\tb", 10), "a?b");
        assert_eq!(duration_text(65.0), "1m05s");
        assert_eq!(duration_text(7300.0), "2h01m");
    }
}
