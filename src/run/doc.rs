//! The run document: what a run's store holds as its state. Field names are the
//! JSON names (`camelCase`); every type round-trips through both codecs (no
//! untagged enums, no flattening, no skipped fields).

use super::json::Json;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// The schema version new runs are written at, and the newest this build
/// reads: a run written at a newer schema is refused, never read narrowed
/// (its fields this build does not know would be dropped, and its next
/// compaction would make the loss permanent).
pub const SCHEMA_VERSION: u32 = 2;

/// Refuses a run document from a newer schema than this build's.
pub(crate) fn check_schema(found: u32) -> Result<(), String> {
    if found > SCHEMA_VERSION {
        return Err(format!(
            "written by a newer runlog (schema {found}); this build reads up to {SCHEMA_VERSION}: open it with that runlog or a newer one (nothing was read further or written)"
        ));
    }
    Ok(())
}

/// Named parts identifying the inputs a run's progress depends on
/// (`size=…`, `mtime=…`, `params=…`).
pub(crate) type Fingerprint = BTreeMap<String, String>;

/// A run's document. `schemaVersion` 0 means the store exists but the run was
/// never initialized.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunDoc {
    /// The schema version the run is written at once initialized, 0 before;
    /// a version newer than this build's is refused.
    pub schema_version: u32,
    /// The run id (also its directory name).
    pub id: String,
    /// What the run is doing, in one line.
    pub task: String,
    /// `running`, then one terminal status.
    pub status: RunStatus,
    /// When the run was initialized.
    pub created_at: String,
    /// When the last transition was applied.
    pub updated_at: String,
    /// When the run was finalized.
    pub finished_at: Option<String>,
    /// The result given at finalize.
    pub result: Option<String>,
    /// Units of work by name.
    pub units: BTreeMap<String, Unit>,
    /// Phases by name.
    pub phases: BTreeMap<String, Phase>,
    /// Items carried forward, oldest first, each with a stable id.
    pub open_items: Vec<Item>,
    /// Items resolved, in the order they were resolved.
    pub resolved_items: Vec<ResolvedItem>,
    /// The number the next item id is built from (`item-<n>`).
    pub next_item: u64,
    /// How to relaunch the run.
    pub launch: Option<Launch>,
    /// The inputs the progress depends on.
    pub fingerprint: Fingerprint,
    /// Named limits and what has been spent against them.
    pub budgets: BTreeMap<String, Budget>,
    /// What was still open when the run was finalized.
    pub open_at_finish: Option<OpenAtFinish>,
    /// The last whole-state checkpoint saved by the checkpoint API.
    pub checkpoint: Option<SavedCheckpoint>,
}

impl RunDoc {
    /// True once `init` has been applied.
    pub fn is_initialized(&self) -> bool {
        self.schema_version != 0
    }

    /// True once finalized: the run accepts no further transition.
    pub fn is_closed(&self) -> bool {
        self.status.is_terminal()
    }

    /// Units not yet done, with their status.
    pub fn open_units(&self) -> BTreeMap<String, UnitStatus> {
        self.units
            .iter()
            .filter(|(_, u)| u.status != UnitStatus::Done)
            .map(|(n, u)| (n.clone(), u.status))
            .collect()
    }

    /// The first exhausted budget, if any: (name, budget).
    pub fn exhausted_budget(&self) -> Option<(&String, &Budget)> {
        self.budgets.iter().find(|(_, b)| b.is_exhausted())
    }
}

macro_rules! status_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vm])* #[serde(rename = $s)] $v),+
        }
        impl $name {
            /// Every status, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$v),+];
            /// The status's name as written in JSON and on the command line.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$v => $s),+ }
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                $name::ALL.iter().copied().find(|v| v.as_str() == s).ok_or_else(|| {
                    let all: Vec<_> = $name::ALL.iter().map(|v| v.as_str()).collect();
                    format!("unknown status {s:?}; expected one of {}", all.join(", "))
                })
            }
        }
    };
}

status_enum!(
    /// A run's status.
    RunStatus {
        /// Not finalized.
        Running = "running",
        /// Finalized with every unit done.
        Done = "done",
        /// Finalized with something left for a human.
        NeedsAttention = "needs_attention",
        /// Finalized early.
        Aborted = "aborted",
    }
);

#[allow(clippy::derivable_impls)] // the enum is declared by a macro
impl Default for RunStatus {
    fn default() -> Self {
        RunStatus::Running
    }
}

impl RunStatus {
    /// True for the statuses that close a run.
    pub fn is_terminal(self) -> bool {
        self != RunStatus::Running
    }
}

