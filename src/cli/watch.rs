//! `runlog status RUN --watch`: re-reads the run lock-free every interval and
//! redraws its status view until the run is finalized (then the final view is
//! shown and it exits 0) or the user presses Ctrl-C.
//!
//! Each frame is a summary that costs the same at any run size (header and
//! counts; see `render::render_watch`). On a terminal each frame clears the screen
//! and fits it: no more lines than the terminal has rows (less the header),
//! no line wider than it, with rate, ETA and the recent changes. Anywhere else
//! (a pipe, a file, a test) frames are appended, separated by a blank line, and
//! a frame equal to the previous one is not repeated, so a log of a long run
//! stays readable. With `--json` every changed document is printed as one JSON line.
//! Piped, it waits between frames watching stdout, so it ends quietly (SIGPIPE)
//! once its reader goes away even when the run is idle and nothing is written.
//!
//! A run with a remote gets one remote line (`remote` in JSON), as `status`
//! shows it: read in the background every few seconds
//! (`WATCH_REMOTE_EVERY`, each read bounded by `STATUS_DEADLINE`, both in
//! `super::remote`), so a redraw never waits for the remote; only the first
//! frame waits for the first read.

use super::EXIT_DONE;
use super::remote::RemoteWatch;
use super::render::{WatchContext, render_watch, status_json};
use runlog::run::RunView;
use runlog::run::{RunError, Runs};
use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::time::Duration;
use std::time::Instant;

/// The shortest `--interval`, in seconds: a reader replays the log each time.
pub const MIN_INTERVAL_SECS: f64 = 0.05;
/// The longest `--interval`, in seconds.
pub const MAX_INTERVAL_SECS: f64 = 3600.0;

/// ANSI: cursor home, then clear the screen.
const CLEAR: &str = "\x1b[H\x1b[2J";

/// Checks `--interval SECS`.
pub fn check_interval(secs: f64) -> Result<Duration, RunError> {
    super::args::seconds("--interval", secs, MIN_INTERVAL_SECS..=MAX_INTERVAL_SECS)
}

/// Where frames go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    /// A terminal: clear and redraw.
    Terminal,
    /// Anything else: append changed frames, separated by a blank line.
    Stream,
    /// `--json`: append changed documents, one JSON line each.
    JsonLines,
}

/// What to write for `frame`, given the previous frame (`None` for the first).
/// `None` when nothing is to be written. Pure, so the display rules are tested
/// without a terminal.
pub fn frame_output(
    screen: Screen,
    header: &str,
    frame: &str,
    prev: Option<&str>,
) -> Option<String> {
    match screen {
        Screen::Terminal => Some(format!(
            "{CLEAR}{header}\n\n{}",
            frame.trim_end_matches('\n')
        )),
        Screen::Stream | Screen::JsonLines if prev == Some(frame) => None,
        Screen::Stream if prev.is_some() => Some(format!("\n{frame}")),
        Screen::Stream | Screen::JsonLines => Some(frame.to_string()),
    }
}

/// The terminal size assumed when stdout is a terminal that reports none.
const FALLBACK_SIZE: (usize, usize) = (24, 80);
/// Lines a terminal frame leaves for the header, the blank line under it and
/// the cursor's line (so the screen never scrolls).
const HEADER_ROWS: usize = 3;
/// How far back the rate looks.
const RATE_WINDOW: Duration = Duration::from_secs(10);
/// Recent changes kept.
const RECENT_KEPT: usize = 5;

/// What the watcher remembers between frames: done counts over time for the
/// rate, and the changes it has seen. Constant size.
#[derive(Default)]
struct Memory {
    samples: VecDeque<(Instant, u64)>,
    last: Option<(runlog::run::UnitCounts, runlog::run::RunStatus, usize)>,
    recent: VecDeque<String>,
}

impl Memory {
    /// Records the run as seen now; returns the rate in units done per second.
    fn observe(&mut self, view: &RunView<'_>, now: Instant) -> Option<f64> {
        let doc = view.header();
        let c = view.counts();
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > RATE_WINDOW)
        {
            self.samples.pop_front();
        }
        self.samples.push_back((now, c.done));
        let now_state = (c, doc.status, doc.open_items.len());
        if let Some(prev) = self.last.replace(now_state)
            && prev != now_state
        {
            let at = doc.updated_at.get(11..19).unwrap_or(&doc.updated_at);
            let mut what = vec![];
            let d = |a: u64, b: u64| b as i64 - a as i64;
            for (name, delta) in [
                ("done", d(prev.0.done, c.done)),
                ("in_progress", d(prev.0.in_progress, c.in_progress)),
                ("pending", d(prev.0.pending, c.pending)),
                ("blocked", d(prev.0.blocked, c.blocked)),
                ("dep_blocked", d(prev.0.dep_blocked, c.dep_blocked)),
            ] {
                if delta != 0 {
                    what.push(format!("{name} {delta:+}"));
                }
            }
            if prev.1 != doc.status {
                what.push(format!("run {}", doc.status));
            }
            if prev.2 != now_state.2 {
                what.push(format!("open items {}", now_state.2));
            }
            self.recent.push_back(format!("{at}  {}", what.join(", ")));
            if self.recent.len() > RECENT_KEPT {
                self.recent.pop_front();
            }
        }
        let (t0, d0) = *self.samples.front()?;
        let dt = now.duration_since(t0).as_secs_f64();
        (dt > 0.0).then(|| c.done.saturating_sub(d0) as f64 / dt)
    }
}

