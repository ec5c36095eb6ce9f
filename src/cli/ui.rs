//! `runlog ui [--listen ADDR] [--token T | --token-file F] [--open] [RUN]`:
//! checks the arguments, binds, prints the URL (one line on stdout; with
//! `--json`, `{"url": …}`), then serves the read-only view (src/ui) until the
//! process is stopped. A non-loopback address without a token is refused
//! (exit 2) before anything is bound.

use super::{EXIT_DONE, write_out};
use runlog::run::{RunError, Runs};
use std::net::SocketAddr;
use std::path::PathBuf;

/// Serves the view of `runs`.
pub fn serve(
    runs: &Runs,
    json: bool,
    run: Option<String>,
    listen: SocketAddr,
    token: Option<String>,
    token_file: Option<PathBuf>,
    open: bool,
) -> Result<u8, RunError> {
    let token = match (token, token_file) {
        (Some(t), _) => Some(t),
        (None, Some(f)) => Some(crate::ui::auth::read_token_file(&f)?),
        (None, None) => None,
    };
    // A prefix resolves to its run now, so the printed URL names it exactly.
    let run = run.map(|r| runs.resolve(&r)).transpose()?;
    let bound = crate::ui::bind(runs, &crate::ui::UiOptions { listen, token, run })?;
    let url = bound.url().to_string();
    if json {
        write_out(&format!("{}\n", serde_json::json!({ "url": url })))?;
    } else {
        write_out(&format!("{url}\n"))?;
    }
    eprintln!(
        "runlog ui: serving {} read-only at the URL above (Ctrl-C to stop)",
        runs.root().display()
    );
    if open {
        match std::process::Command::new("xdg-open")
            .arg(&url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
        {
            Ok(s) if s.success() => {}
            Ok(s) => {
                eprintln!("runlog ui: --open: xdg-open exited with {s}; open the URL yourself")
            }
            Err(e) => {
                eprintln!("runlog ui: --open: cannot run xdg-open ({e}); open the URL yourself")
            }
        }
    }
    bound.serve()?;
    Ok(EXIT_DONE)
}