status_enum!(
    /// A unit's status.
    UnitStatus {
        /// Not started.
        Pending = "pending",
        /// Started; found so on resume it was interrupted.
        InProgress = "in_progress",
        /// Finished and verified; the only status that skips.
        Done = "done",
        /// Stopped by something other than a dependency.
        Blocked = "blocked",
        /// Held back by a dependency that is not done.
        DepBlocked = "dep_blocked",
    }
);

status_enum!(
    /// A phase's status.
    PhaseStatus {
        /// Not started.
        Pending = "pending",
        /// Started.
        Running = "running",
        /// Finished.
        Done = "done",
        /// Stopped.
        Blocked = "blocked",
        /// Not run.
        Skipped = "skipped",
    }
);

/// One unit of work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Unit {
    /// Its status.
    pub status: UnitStatus,
    /// Units that must be done before this one may start.
    pub depends_on: Vec<String>,
    /// A free-text note.
    pub note: String,
    /// How many times it went to `in_progress`.
    pub attempts: u32,
    /// When it was added.
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
    /// When it last went to `in_progress`.
    pub started_at: Option<String>,
    /// When it went to `done`.
    pub finished_at: Option<String>,
}

/// One phase of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Phase {
    /// Its status.
    pub status: PhaseStatus,
    /// When it first went to `running`.
    pub started_at: Option<String>,
    /// When it last changed.
    pub updated_at: String,
    /// When it went to `done` or `skipped`.
    pub finished_at: Option<String>,
}

/// An open item: anything the run should carry forward.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Item {
    /// Stable id (`item-<n>`).
    pub id: String,
    /// When it was added.
    pub at: String,
    /// The item as given.
    pub item: Json,
}

/// A resolved item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResolvedItem {
    /// Its stable id.
    pub id: String,
    /// When it was added.
    pub at: String,
    /// The item as given.
    pub item: Json,
    /// When it was resolved.
    pub resolved_at: String,
    /// Why or how, if given.
    pub note: Option<String>,
}

/// A typed relaunch descriptor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Launch {
    /// The script to run; non-empty.
    pub script_path: String,
    /// Its arguments; a JSON object when present.
    pub args: Option<Json>,
}

impl Launch {
    /// Validates a launch descriptor given as JSON: an object with a non-empty
    /// string `scriptPath` and, optionally, an object `args`.
    pub fn from_json(v: &serde_json::Value) -> Result<Launch, String> {
        let obj = v
            .as_object()
            .ok_or("launch must be a JSON object {\"scriptPath\": …, \"args\": {…}}")?;
        let script = match obj.get("scriptPath") {
            Some(serde_json::Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(_) => return Err("launch.scriptPath must be a non-empty string".into()),
            None => return Err("launch.scriptPath is missing".into()),
        };
        if let Some(k) = obj.keys().find(|k| *k != "scriptPath" && *k != "args") {
            return Err(format!("launch has an unknown field {k:?}"));
        }
        let args = match obj.get("args") {
            None | Some(serde_json::Value::Null) => None,
            Some(a @ serde_json::Value::Object(_)) => Some(Json(a.clone())),
            Some(_) => return Err("launch.args must be a JSON object".into()),
        };
        Ok(Launch {
            script_path: script,
            args,
        })
    }

    /// Checks an already-typed descriptor against the same rules.
    pub fn validate(&self) -> Result<(), String> {
        if self.script_path.trim().is_empty() {
            return Err("launch.scriptPath must be a non-empty string".into());
        }
        match &self.args {
            Some(Json(a)) if !a.is_object() => Err("launch.args must be a JSON object".into()),
            _ => Ok(()),
        }
    }
}

/// A named limit with its owner, and what has been spent against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    /// The limit (`None`: tracked, unlimited).
    pub limit: Option<f64>,
    /// Who set the limit and decides when it runs out.
    pub owner: String,
    /// The sum of every spend recorded.
    pub spent: f64,
    /// When spending first reached the limit.
    pub exhausted_at: Option<String>,
}

impl Budget {
    /// True once `spent` has reached `limit`.
    pub fn is_exhausted(&self) -> bool {
        self.limit.is_some_and(|l| self.spent >= l)
    }

    /// What is left (`None` when unlimited).
    pub fn remaining(&self) -> Option<f64> {
        self.limit.map(|l| (l - self.spent).max(0.0))
    }
}

/// What was open when a run was finalized.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenAtFinish {
    /// Units not done, with their status.
    pub units: BTreeMap<String, UnitStatus>,
    /// Ids of the items still open.
    pub items: Vec<String>,
}

/// A whole-state checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SavedCheckpoint {
    /// When it was saved.
    pub at: String,
    /// How many checkpoints this run has saved, this one included.
    pub count: u64,
    /// The caller's state.
    pub state: Json,
}
