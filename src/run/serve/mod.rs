//! A run's server and its protocol, whole (FORMAT.md §5.9; docs/CLI.md,
//! "serve" and "apply"): the socket, the greeting, the operation line and
//! the ack with its typed error, the client's change loop, the committer
//! and its batching rule, and `apply`'s line protocol. `runlog serve`,
//! `runlog apply` and Python's `Runs.serve` are thin front ends over it.
//!
//! - `protocol.rs`: the socket's place, the greeting, the op line, the ack;
//! - `wire.rs`: a refused or failed change's error on the socket, typed;
//! - `ops.rs`: an operation line parsed into a change;
//! - `client.rs`: [`Runs::change_waiting`] and the lock-retry loop;
//! - `batch.rs`: what an accepted change came to ([`Acked`]);
//! - `stream.rs`: `apply`'s protocol over a reader and a writer;
//! - `committer.rs`: one thread's batches, and when each starts;
//! - `server.rs`: [`Runs::serve`] and [`Server::run`].
//!
//! [`Runs::change_waiting`]: crate::run::Runs::change_waiting
//! [`Runs::serve`]: crate::run::Runs::serve

mod batch;
mod client;
mod committer;
#[cfg(feature = "sim")]
#[doc(hidden)]
pub mod ops;
#[cfg(not(feature = "sim"))]
pub(crate) mod ops;
mod protocol;
mod server;
mod stream;
mod wire;

pub use client::Waiting;
pub use protocol::Acked;
pub(crate) use protocol::HANDED_OVER;
pub use server::{ServeReport, Server};
pub use stream::Notice;
