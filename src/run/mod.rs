//! The run model: a run is a state machine (its [`Change`]s applied by the
//! run's rules) stored in one engine store per run directory, under a runs
//! root ([`Runs`]). It uses the engine only through its public API.
//!
//! ```no_run
//! use runlog::run::{Runs, InitSpec, UnitStatus};
//! let runs = Runs::new(".runlog");
//! let run = runs.init(InitSpec { id: "r1".into(), task: "migrate".into(),
//!     units: vec!["a".into(), "b".into()], ..Default::default() })?;
//! run.set_unit("a", UnitStatus::InProgress, None, None)?;
//! run.set_unit("a", UnitStatus::Done, Some("ok"), None)?;
//! println!("{:?}", run.resume_set()?);
//! # Ok::<(), runlog::run::RunError>(())
//! ```

mod checkpoint;
/// The clock, and the RFC 3339 spelling of a run's times; the `sim` feature
/// makes it public, hidden from the docs, for tests and benches (not the API:
/// its types are re-exported below).
#[cfg(feature = "sim")]
#[doc(hidden)]
pub mod clock;
#[cfg(not(feature = "sim"))]
mod clock;
mod doc;
mod error;
mod fingerprint;
mod follow;
mod handle;
mod health;
mod id;
mod json;
mod machine;
mod open;
mod output;
mod record;
mod resume;
mod rule_error;
mod runs;
mod serve;
mod transition;
mod units;
mod view;

pub use checkpoint::{Checkpoints, Restored, StopFlag, StopReason};
#[cfg(feature = "sim")]
#[doc(hidden)]
pub use clock::ManualClock;
pub use clock::{Clock, SystemClock};
pub use doc::{
    Budget, Item, Launch, OpenAtFinish, Phase, PhaseStatus, ResolvedItem, RunDoc, RunStatus,
    SavedCheckpoint, Unit, UnitStatus,
};
sim_pub_use!(doc::SCHEMA_VERSION);
/// The engine's names a caller of the run model meets with it: a run's
/// errors print their whole chain of causes with [`ErrorChain`], and
/// [`Runs::with_vfs`] takes a `Vfs`, [`RealFs`] unless told otherwise.
pub use crate::engine::{ErrorChain, RealFs};
pub use error::RunError;
pub use follow::UnitsChanged;
pub use handle::{Claim, Run};
pub use health::{Assessment, Health};
pub use json::Json;
#[cfg(feature = "sim")]
#[doc(hidden)]
pub use machine::RunMachine;
sim_pub_use!(machine::RunKeyed);
pub use open::{Started, Warning};
pub use output::OutputRef;
sim_pub_use!(record::UnitRecord);
pub use resume::ResumeSet;
sim_pub_use!(resume::resume_set_from_rows);
#[cfg(feature = "sim")]
#[doc(hidden)]
pub use resume::{blocking_roots, resume_set};
pub use rule_error::RuleError;
pub use runs::{ArchivedRun, GcReport, RunSummary, Runs, Unreadable};
#[cfg(feature = "sim")]
#[doc(hidden)]
pub use serve::ops;
pub use serve::{Acked, Notice, ServeReport, Server, Waiting};
sim_pub_use!(runs::{ARCHIVE_SUBDIR, RUN_DELTA_BYTES, RUN_PREALLOCATE, RUNS_SUBDIR});
pub use transition::{BudgetSpec, Change, InitSpec, Transition};
pub use units::UnitCounts;
sim_pub_use!(units::RunHeader);
pub use view::{RunRead, RunView};
