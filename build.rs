//! Links the `runlog` binary with its functions in the order a one-shot call
//! runs them (`link/symbol-order.txt`, written by `scripts/symbol-order.sh`),
//! so that call faults in fewer pages of code: a process that runs for a
//! millisecond spends a good part of it faulting its code in
//! (docs/PERFORMANCE.md, "Code layout"). The library is untouched: only the
//! binary's link arguments change, and only where the link is known to be
//! rustc's own LLD, which reads an ordering file: x86_64 Linux from Rust 1.90
//! on, with no linker of the user's own. Anywhere else the binary links as it
//! always did. Names the file lists that a build does not have (another
//! toolchain's, whose symbol hashes differ) are skipped by the linker.

use std::env;
use std::path::Path;
use std::process::Command;

const ORDER: &str = "link/symbol-order.txt";

fn main() {
    println!("cargo:rerun-if-changed={ORDER}");
    println!("cargo:rerun-if-env-changed=RUNLOG_SYMBOL_ORDER");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    if env::var("RUNLOG_SYMBOL_ORDER").is_ok_and(|v| v == "0") {
        return;
    }
    if env::var("TARGET").as_deref() != Ok("x86_64-unknown-linux-gnu") {
        return;
    }
    // A linker of the user's own (`target.<triple>.linker`, `-C linker=`,
    // `-C linker-features`, `-fuse-ld=`): not known to read the file.
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if env::var_os("RUSTC_LINKER").is_some()
        || flags.contains("linker")
        || flags.contains("fuse-ld")
    {
        return;
    }
    if !rustc_links_with_lld() {
        return;
    }
    let order = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join(ORDER);
    if !order.is_file() {
        return;
    }
    println!(
        "cargo:rustc-link-arg-bin=runlog=-Wl,--symbol-ordering-file={}",
        order.display()
    );
    // The file names functions of the toolchain it was made with; another
    // one's names are skipped, not an error.
    println!("cargo:rustc-link-arg-bin=runlog=-Wl,--no-warn-symbol-ordering");
}

/// Whether this rustc links x86_64 Linux binaries with its own LLD by
/// default: from 1.90 on (the version `rustc -V` prints).
fn rustc_links_with_lld() -> bool {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = Command::new(rustc).arg("-V").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let mut parts = text
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .split('.')
        .map(|p| p.parse::<u32>().ok());
    matches!((parts.next(), parts.next()), (Some(Some(1)), Some(Some(minor))) if minor >= 90)
}
