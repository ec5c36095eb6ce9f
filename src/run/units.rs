//! Where a run keeps its units: in the engine's keyed state, one compact record
//! per unit in a table snapshot, looked up by name. The rules
//! (`transition.rs`) read and write units only through [`Units`], so the same
//! rules run over this table-backed store and over a plain map (the whole
//! [`RunDoc`], kept as the reference model and the materialized view).

use super::doc::{RunDoc, Unit, UnitStatus};
use super::record::UnitRecord;
use super::rule_error::RuleError;
use crate::engine::{ApplyError, KeyedMachine, KeyedState};

/// A lookup's failure inside the rules: a refusal, or damage to the store.
pub(crate) type Fail = ApplyError<RuleError>;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How many units have each status: kept with every change, so `status` and
/// the `finalize done` check never count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnitCounts {
    /// `pending`.
    pub pending: u64,
    /// `in_progress`.
    pub in_progress: u64,
    /// `done`.
    pub done: u64,
    /// `blocked`.
    pub blocked: u64,
    /// `dep_blocked`.
    pub dep_blocked: u64,
}

impl UnitCounts {
    fn slot(&mut self, s: UnitStatus) -> &mut u64 {
        match s {
            UnitStatus::Pending => &mut self.pending,
            UnitStatus::InProgress => &mut self.in_progress,
            UnitStatus::Done => &mut self.done,
            UnitStatus::Blocked => &mut self.blocked,
            UnitStatus::DepBlocked => &mut self.dep_blocked,
        }
    }

    /// Moves one unit from `from` (`None`: new) to `to`.
    pub(crate) fn moved(&mut self, from: Option<UnitStatus>, to: UnitStatus) {
        if let Some(f) = from {
            let n = self.slot(f);
            *n = n.saturating_sub(1);
        }
        *self.slot(to) += 1;
    }

    /// Every unit.
    pub fn total(&self) -> u64 {
        self.pending + self.in_progress + self.done + self.blocked + self.dep_blocked
    }

    /// Units not done.
    pub fn open(&self) -> u64 {
        self.total() - self.done
    }

    /// The counts of a whole map of units.
    pub fn of<'a>(units: impl IntoIterator<Item = &'a Unit>) -> UnitCounts {
        let mut c = UnitCounts::default();
        for u in units {
            c.moved(None, u.status);
        }
        c
    }
}

/// A run's header as a table stores it: the document without its units, and
/// the unit counts.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunHeader {
    /// The run document; its `units` map is always empty here.
    pub doc: RunDoc,
    /// Units per status.
    pub counts: UnitCounts,
}

/// What the rules need of a run's units. They work on [`UnitRecord`]s, the
/// table's own form (timestamps in milliseconds), so replaying a record costs
/// no timestamp parsing or formatting; only the whole-document model converts.
pub(crate) trait Units {
    /// The unit called `name`. `Err` only for damage to the store.
    fn unit(&self, name: &str) -> Result<Option<UnitRecord>, Fail>;
    /// Adds or replaces a unit (`was`: its status before, `None` when new, as
    /// the caller's own [`Units::unit`] found it: a table-backed store counts
    /// units by it without looking the unit up again).
    fn set(&mut self, name: &str, u: UnitRecord, was: Option<UnitStatus>) -> Result<(), Fail>;
    /// How many units there are per status.
    fn counts(&self) -> UnitCounts;
    /// Every unit not done, with its status (a scan: only when finalizing).
    fn open_units(&self) -> Result<BTreeMap<String, UnitStatus>, Fail>;
}

/// The units of a whole [`RunDoc`] (the reference model's, under `sim`).
#[cfg(feature = "sim")]
pub(crate) struct MapUnits<'a>(pub &'a mut BTreeMap<String, Unit>);

#[cfg(feature = "sim")]
impl Units for MapUnits<'_> {
    fn unit(&self, name: &str) -> Result<Option<UnitRecord>, Fail> {
        self.0
            .get(name)
            .map(|u| UnitRecord::from_unit(u).map_err(|e| in_unit(name, e).into()))
            .transpose()
    }

    fn set(&mut self, name: &str, u: UnitRecord, _: Option<UnitStatus>) -> Result<(), Fail> {
        self.0.insert(name.to_string(), u.to_unit());
        Ok(())
    }

    fn counts(&self) -> UnitCounts {
        UnitCounts::of(self.0.values())
    }

    fn open_units(&self) -> Result<BTreeMap<String, UnitStatus>, Fail> {
        Ok(self
            .0
            .iter()
            .filter(|(_, u)| u.status != UnitStatus::Done)
            .map(|(n, u)| (n.clone(), u.status))
            .collect())
    }
}

/// The units of a table-backed run, and its counts (taken out of the header
/// for the duration of one `apply`).
pub(crate) struct TableUnits<'a, M: KeyedMachine<Value = UnitRecord>> {
    pub(crate) state: &'a mut KeyedState<M>,
    pub(crate) counts: &'a mut UnitCounts,
}

/// A unit of a document whose timestamps do not parse, named.
#[cfg(feature = "sim")]
fn in_unit(name: &str, e: RuleError) -> RuleError {
    match e {
        RuleError::Invalid(m) => RuleError::Invalid(format!("unit {name:?}: {m}")),
        e => e,
    }
}

impl<M: KeyedMachine<Value = UnitRecord>> Units for TableUnits<'_, M> {
    fn unit(&self, name: &str) -> Result<Option<UnitRecord>, Fail> {
        self.state.get(name).map_err(ApplyError::Damaged)
    }

    fn set(&mut self, name: &str, u: UnitRecord, was: Option<UnitStatus>) -> Result<(), Fail> {
        let status = u.status;
        // `set_unit` read the unit first: `was` is what that read found.
        self.state.put_after_get(name, u, was.is_some());
        self.counts.moved(was, status);
        Ok(())
    }

    fn counts(&self) -> UnitCounts {
        *self.counts
    }

    fn open_units(&self) -> Result<BTreeMap<String, UnitStatus>, Fail> {
        let mut open = BTreeMap::new();
        for e in self.state.iter() {
            let (name, r) = e.map_err(ApplyError::Damaged)?;
            if r.status != UnitStatus::Done {
                open.insert(name.into_owned(), r.status);
            }
        }
        Ok(open)
    }
}

/// The not-done dependencies among `deps` (unknown units count as not done).
pub(crate) fn missing<'d>(units: &dyn Units, deps: &'d [String]) -> Result<Vec<&'d String>, Fail> {
    super::resume::missing_deps_by(deps, &mut |n| units.unit(n))
}

/// The roots of the blocking chain of a unit with dependencies `deps`, by
/// lookup: [`super::resume::blocking_roots_by`] over the run's units.
pub(crate) fn roots(units: &dyn Units, deps: &[String]) -> Result<Vec<String>, Fail> {
    super::resume::blocking_roots_by(deps, &mut |n| units.unit(n))
}
