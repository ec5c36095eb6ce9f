//! Proves `status --watch` fits a real terminal at any run size: in a tmux
//! pane of 80×24 the frame at 10 units and at 1,000,000 units keeps its header
//! on the top row (nothing scrolled off), no line wraps, and the progress,
//! counts and lists are there ("… and N more" where a list is cut).
//! Skips, saying why, when tmux is absent, unless RUNLOG_REQUIRE_TMUX=1.
use crate::cli_support;
use cli_support::*;
use runlog::engine::{CompactionPolicy, SyncPolicy};
use runlog::run::{Change, InitSpec, Runs, UnitStatus};
use std::path::Path;
use std::process::Command;

const ROWS: usize = 24;
const COLS: usize = 80;

fn tmux_available() -> bool {
    let found = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        crate::skip_support::skip(
            "watch_fits_an_80x24_terminal_at_10_and_at_a_million_units",
            "RUNLOG_REQUIRE_TMUX",
            "tmux is not installed (apt-get install -y tmux)",
        );
    }
    found
}

/// A run of `n` pending units (the first `done` of them done), built as a
/// bulk load through the library: no fsync per batch, one compaction.
fn build(root: &Path, n: u64, done: u64) {
    let runs = Runs::new(root)
        .with_codec(runlog::engine::Codec::Binary)
        .with_sync(SyncPolicy::Never)
        .with_compaction(CompactionPolicy::Manual);
    let run = runs
        .init(InitSpec {
            id: "big".into(),
            task: format!("watch {n} units"),
            ..InitSpec::default()
        })
        .unwrap();
    let unit = |i: u64, status| Change::Unit {
        unit: format!("u{i:07}"),
        status,
        note: None,
        deps: None,
    };
    let mut i = 0;
    while i < n {
        let end = (i + 20_000).min(n);
        for r in run.apply_batch((i..end).map(|k| unit(k, UnitStatus::Pending)).collect()) {
            r.unwrap();
        }
        i = end;
    }
    let done: Vec<Change> = (0..done).map(|k| unit(k, UnitStatus::Done)).collect();
    for r in run.apply_batch(done) {
        r.unwrap();
    }
    run.store().sync().unwrap();
    run.compact().unwrap();
    for k in 0..3 {
        run.add_items(vec![serde_json::json!({"finding": format!("item number {k} with a long text that goes on and on past any terminal's width")})]).unwrap();
    }
}

/// Starts the watcher in a detached 80×24 tmux session, waits for a frame
/// showing the progress, and returns the pane's lines.
fn capture(root: &Path, want: &str) -> Vec<String> {
    let sock = root.join("tmux.sock");
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .arg("-S")
            .arg(&sock)
            .args(args)
            .env_remove("TMUX")
            .env("TERM", "xterm")
            .output()
            .unwrap()
    };
    let shell_cmd = format!(
        "'{BIN}' --dir '{}' status big --watch --interval 0.2; sleep 600",
        root.display()
    );
    let o = tmux(&[
        "new-session",
        "-d",
        "-s",
        "w",
        "-x",
        &COLS.to_string(),
        "-y",
        &ROWS.to_string(),
        &shell_cmd,
    ]);
    assert!(
        o.status.success(),
        "tmux: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut lines = vec![];
    // Poll the pane (each poll a capture) until a whole frame is drawn.
    for _ in 0..400 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        // -J joins a wrapped line back into one, so a line wider than the pane shows.
        let o = tmux(&["capture-pane", "-p", "-J", "-t", "w"]);
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        if text.contains(want) && text.contains("resume: runlog resume big") {
            lines = text.lines().map(|l| l.trim_end().to_string()).collect();
            break;
        }
    }
    tmux(&["kill-server"]);
    assert!(
        !lines.is_empty(),
        "no frame with {want:?} appeared in the pane"
    );
    lines
}

fn assert_fits(lines: &[String]) {
    let shown = lines.join("\n");
    assert!(lines.len() <= ROWS, "{} lines:\n{shown}", lines.len());
    assert!(
        lines[0].starts_with("runlog status big --watch"),
        "the header scrolled off:\n{shown}"
    );
    for l in lines {
        assert!(l.chars().count() <= COLS, "a line wraps:\n{l}");
    }
}

#[test]
fn watch_fits_an_80x24_terminal_at_10_and_at_a_million_units() {
    if !tmux_available() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    build(d.path(), 10, 3);
    let lines = capture(d.path(), "3/10");
    assert_fits(&lines);
    let shown = lines.join("\n");
    assert!(shown.contains("pending 7 · done 3"), "{shown}");
    assert!(shown.contains("eligible (7): u0000003"), "{shown}");
    assert!(
        shown.contains("open items (3):") && shown.contains("… and"),
        "{shown}"
    );

    let d = tempfile::tempdir().unwrap();
    let t0 = std::time::Instant::now();
    build(d.path(), 1_000_000, 1000);
    eprintln!(
        "built 1,000,000 units in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let t0 = std::time::Instant::now();
    let lines = capture(d.path(), "1000/1000000");
    eprintln!(
        "first frame captured in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert_fits(&lines);
    let shown = lines.join("\n");
    assert!(shown.contains("pending 999000 · done 1000"), "{shown}");
    assert!(shown.contains("0.1% done"), "{shown}");
    assert!(
        !shown.contains("u0000999"),
        "a large run lists no units:\n{shown}"
    );
}
