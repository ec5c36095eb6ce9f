//! runlog: an embedded checkpoint store.
//!
//! Two layers, each usable on its own (and beside them, with feature `remote`,
//! `remote`: a run shipped to object storage):
//!
//! * [`engine`]: a generic state machine ([`engine::Machine`]) whose transitions
//!   are appended to an fsync'd log and whose state is periodically snapshotted.
//!   An append returns once durable; a crash loses nothing acknowledged; readers
//!   ([`engine::Reader`]) take no lock and change no byte.
//! * [`run`]: the run model on top of it: units with statuses and dependencies,
//!   phases, open items, budgets, fingerprints, a fail-closed finalize and the
//!   resume set ([`run::Runs`], [`run::Run`]).
//!
//! The `runlog` command line (`docs/CLI.md`) is this package's binary, built
//! with feature `cli` (`cargo install --locked --path . --features cli`); it uses only
//! this library's public API, and none of it is part of the library.
//!
//! Features, all off by default, so `cargo add runlog` is the engine and the
//! run model alone: `remote` ships a run to object storage ([`run::Runs`]'s
//! remote root; `object_store` on tokio); `cli` builds the binary (clap,
//! indicatif, axum for `runlog ui`) and turns on `remote`. `sim` is test
//! support for this crate's own tests, fuzz targets and benches: the
//! simulated filesystem and the engine's internals, hidden from these docs and
//! not part of the API.
//!
//! Errors chain: each `Display` is one layer's message and `source()` is the
//! cause, so a reporter ([`engine::ErrorChain`], anyhow) prints every cause once.
//!
//! [The tour](crate::tour) (`docs/TOUR.md`) walks through the three ways to
//! drive runs: embedded in Rust (`examples/orchestrator.rs`), from a shell
//! (`examples/pipeline.sh`) and from another language through `runlog apply`
//! (`examples/driver.py`).
//!
//! Embedding the engine: a machine, a store, durable appends, replay on reopen.
//!
//! ```
//! use runlog::engine::{self, Machine, Options, RealFs, Store};
//! use serde::{Deserialize, Serialize};
//!
//! /// A counter: the state is a number; a transition adds to it.
//! struct Counter;
//! #[derive(Serialize, Deserialize)]
//! struct Add(u64);
//!
//! impl Machine for Counter {
//!     type State = u64;
//!     type Transition = Add;
//!     type Error = std::io::Error;
//!     // Deterministic, and leaves the state alone when it refuses.
//!     fn apply(n: &mut u64, t: &Add) -> Result<(), std::io::Error> {
//!         *n = n.checked_add(t.0).ok_or(std::io::Error::other("overflow"))?;
//!         Ok(())
//!     }
//! }
//!
//! let dir = std::env::temp_dir().join(format!("runlog-counter-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! let opts = || Options { create: true, ..Options::default() };
//! let store = Store::<Counter>::open(&dir, opts())?; // takes the writer lock
//! store.append(&Add(2))?; // returns once fsync'd: seq 1
//! assert_eq!(store.append(&Add(3))?, 2);
//! assert!(store.append(&Add(u64::MAX)).is_err()); // refused: nothing written
//! // A lock-free reader beside the live writer sees every acknowledged append.
//! assert_eq!(engine::Reader::new(&RealFs, &dir).state::<Counter>()?.0, 5);
//! drop(store); // releases the lock
//! let store = Store::<Counter>::open(&dir, opts())?; // replays the log
//! assert_eq!(store.read(|n| *n), 5);
//! # drop(store);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_code)]
#![deny(missing_docs)]

/// Re-exports the crate's tests, fuzz targets and benches use but that are
/// not the API: public and hidden from the docs under the `sim` test feature
/// (as the engine's internal modules are), crate-private otherwise.
macro_rules! sim_pub_use {
    ($($path:tt)*) => {
        #[cfg(feature = "sim")]
        #[doc(hidden)]
        pub use $($path)*;
        #[cfg(not(feature = "sim"))]
        #[allow(unused_imports)]
        pub(crate) use $($path)*;
    };
}

pub mod engine;
#[cfg(feature = "remote")]
pub mod remote;
pub mod run;
// Signals and the terminal, below every layer (the one place for their `unsafe`).
mod sys;

/// The tour: the three ways to drive runs, step by step (`docs/TOUR.md`).
#[doc = include_str!("../docs/TOUR.md")]
pub mod tour {}

/// README's code blocks, compiled as doctests so the README cannot drift.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The guide's code blocks (`docs/GUIDE.md`), compiled as doctests likewise.
#[cfg(doctest)]
#[doc = include_str!("../docs/GUIDE.md")]
pub struct GuideDoctests;
