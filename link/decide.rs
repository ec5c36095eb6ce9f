//! Whether `build.rs` hands `link/symbol-order.txt` to the linker: a pure
//! decision over what Cargo tells a build script, so that its tests (below,
//! compiled with the library's: `src/lib.rs`, `link_decide`) can hold it to
//! docs/GUIDE.md's words ("Embedding the engine in Rust").

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

#[cfg(test)]
mod tests {
    use super::{LinkEnv, orders_symbols};

    fn env<'a>(target: &'a str, version: &'a str) -> LinkEnv<'a> {
        LinkEnv {
            target,
            rustc_version: version,
            linker_configured: false,
            rustflags: "",
            opt: None,
        }
    }

    const LINUX: &str = "x86_64-unknown-linux-gnu";
    const RUST_1_95: &str = "rustc 1.95.0 (59807616e 2026-04-14)\n";

    #[test]
    fn the_binary_is_ordered_only_where_rustc_links_with_its_own_lld() {
        assert!(orders_symbols(&env(LINUX, RUST_1_95)));
        assert!(orders_symbols(&env(
            LINUX,
            "rustc 1.90.0 (1159e78c4 2025-09-14)"
        )));
        assert!(orders_symbols(&env(
            LINUX,
            "rustc 1.97.0-nightly (0123abcd 2026-06-01)"
        )));
        // Before 1.90 rustc linked with the system's linker.
        assert!(!orders_symbols(&env(
            LINUX,
            "rustc 1.89.0 (29483883e 2025-08-04)"
        )));
        assert!(!orders_symbols(&env(LINUX, "")));
        assert!(!orders_symbols(&env(LINUX, "not a version")));
        for other in [
            "aarch64-unknown-linux-gnu",
            "x86_64-apple-darwin",
            "x86_64-unknown-linux-musl",
        ] {
            assert!(!orders_symbols(&env(other, RUST_1_95)), "{other}");
        }
    }

    #[test]
    fn a_linker_of_the_users_own_or_the_opt_out_turns_the_order_off() {
        let configured = LinkEnv {
            linker_configured: true,
            ..env(LINUX, RUST_1_95)
        };
        assert!(!orders_symbols(&configured));
        for flags in [
            "-Clinker=clang",
            "-Clinker-features=-lld",
            "-Clink-self-contained=-linker",
            "-Clink-arg=-fuse-ld=bfd",
        ] {
            let e = LinkEnv {
                rustflags: flags,
                ..env(LINUX, RUST_1_95)
            };
            assert!(!orders_symbols(&e), "{flags}");
        }
        let off = LinkEnv {
            opt: Some("0"),
            ..env(LINUX, RUST_1_95)
        };
        assert!(!orders_symbols(&off));
        let on = LinkEnv {
            opt: Some("1"),
            ..env(LINUX, RUST_1_95)
        };
        assert!(orders_symbols(&on));
    }
}
