//! The run model: a run is a state machine ([`RunMachine`]) stored in one engine
//! store per run directory, under a runs root ([`Runs`]). It uses the engine only
//! through its public API.
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
pub mod clock;
mod doc;
mod error;
pub mod fingerprint;
mod follow;
mod handle;
mod id;
pub mod json;
mod machine;
mod open;
mod record;
mod resume;
mod rule_error;
mod runs;
mod transition;
mod units;
mod view;

pub use checkpoint::{Checkpoints, Flow, Restored, StopFlag, StopReason};
pub use clock::{Clock, ManualClock, SystemClock};
pub use doc::*;
pub use error::{Result, RunError};
pub use follow::UnitsChanged;
pub use handle::{Claim, Run};
pub use id::check_run_id;
pub use json::Json;
pub use machine::{RunKeyed, RunMachine};
pub use open::{
    CHECKPOINT_DISCARDED, RUN_FINISHED_STARTED_FRESH, START_ARGS_IGNORED, Started, Warning,
};
pub use record::UnitRecord;
pub use resume::{ResumeSet, blocking_roots, resume_set};
sim_pub_use!(resume::resume_set_from_rows);
pub use rule_error::RuleError;
pub use runs::{
    ARCHIVE_SUBDIR, ArchivedRun, ENV_DIR, GcReport, RUNS_SUBDIR, RunSummary, Runs, Unreadable,
    locate_root,
};
sim_pub_use!(runs::RUN_DELTA_BYTES);
pub use transition::{
    BudgetSpec, Change, InitSpec, MAX_NAME_BYTES, Transition, check_init, check_name,
};
pub use units::{RunHeader, UnitCounts};
pub use view::{RunRead, RunView, StreamedDoc, StreamedResume};
