//! Which `runlog` binary a measurement ran. A binary that a test build wrote
//! into `target/` (`cargo test`, at the test profile's `opt-level = 1`)
//! measures slower than what `cargo build --release --features cli` or
//! `cargo install` makes: the report names the binary, and says when its path
//! is a test build's, so that such a figure is not taken for the crate's.

use serde_json::{Value, json};
use std::path::Path;

/// `{"path", "release"}`: the binary, and whether it is a release build's
/// (its path has a `release` directory).
pub fn describe(bin: &Path) -> Value {
    let release = bin.components().any(|c| c.as_os_str() == "release");
    json!({ "path": bin.display().to_string(), "release": release })
}

/// The report's line about the binary, with a warning when it is not a
/// release build's.
pub fn line(b: &Value) -> String {
    let path = b["path"].as_str().unwrap_or("?");
    if b["release"].as_bool() == Some(true) {
        format!("binary: {path}")
    } else {
        format!(
            "binary: {path}\n\
             WARNING: not a release build's binary (its figures are not the crate's; build it with \
             `cargo build --release --features cli --bin runlog`)"
        )
    }
}
