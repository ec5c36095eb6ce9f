//! Which `runlog` binary a measurement ran, and whether its link laid out the
//! functions `link/symbol-order.txt` lists (build.rs). The names carry hashes
//! of the crate's features: a binary that a test build wrote into `target/`
//! (`cargo test` or `cargo nextest`, with the test features) lacks most of
//! them, faults in more code pages a call, and measures slower than what
//! `cargo build --release --features cli` or `cargo install` makes. The
//! report says so, so that such a figure is not taken for the crate's.

use serde_json::{Value, json};
use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

/// The order file, as this example's crate has it.
const ORDER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/link/symbol-order.txt");

/// Below this share of the listed names, the report warns.
pub const STALE_BELOW_PERCENT: u64 = 95;

/// `{"path", "order_names_found", "order_names_listed", "why_unknown"}`: how
/// many of the order file's names `bin` defines, counted with `nm`.
pub fn describe(bin: &Path) -> Value {
    let path = bin.display().to_string();
    match count(bin) {
        Ok((found, listed)) => json!({
            "path": path,
            "order_names_found": found,
            "order_names_listed": listed,
        }),
        Err(why) => json!({ "path": path, "why_unknown": why }),
    }
}

fn count(bin: &Path) -> Result<(u64, u64), String> {
    let listed: HashSet<String> = std::fs::read_to_string(ORDER)
        .map_err(|e| format!("read {ORDER}: {e}"))?
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(str::to_string)
        .collect();
    let out = Command::new("nm")
        .arg(bin)
        .output()
        .map_err(|e| format!("run nm: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "nm {}: {}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let have: HashSet<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    let found = listed.iter().filter(|n| have.contains(n.as_str())).count();
    Ok((found as u64, listed.len() as u64))
}

/// The report's line about the binary, with a warning when its link did not
/// lay out most of the listed functions.
pub fn line(b: &Value) -> String {
    let path = b["path"].as_str().unwrap_or("?");
    match (
        b["order_names_found"].as_u64(),
        b["order_names_listed"].as_u64(),
    ) {
        (Some(found), Some(listed)) if found * 100 < listed * STALE_BELOW_PERCENT => format!(
            "binary: {path}, {found} of {listed} symbol-order names\n\
             WARNING: this binary lacks most of the functions this checkout's link/symbol-order.txt \
             lays out: a test build's (its figures are not the crate's; build it with \
             `cargo build --release --features cli --bin runlog`), a build of other code, or a \
             stale file (`bash scripts/symbol-order.sh`)"
        ),
        (Some(found), Some(listed)) => {
            format!("binary: {path}, {found} of {listed} symbol-order names")
        }
        _ => format!(
            "binary: {path}, symbol order not checked ({})",
            b["why_unknown"].as_str().unwrap_or("?")
        ),
    }
}
