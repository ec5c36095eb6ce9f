//! `runlog status RUN --watch`: re-reads the run lock-free every interval and
//! redraws its status view until the run is finalized (then the final view is
//! shown and it exits 0) or the user presses Ctrl-C.
//!
//! On a terminal each frame clears the screen. Anywhere else (a pipe, a file, a
//! test) frames are appended, separated by a blank line, and a frame equal to
//! the previous one is not repeated, so a log of a long run stays readable.
//! With `--json` every changed document is printed as one JSON line.

use super::EXIT_DONE;
use crate::run::RunView;
use crate::run::render::{render_status, status_json};
use crate::run::{RunError, Runs};
use std::io::{IsTerminal, Write};
use std::time::Duration;

/// The shortest `--interval`, in seconds: a reader replays the log each time.
pub const MIN_INTERVAL_SECS: f64 = 0.05;
/// The longest `--interval`, in seconds.
pub const MAX_INTERVAL_SECS: f64 = 3600.0;

/// ANSI: cursor home, then clear the screen.
const CLEAR: &str = "\x1b[H\x1b[2J";

/// Checks `--interval SECS`.
pub fn check_interval(secs: f64) -> Result<Duration, RunError> {
    if secs.is_finite() && (MIN_INTERVAL_SECS..=MAX_INTERVAL_SECS).contains(&secs) {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err(RunError::Invalid(format!(
            "--interval {secs} is not a number of seconds in {MIN_INTERVAL_SECS}..={MAX_INTERVAL_SECS}"
        )))
    }
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
        Screen::Terminal => Some(format!("{CLEAR}{header}\n\n{frame}")),
        Screen::Stream | Screen::JsonLines if prev == Some(frame) => None,
        Screen::Stream if prev.is_some() => Some(format!("\n{frame}")),
        Screen::Stream | Screen::JsonLines => Some(frame.to_string()),
    }
}

fn render(screen: Screen, view: &RunView<'_>) -> Result<String, RunError> {
    match screen {
        Screen::JsonLines => serde_json::to_string(&status_json(view))
            .map(|s| s + "\n")
            .map_err(|e| RunError::Invalid(format!("cannot print JSON: {e}"))),
        Screen::Terminal | Screen::Stream => render_status(view),
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
    loop {
        // `read` takes no lock and writes nothing: a watcher never slows or
        // blocks the writer, and leaves every byte of the run as it was.
        let read = runs.read_run(id)?;
        let view = read.view();
        let doc = view.header();
        let frame = render(screen, &view)?;
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
            return Ok(EXIT_DONE);
        }
        prev = Some(frame);
        std::thread::sleep(interval);
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
        assert!(t.starts_with(CLEAR) && t.ends_with("h\n\na\n"));
    }

    #[test]
    fn intervals_outside_the_range_are_refused() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 0.01, 4000.0] {
            assert!(check_interval(bad).is_err(), "{bad} accepted");
        }
        assert_eq!(check_interval(0.2).unwrap(), Duration::from_millis(200));
    }
}
