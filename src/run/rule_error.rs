//! Why the rules refused a transition: the run layer's refusal, decided
//! before anything is written.

use super::doc::{RunStatus, UnitStatus};
use std::collections::BTreeMap;
use std::fmt;

/// Why a transition was refused.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RuleError {
    /// The run was never initialized.
    NotInitialized,
    /// `init` on an initialized run.
    AlreadyInitialized {
        /// The existing run's id.
        id: String,
    },
    /// Any transition on a finalized run.
    Closed {
        /// The run's id.
        id: String,
        /// Its terminal status.
        status: RunStatus,
        /// The attempted operation.
        op: &'static str,
    },
    /// A `done` unit set to another status.
    Demote {
        /// The unit.
        unit: String,
        /// The status asked for.
        to: UnitStatus,
    },
    /// A unit started or finished while a dependency is not done.
    DepsNotDone {
        /// The unit.
        unit: String,
        /// The not-done units at the root of the blocking chain.
        roots: Vec<String>,
    },
    /// `finalize done` while units are not done.
    OpenUnits {
        /// The units not done, with their status.
        units: BTreeMap<String, UnitStatus>,
    },
    /// `resolve` of an id that is not open.
    UnknownItem {
        /// The id.
        id: String,
        /// True when it was resolved already.
        resolved: bool,
    },
    /// `spend` against an undeclared budget.
    UnknownBudget {
        /// The budget's name.
        name: String,
    },
    /// A malformed argument.
    Invalid(String),
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleError::NotInitialized => write!(f, "the run was never initialized"),
            RuleError::AlreadyInitialized { id } => {
                write!(
                    f,
                    "run {id:?} already exists and is live; resume it instead"
                )
            }
            RuleError::Closed { id, status, op } => write!(
                f,
                "run {id:?} is closed ({status}); {op} refused — start a new run to continue"
            ),
            RuleError::Demote { unit, to } => {
                write!(f, "unit {unit:?} is done and is never demoted (to {to})")
            }
            RuleError::DepsNotDone { unit, roots } => write!(
                f,
                "unit {unit:?} is held back: its dependencies are not done (blocked on {})",
                roots.join(", ")
            ),
            RuleError::OpenUnits { units } => {
                let list: Vec<String> = units.iter().map(|(n, s)| format!("{n} ({s})")).collect();
                write!(
                    f,
                    "cannot finalize as done: {} unit(s) not done: {}; use needs_attention or aborted",
                    units.len(),
                    list.join(", ")
                )
            }
            RuleError::UnknownItem { id, resolved: true } => {
                write!(f, "item {id:?} is already resolved")
            }
            RuleError::UnknownItem { id, .. } => write!(f, "no open item {id:?}"),
            RuleError::UnknownBudget { name } => write!(f, "no budget {name:?} is declared"),
            RuleError::Invalid(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for RuleError {}
