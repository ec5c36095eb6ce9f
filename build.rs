//! Links the `runlog` binary with its functions in the order its common calls
//! run them (`link/symbol-order.txt`, written by `scripts/symbol-order.sh`),
//! so that a short-lived call faults in fewer pages of code
//! (docs/PERFORMANCE.md, "What a one-shot call costs beyond the floor"). Only
//! the binary's link arguments change, and only where the link is rustc's own
//! LLD (`link/decide.rs`); anywhere else the binary links as it always did.
//! Names the file lists that a build does not have (another toolchain's,
//! whose symbol hashes differ) are skipped by the linker.

#[path = "link/decide.rs"]
mod decide;

use std::env;
use std::path::Path;
use std::process::Command;

const ORDER: &str = "link/symbol-order.txt";

fn main() {
    println!("cargo:rerun-if-changed={ORDER}");
    println!("cargo:rerun-if-changed=link/decide.rs");
    println!("cargo:rerun-if-env-changed=RUNLOG_SYMBOL_ORDER");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("-V")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let (target, flags, opt) = (
        env::var("TARGET").unwrap_or_default(),
        env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default(),
        env::var("RUNLOG_SYMBOL_ORDER").ok(),
    );
    let here = decide::LinkEnv {
        target: &target,
        rustc_version: &version,
        linker_configured: env::var_os("RUSTC_LINKER").is_some(),
        rustflags: &flags,
        opt: opt.as_deref(),
    };
    let order = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join(ORDER);
    if !decide::orders_symbols(&here) || !order.is_file() {
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