fn render(
    screen: Screen,
    view: &RunView<'_>,
    memory: &mut Memory,
    remote: Option<(serde_json::Value, String)>,
) -> Result<String, RunError> {
    let (remote_json, remote) = remote.unzip();
    match screen {
        Screen::JsonLines => {
            let mut v = status_json(view);
            if let Some(r) = remote_json {
                v["remote"] = r;
            }
            serde_json::to_string(&v)
                .map(|s| s + "\n")
                .map_err(|e| RunError::Invalid(format!("cannot print JSON: {e}")))
        }
        // A stream keeps every frame: no rate or recent lines, which would
        // make frames differ when the run does not.
        Screen::Stream => render_watch(
            view,
            &WatchContext {
                rows: usize::MAX,
                cols: usize::MAX,
                remote,
                ..WatchContext::default()
            },
        ),
        Screen::Terminal => {
            let rate = memory.observe(view, Instant::now());
            let (rows, cols) = crate::sys::terminal_size().unwrap_or(FALLBACK_SIZE);
            let ctx = WatchContext {
                rows: rows.saturating_sub(HEADER_ROWS).max(1),
                cols,
                rate,
                recent: memory.recent.iter().cloned().collect(),
                remote,
            };
            render_watch(view, &ctx)
        }
    }
}

/// Watches run `id` (already resolved) until it is finalized.
pub fn watch(runs: &Runs, id: &str, json: bool, interval_secs: f64) -> Result<u8, RunError> {
    let interval = check_interval(interval_secs)?;
    let screen = if json {
        Screen::JsonLines
    } else if std::io::stdout().is_terminal() {
        Screen::Terminal
    } else {
        Screen::Stream
    };
    let header = format!("runlog status {id} --watch (every {interval_secs}s; Ctrl-C to stop)");
    let mut prev: Option<String> = None;
    let mut memory = Memory::default();
    // The run's remote, read in the background (started at the first frame).
    let mut remote: Option<Option<RemoteWatch>> = None;
    loop {
        // `read` takes no lock and writes nothing: a watcher never slows or
        // blocks the writer, and leaves every byte of the run as it was.
        let read = runs.read_run(id)?;
        let durable = read.recovery().last_seq;
        let rw = match &remote {
            Some(rw) => rw.as_ref(),
            None => {
                // The first frame waits for the first read (bounded by
                // STATUS_DEADLINE); later redraws take the latest one.
                let rw = RemoteWatch::start(&runs.run_dir(id)?, durable);
                if let Some(w) = &rw {
                    w.wait_first();
                }
                remote.insert(rw).as_ref()
            }
        };
        if let Some(w) = rw {
            w.set_durable(durable);
        }
        let view = read.view();
        let doc = view.header();
        let frame = render(screen, &view, &mut memory, rw.map(RemoteWatch::latest))?;
        let cols = crate::sys::terminal_size().map_or(usize::MAX, |(_, c)| c);
        let header = super::render::cut(&header, cols);
        if let Some(text) = frame_output(screen, &header, &frame, prev.as_deref()) {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|_| out.flush())
                .map_err(|e| RunError::Io {
                    op: "write stdout",
                    path: "-".into(),
                    source: e,
                })?;
        }
        if doc.is_initialized() && doc.is_closed() {
            if screen == Screen::Terminal {
                // A terminal frame ends on its last line: end it, so the prompt
                // starts on a line of its own.
                super::write_out("\n")?;
            }
            return Ok(EXIT_DONE);
        }
        prev = Some(frame);
        // Piped, frames are written only on a change: wait watching the pipe,
        // so an idle run's watcher still ends when its reader goes away
        // (`--watch | head -3`), as a write would have found.
        if screen == Screen::Terminal {
            std::thread::sleep(interval);
        } else if crate::sys::stdout_reader_gone(interval) {
            return Err(RunError::Io {
                op: "write stdout",
                path: "-".into(),
                source: std::io::ErrorKind::BrokenPipe.into(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_skip_repeats_and_separate_frames_terminals_redraw() {
        let s = Screen::Stream;
        assert_eq!(frame_output(s, "h", "a\n", None).as_deref(), Some("a\n"));
        assert_eq!(frame_output(s, "h", "a\n", Some("a\n")), None);
        assert_eq!(
            frame_output(s, "h", "b\n", Some("a\n")).as_deref(),
            Some("\nb\n")
        );
        let j = Screen::JsonLines;
        assert_eq!(
            frame_output(j, "h", "{}\n", Some("[]\n")).as_deref(),
            Some("{}\n")
        );
        assert_eq!(frame_output(j, "h", "{}\n", Some("{}\n")), None);
        let t = frame_output(Screen::Terminal, "h", "a\n", Some("a\n")).unwrap();
        assert!(t.starts_with(CLEAR) && t.ends_with("h\n\na"));
    }

    #[test]
    fn intervals_outside_the_range_are_refused() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 0.01, 4000.0] {
            assert!(check_interval(bad).is_err(), "{bad} accepted");
        }
        assert_eq!(check_interval(0.2).unwrap(), Duration::from_millis(200));
    }
}
