//! Proves `runlog ui` works in a real browser: headless Chromium (Debian's
//! `chromium`, or $RUNLOG_CHROMIUM) driven by Playwright for Python from the
//! venv at $RUNLOG_PYTHON_VENV (tests/cli/ui_browser.py): the token refused
//! then accepted, the runs page, the counts moving without a reload while
//! the run advances, a failure and a retry appearing in the failures lists,
//! the unit search (with a driven unit's output reference, its digest shown
//! once, and a long note shown whole), each list's values under their own
//! headers, a stalled run listed first and flagged with no ETA, and a crafted
//! name and note shown as text with no script run. Skipped, saying so, without a browser or the venv, unless
//! `RUNLOG_REQUIRE_BROWSER=1` (scripts/test sets it) makes that a failure.
//! With `RUNLOG_UI_SCREENSHOTS=DIR` it saves DIR/ui-runs.png and DIR/ui-run.png.
use crate::cli_support::*;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const TEST: &str = "ui_in_a_real_browser";
const REQUIRE: &str = "RUNLOG_REQUIRE_BROWSER";
const TOKEN: &str = "browser-test-token-0123456789";
const CRAFTED: &str = "<script>alert(1)</script>";
const STALLED: &str = "stalled-export";

/// The browser and the Python with Playwright, or why not.
fn tools() -> Result<(PathBuf, PathBuf), String> {
    let chromium = std::env::var_os("RUNLOG_CHROMIUM")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    if !chromium.is_file() {
        return Err(format!(
            "no browser at {} (apt-get install chromium, or set RUNLOG_CHROMIUM)",
            chromium.display()
        ));
    }
    let venv = std::env::var_os("RUNLOG_PYTHON_VENV")
        .filter(|v| !v.is_empty())
        .ok_or("RUNLOG_PYTHON_VENV is not set (scripts/test makes the venv)")?;
    let python = Path::new(&venv).join("bin/python");
    let has = Command::new(&python)
        .args(["-c", "import playwright.sync_api"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has {
        return Err(format!(
            "{} cannot import playwright (pip install -r python/requirements-test.txt)",
            python.display()
        ));
    }
    Ok((chromium, python))
}

struct Server(Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn apply(root: &Path, run: &str, lines: &[serde_json::Value]) {
    let mut c = cmd(root)
        .args(["apply", run])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut w = c.stdin.take().unwrap();
        for l in lines {
            writeln!(w, "{l}").unwrap();
        }
    }
    assert!(c.wait().unwrap().success(), "apply failed");
}

#[test]
fn ui_in_a_real_browser() {
    let (chromium, python) = match tools() {
        Ok(t) => t,
        Err(why) => return crate::skip_support::skip(TEST, REQUIRE, &why),
    };
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let run = "nightly-migrate";
    // A run worth a screenshot: units on a small graph, a phase, a budget.
    let units: Vec<String> = (1..=40).map(|i| format!("w{i:03}")).collect();
    let mut all = units.clone();
    all.push(CRAFTED.to_string());
    let _ = ok(
        root,
        &[
            "init",
            "--id",
            run,
            "--task",
            "migrate 40 tables to the new cluster",
            "--units",
            &all.join(","),
            "--deps",
            "w040=w039",
            "--budget",
            "gpu-hours=50@ops",
        ],
    );
    ok(
        root,
        &[
            "init",
            "--id",
            "reindex-eu",
            "--task",
            "rebuild the search index",
            "--units",
            "a,b,c",
        ],
    );
    ok(root, &["unit", "reindex-eu", "a", "done"]);
    // A run stalled an hour ago with a unit blocked and no writer: the runs
    // page lists it first, flagged, with no ETA.
    let an_hour_ago = {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        runlog::run::clock::format_rfc3339(now - 3_600_000)
    };
    for args in [
        &[
            "init",
            "--id",
            STALLED,
            "--task",
            "export the archive",
            "--units",
            "x1,x2,x3",
        ][..],
        &["unit", STALLED, "x1", "done"],
        &["unit", STALLED, "x2", "blocked", "--note", "quota exceeded"],
    ] {
        let o = cmd(root)
            .env("RUNLOG_NOW", &an_hour_ago)
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}");
    }
    ok(
        root,
        &[
            "finalize",
            "reindex-eu",
            "aborted",
            "--result",
            "superseded",
        ],
    );
    let mut ops = vec![serde_json::json!({"op": "phase", "phase": "copy", "status": "running"})];
    for u in &units[10..20] {
        ops.push(serde_json::json!({"op": "unit", "unit": u, "status": "done"}));
    }
    ops.push(serde_json::json!({"op": "unit", "unit": "w021", "status": "in_progress"}));
    ops.push(
        serde_json::json!({"op": "unit", "unit": CRAFTED, "status": "pending",
        "note": "<img src=x onerror=\"window.__pwned=1\">"}),
    );
    ops.push(serde_json::json!({"op": "spend", "budget": "gpu-hours", "amount": 12.5}));
    apply(root, run, &ops);

    let mut child = cmd(root)
        .args(["ui", "--token", TOKEN])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _server = Server(child);
    let url = line.trim();
    let base = url.split("/?").next().unwrap().to_string();

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/ui_browser.py");
    let mut py = Command::new(python);
    py.arg(script)
        .args(["--runlog", BIN, "--dir"])
        .arg(root)
        .args([
            "--base",
            &base,
            "--token",
            TOKEN,
            "--run",
            run,
            "--crafted",
            CRAFTED,
            "--stalled",
            STALLED,
        ])
        .arg("--chromium")
        .arg(&chromium)
        .env_remove("RUNLOG_DIR")
        .stdin(Stdio::null());
    if let Some(shots) = std::env::var_os("RUNLOG_UI_SCREENSHOTS").filter(|v| !v.is_empty()) {
        std::fs::create_dir_all(&shots).unwrap();
        py.arg("--shots").arg(shots);
    }
    let out = py.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the browser script failed:\n{text}");
    assert!(text.contains("ui_browser: OK"), "{text}");
}
