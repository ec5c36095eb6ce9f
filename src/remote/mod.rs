//! Beyond one machine (issue 15): a run's log and snapshots shipped to object
//! storage (`object_store`: S3-compatible servers, and local files), writers
//! fenced across hosts by a manifest chain written create-only, and a run
//! restored on a fresh host. FORMAT.md, "Remote layout", is the specification.
//!
//! The engine knows nothing of remotes: the shipper reads the store's files
//! (segments and snapshots, whose frames travel unchanged) and the restore
//! writes a store directory the engine opens as usual.
//!
//! ```no_run
//! use runlog::remote::{Policy, Remote, RemoteConfig, Replication};
//! use runlog::engine::{Options, Store};
//! # struct Sum;
//! # #[derive(Debug)] struct Zero;
//! # impl std::fmt::Display for Zero { fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result { f.write_str("zero") } }
//! # impl std::error::Error for Zero {}
//! # impl runlog::engine::Machine for Sum {
//! #     type State = u64; type Transition = u64; type Error = Zero;
//! #     fn apply(s: &mut u64, t: &u64) -> Result<(), Zero> { *s += t; Ok(()) }
//! # }
//! let store = Store::<Sum>::open("/tmp/sum", Options { create: true, ..Options::default() })?;
//! let config = RemoteConfig::new("s3://bucket/sum", Policy::Sync);
//! let r = Replication::start(&store, Remote::open(&config.url)?, &config)?; // claims an epoch
//! r.append(&store, &5)?; // returns once the remote holds it
//! println!("{:?}", r.status()); // epoch, shipped, lag, rounds, bytes
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod chain;
mod chunk;
mod client;
mod config;
mod error;
mod flight;
mod gc;
// The object layout (FORMAT.md §13): names, manifests, limits. The wire
// format, not the API: the tests and fuzz targets reach it under `sim`.
#[cfg(feature = "sim")]
#[doc(hidden)]
pub mod layout;
#[cfg(not(feature = "sim"))]
pub(crate) mod layout;
mod read_ahead;
mod replica;
mod restore;
mod rootenv;
mod shipper;
mod status;

sim_pub_use!(chunk::{check_frames, frame_digest});
pub use client::{Put, READ_AHEAD_BYTES, READ_AHEAD_REQUESTS, Remote, is_deadline};
pub use config::{Policy, RemoteConfig};
pub use error::{RemoteError, Result};
pub use gc::{RemoteGcReport, gc};
pub use replica::Replication;
pub use restore::{RestoreReport, restore, verify_remote};
pub use rootenv::{ENV_REMOTE_ROOT, RemoteRoot};
pub(crate) use rootenv::{attach_root, configured, restore_if_missing};
sim_pub_use!(chain::latest_manifest);
pub use status::RemoteStatus;
