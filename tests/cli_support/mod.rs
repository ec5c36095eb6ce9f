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

/// `runlog init --id ID --task t --units NAMES`: a run of `names`, none started.
pub fn init_run(root: &Path, id: &str, names: &[String]) {
    ok(
        root,
        &[
            "init",
            "--id",
            id,
            "--task",
            "t",
            "--units",
            &names.join(","),
        ],
    );
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

/// A command's stdout parsed as JSON (whatever its exit code), failing with
/// what it printed instead.
pub fn stdout_json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&o.stdout)
        )
    })
}

/// What a command printed, stdout then stderr, for assertions and their messages.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// [`tree_bytes`] without the `LOCK` files: a reader or a refused change may
/// take the writer lock, which records its holder there (FORMAT.md §2), and
/// must change no other byte (docs/CLI.md). What it may write there is only
/// that: each `LOCK` is checked to hold a holder text (`pid N`) or nothing.
pub fn tree_bytes_but_locks(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    tree_bytes(dir)
        .into_iter()
        .filter(|(p, bytes)| {
            if !p.ends_with("LOCK") {
                return true;
            }
            let text = String::from_utf8_lossy(bytes);
            let holder = text.trim_end();
            assert!(
                holder.is_empty()
                    || holder
                        .strip_prefix("pid ")
                        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
                "{} holds {text:?}, not a holder text",
                p.display()
            );
            false
        })
        .collect()
}

/// Writes a key file at `path`: the byte `hex_byte` (two hex digits) 32 times
/// in hex and a newline, with permission bits `mode`.
pub fn key_file(path: &Path, hex_byte: &str, mode: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("{}\n", hex_byte.repeat(32))).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    path.to_path_buf()
}

/// `args` after `--key-file KEY`.
pub fn with_key<'a>(key: &'a Path, args: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--key-file", key.to_str().unwrap()];
    v.extend_from_slice(args);
    v
}

/// Builds example `name` (with the `test` profile, so under `cargo test` it is
/// already built and this returns at once) and returns its executable. Asking
/// cargo for the artifact's path, rather than guessing `target/…/examples/`,
/// keeps this right under `--target-dir`, `CARGO_TARGET_DIR` and a stale build.
pub fn example_binary(name: &str) -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let out = Command::new(cargo)
        .args(["build", "--quiet", "--profile", "test", "--example", name])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--message-format=json")
        .stderr(Stdio::inherit())
        .output()
        .expect("spawn cargo");
    assert!(out.status.success(), "cargo build --example {name} failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == name)
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo reported no executable for example {name}"))
}

/// How many times each unit of `run` went to `done`, from `runlog dump`
/// (every record is still in a segment: these tests never compact).
pub fn done_counts(root: &Path, run: &str) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for line in ok(root, &["dump", run]).lines() {
        let rec: serde_json::Value = serde_json::from_str(line).unwrap();
        let u = &rec["t"]["change"]["unit"];
        if u["status"] == "done" {
            *counts
                .entry(u["unit"].as_str().unwrap().to_string())
                .or_insert(0) += 1;
        }
    }
    counts
}
