//! Helpers for tests that run the real `runlog` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_runlog");

/// A command for the binary with its runs root at `root` (and no $RUNLOG_DIR leaking in).
pub fn cmd(root: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.arg("--dir").arg(root).env_remove("RUNLOG_DIR");
    c.stdin(Stdio::null());
    c
}

/// Runs the binary with `args`; returns the output.
pub fn runlog(root: &Path, args: &[&str]) -> Output {
    cmd(root).args(args).output().expect("spawn runlog")
}

/// Runs and asserts exit 0; returns stdout.
pub fn ok(root: &Path, args: &[&str]) -> String {
    let o = runlog(root, args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "runlog {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Runs with `--json` and parses stdout.
pub fn ok_json(root: &Path, args: &[&str]) -> serde_json::Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    serde_json::from_str(&ok(root, &a)).unwrap()
}

/// Every file under `dir` (recursively) with its bytes, for "nothing changed" checks.
pub fn tree_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd {
            let e = e.unwrap();
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                out.push((p.clone(), b"<dir>".to_vec()));
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}
