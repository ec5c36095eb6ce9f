//! Whether `build.rs` hands `link/symbol-order.txt` to the linker: a pure
//! decision over what Cargo tells a build script, so that a unit test
//! (`src/lib.rs`, `link_decide`) can hold it to README's words.

/// What the build script reads from its environment.
pub struct LinkEnv<'a> {
    /// `TARGET`.
    pub target: &'a str,
    /// `rustc -V`'s output ("rustc 1.95.0 (59807616e 2026-04-14)").
    pub rustc_version: &'a str,
    /// `RUSTC_LINKER` is set: a linker configured for the target.
    pub linker_configured: bool,
    /// `CARGO_ENCODED_RUSTFLAGS`.
    pub rustflags: &'a str,
    /// `RUNLOG_SYMBOL_ORDER`.
    pub opt: Option<&'a str>,
}

/// True where the link is rustc's own LLD, which reads an ordering file:
/// x86_64 Linux from Rust 1.90 on, with no linker of the user's own (a
/// configured one, `-C linker=`, `-C linker-features`, `-C
/// link-self-contained`, `-fuse-ld=`), unless `RUNLOG_SYMBOL_ORDER=0`.
pub fn orders_symbols(e: &LinkEnv) -> bool {
    if e.opt == Some("0") || e.target != "x86_64-unknown-linux-gnu" || e.linker_configured {
        return false;
    }
    if e.rustflags.contains("linker") || e.rustflags.contains("fuse-ld") {
        return false;
    }
    let mut parts = e
        .rustc_version
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .split('.')
        .map(|p| p.parse::<u32>().ok());
    matches!((parts.next(), parts.next()), (Some(Some(1)), Some(Some(minor))) if minor >= 90)
}
