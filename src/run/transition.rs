//! Run transitions and the rules, all enforced in `apply` so a refused
//! transition writes nothing. Timestamps travel inside each transition (read
//! from the clock by the caller), so replay is deterministic.

use super::clock::{format_rfc3339, parse_rfc3339};
use super::doc::*;
use super::json::Json;
use super::record::UnitRecord;
use super::rule_error::RuleError;
use super::units::{Units, missing, roots};
use crate::engine::ApplyError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most open items one `item` transition may add.
pub const MAX_ITEMS_PER_CHANGE: usize = 10_000;

/// One stamped transition: what changed and when (RFC 3339 UTC).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transition {
    /// When the caller read the clock for it.
    pub at: String,
    /// The change.
    pub change: Change,
}

/// What a new run starts with.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InitSpec {
    /// The run id.
    pub id: String,
    /// What the run does.
    pub task: String,
    /// Units known up front (status `pending`).
    pub units: Vec<String>,
    /// Dependencies: unit → the units it depends on (added as units when new).
    pub deps: BTreeMap<String, Vec<String>>,
    /// How to relaunch.
    pub launch: Option<Launch>,
    /// What the progress depends on.
    pub fingerprint: Fingerprint,
    /// Budgets declared up front.
    pub budgets: BTreeMap<String, BudgetSpec>,
}

/// A budget's declaration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSpec {
    /// The limit (`None`: tracked, unlimited).
    pub limit: Option<f64>,
    /// Who owns the limit.
    pub owner: String,
}

/// A change to a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Change {
    /// Initialize the run (only once, first).
    Init(InitSpec),
    /// Set a unit's status, adding it if new; `note`/`deps` replace when given.
    Unit {
        /// The unit's name.
        unit: String,
        /// Its new status.
        status: UnitStatus,
        /// A new note.
        note: Option<String>,
        /// New dependencies.
        deps: Option<Vec<String>>,
    },
    /// Set a phase's status, adding it if new.
    Phase {
        /// The phase's name.
        phase: String,
        /// Its new status.
        status: PhaseStatus,
    },
    /// Add open items (each gets an id `item-<n>`).
    Items {
        /// The items.
        items: Vec<Json>,
    },
    /// Resolve an open item.
    Resolve {
        /// Its id.
        id: String,
        /// Why or how.
        note: Option<String>,
    },
    /// Declare (or change the limit or owner of) a budget; spending is kept.
    Budget {
        /// The budget's name.
        name: String,
        /// Its declaration.
        spec: BudgetSpec,
    },
    /// Record spending against a budget (a delta, never a total).
    Spend {
        /// The budget's name.
        budget: String,
        /// How much was spent (finite, ≥ 0).
        amount: f64,
    },
    /// Save a whole-state checkpoint.
    Checkpoint {
        /// The caller's state.
        state: Json,
    },
    /// Close the run.
    Finalize {
        /// `done`, `needs_attention` or `aborted`.
        status: RunStatus,
        /// A result text.
        result: Option<String>,
    },
}

impl Change {
    /// Longest unit, phase, budget or item-id name accepted, in bytes.
    pub const MAX_NAME_BYTES: usize = 256;

    /// Checks a unit, phase or budget name: non-empty, at most
    /// [`Change::MAX_NAME_BYTES`], no control characters and none of `,` `=`
    /// `+` (the CLI's separators).
    pub fn check_name(what: &str, name: &str) -> Result<(), RuleError> {
        let bad = name.is_empty()
            || name.len() > Change::MAX_NAME_BYTES
            || name.trim() != name
            || name
                .chars()
                .any(|c| c.is_control() || matches!(c, ',' | '=' | '+'));
        if bad {
            return Err(RuleError::Invalid(format!(
                "invalid {what} name {name:?}: 1–{} bytes, no spaces at the ends, no control characters, no , = +",
                Change::MAX_NAME_BYTES
            )));
        }
        Ok(())
    }

    /// A short name for messages (`unit`, `finalize`, …).
    pub fn op(&self) -> &'static str {
        match self {
            Change::Init(_) => "init",
            Change::Unit { .. } => "unit",
            Change::Phase { .. } => "phase",
            Change::Items { .. } => "item",
            Change::Resolve { .. } => "resolve",
            Change::Budget { .. } => "budget",
            Change::Spend { .. } => "spend",
            Change::Checkpoint { .. } => "checkpoint",
            Change::Finalize { .. } => "finalize",
        }
    }
}

fn check_deps(unit: &str, deps: &[String]) -> Result<(), RuleError> {
    for d in deps {
        Change::check_name("dependency", d)?;
        if d == unit {
            return Err(RuleError::Invalid(format!(
                "unit {unit:?} cannot depend on itself"
            )));
        }
    }
    Ok(())
}

fn check_amount(what: &str, x: f64) -> Result<(), RuleError> {
    if !x.is_finite() || x < 0.0 {
        return Err(RuleError::Invalid(format!(
            "{what} must be a finite number ≥ 0, not {x}"
        )));
    }
    Ok(())
}

fn check_budget(name: &str, spec: &BudgetSpec) -> Result<(), RuleError> {
    Change::check_name("budget", name)?;
    if let Some(l) = spec.limit {
        check_amount("a budget limit", l)?;
    }
    if spec.owner.trim().is_empty() {
        return Err(RuleError::Invalid(format!(
            "budget {name:?} needs an owner"
        )));
    }
    Ok(())
}

impl InitSpec {
    /// Checks the spec without applying it: the run id, the unit and
    /// dependency names, the launch and the budgets.
    pub fn check(&self) -> Result<(), RuleError> {
        super::id::check_run_id(&self.id).map_err(RuleError::Invalid)?;
        for u in &self.units {
            Change::check_name("unit", u)?;
        }
        for (u, deps) in &self.deps {
            Change::check_name("unit", u)?;
            check_deps(u, deps)?;
        }
        if let Some(l) = &self.launch {
            l.validate().map_err(RuleError::Invalid)?;
        }
        for (n, b) in &self.budgets {
            check_budget(n, b)?;
        }
        Ok(())
    }
}

fn new_unit(at_ms: i64) -> UnitRecord {
    UnitRecord {
        status: UnitStatus::Pending,
        depends_on: vec![],
        note: String::new(),
        attempts: 0,
        created: at_ms,
        updated: at_ms,
        started: None,
        finished: None,
    }
}

/// The rules: every check happens before the first mutation, so a refusal
/// leaves `doc` and `units` as they were.
/// What the rules return: `Ok`, a refusal, or damage met reading the units.
pub(super) type Applied = Result<(), ApplyError<RuleError>>;

/// A refusal by the rules.
fn refuse<T>(e: RuleError) -> Result<T, ApplyError<RuleError>> {
    Err(ApplyError::Refused(e))
}

pub(super) fn rules(doc: &mut RunDoc, units: &mut dyn Units, t: &Transition) -> Applied {
    // Stored as milliseconds: the one spelling every timestamp renders back to.
    // Units keep the milliseconds; the document keeps that spelling.
    let at_ms = parse_rfc3339(&t.at).ok_or_else(|| {
        RuleError::Invalid(format!(
            "transition time {:?} is not an RFC 3339 UTC timestamp",
            t.at
        ))
    })?;
    let at = &format_rfc3339(at_ms);
    let at = at.as_str();
    if let Change::Init(spec) = &t.change {
        if doc.is_initialized() {
            return refuse(RuleError::AlreadyInitialized { id: doc.id.clone() });
        }
        spec.check()?;
        init(doc, units, spec, at, at_ms)?;
        return Ok(());
    }
    if !doc.is_initialized() {
        return refuse(RuleError::NotInitialized);
    }
    if doc.is_closed() {
        return refuse(RuleError::Closed {
            id: doc.id.clone(),
            status: doc.status,
            op: t.change.op(),
        });
    }
    match &t.change {
        Change::Init(_) => unreachable!("handled above"),
        Change::Unit {
            unit,
            status,
            note,
            deps,
        } => set_unit(
            units,
            at_ms,
            unit,
            *status,
            note.as_deref(),
            deps.as_deref(),
        )?,
        Change::Phase { phase, status } => set_phase(doc, phase, *status, at)?,
        Change::Items { items } => open_items(doc, items, at)?,
        Change::Resolve { id, note } => resolve(doc, id, note, at)?,
        Change::Budget { name, spec } => declare_budget(doc, name, spec, at)?,
        Change::Spend { budget, amount } => spend(doc, budget, *amount, at)?,
        Change::Checkpoint { state } => {
            let count = doc.checkpoint.as_ref().map_or(0, |c| c.count) + 1;
            doc.checkpoint = Some(SavedCheckpoint {
                at: at.to_string(),
                count,
                state: state.clone(),
            });
        }
        Change::Finalize { status, result } => finalize(doc, units, *status, result, at)?,
    }
    doc.updated_at = at.to_string();
    Ok(())
}

fn set_phase(doc: &mut RunDoc, phase: &str, status: PhaseStatus, at: &str) -> Applied {
    Change::check_name("phase", phase)?;
    let p = doc
        .phases
        .entry(phase.to_string())
        .or_insert_with(|| Phase {
            status: PhaseStatus::Pending,
            started_at: None,
            updated_at: at.to_string(),
            finished_at: None,
        });
    p.status = status;
    p.updated_at = at.to_string();
    if status == PhaseStatus::Running && p.started_at.is_none() {
        p.started_at = Some(at.to_string());
    }
    if matches!(status, PhaseStatus::Done | PhaseStatus::Skipped) {
        p.finished_at = Some(at.to_string());
    }
    Ok(())
}

fn open_items(doc: &mut RunDoc, items: &[Json], at: &str) -> Applied {
    if items.is_empty() || items.len() > MAX_ITEMS_PER_CHANGE {
        return refuse(RuleError::Invalid(format!(
            "an item change carries 1–{MAX_ITEMS_PER_CHANGE} items, not {}",
            items.len()
        )));
    }
    for item in items {
        doc.next_item += 1;
        doc.open_items.push(Item {
            id: format!("item-{}", doc.next_item),
            at: at.to_string(),
            item: item.clone(),
        });
    }
    Ok(())
}

fn resolve(doc: &mut RunDoc, id: &str, note: &Option<String>, at: &str) -> Applied {
    let Some(pos) = doc.open_items.iter().position(|i| i.id == id) else {
        let resolved = doc.resolved_items.iter().any(|i| i.id == id);
        return refuse(RuleError::UnknownItem {
            id: id.to_string(),
            resolved,
        });
    };
    let item = doc.open_items.remove(pos);
    doc.resolved_items.push(ResolvedItem {
        id: item.id,
        at: item.at,
        item: item.item,
        resolved_at: at.to_string(),
        note: note.clone(),
    });
    Ok(())
}

fn declare_budget(doc: &mut RunDoc, name: &str, spec: &BudgetSpec, at: &str) -> Applied {
    check_budget(name, spec)?;
    let b = doc
        .budgets
        .entry(name.to_string())
        .or_insert_with(|| Budget {
            limit: None,
            owner: String::new(),
            spent: 0.0,
            exhausted_at: None,
        });
    b.limit = spec.limit;
    b.owner = spec.owner.clone();
    if !b.is_exhausted() {
        b.exhausted_at = None;
    } else if b.exhausted_at.is_none() {
        b.exhausted_at = Some(at.to_string());
    }
    Ok(())
}

fn spend(doc: &mut RunDoc, budget: &str, amount: f64, at: &str) -> Applied {
    check_amount("an amount spent", amount)?;
    let Some(b) = doc.budgets.get_mut(budget) else {
        return refuse(RuleError::UnknownBudget {
            name: budget.to_string(),
        });
    };
    b.spent += amount;
    if b.is_exhausted() && b.exhausted_at.is_none() {
        b.exhausted_at = Some(at.to_string());
    }
    Ok(())
}

/// `finalize`: the counts decide `done` at once; only a refusal or another
/// terminal status lists the open units.
fn finalize(
    doc: &mut RunDoc,
    units: &mut dyn Units,
    status: RunStatus,
    result: &Option<String>,
    at: &str,
) -> Applied {
    if !status.is_terminal() {
        return refuse(RuleError::Invalid(
            "finalize takes done, needs_attention or aborted".into(),
        ));
    }
    let open = if status == RunStatus::Done && units.counts().open() == 0 {
        BTreeMap::new()
    } else {
        units.open_units()?
    };
    if status == RunStatus::Done && !open.is_empty() {
        return refuse(RuleError::OpenUnits { units: open });
    }
    doc.open_at_finish = Some(OpenAtFinish {
        units: open,
        items: doc.open_items.iter().map(|i| i.id.clone()).collect(),
    });
    doc.status = status;
    doc.result = result.clone();
    doc.finished_at = Some(at.to_string());
    Ok(())
}

fn init(doc: &mut RunDoc, units: &mut dyn Units, spec: &InitSpec, at: &str, at_ms: i64) -> Applied {
    // An uninitialized store holds no unit: every one named is new.
    let mut named: BTreeMap<&String, Vec<String>> = BTreeMap::new();
    let deps_named = spec
        .deps
        .iter()
        .flat_map(|(u, d)| std::iter::once(u).chain(d));
    for u in spec.units.iter().chain(deps_named) {
        named.entry(u).or_default();
    }
    for (u, d) in &spec.deps {
        named.insert(u, d.clone());
    }
    for (name, deps) in named {
        let mut u = new_unit(at_ms);
        u.depends_on = deps;
        units.set(name, u, None)?;
    }
    *doc = RunDoc {
        schema_version: SCHEMA_VERSION,
        id: spec.id.clone(),
        task: spec.task.clone(),
        status: RunStatus::Running,
        created_at: at.to_string(),
        updated_at: at.to_string(),
        launch: spec.launch.clone(),
        fingerprint: spec.fingerprint.clone(),
        ..RunDoc::default()
    };
    for (n, b) in &spec.budgets {
        doc.budgets.insert(
            n.clone(),
            Budget {
                limit: b.limit,
                owner: b.owner.clone(),
                spent: 0.0,
                exhausted_at: None,
            },
        );
    }
    Ok(())
}

fn set_unit(
    units: &mut dyn Units,
    at_ms: i64,
    name: &str,
    status: UnitStatus,
    note: Option<&str>,
    deps: Option<&[String]>,
) -> Applied {
    Change::check_name("unit", name)?;
    if let Some(d) = deps {
        check_deps(name, d)?;
    }
    let existing = units.unit(name)?;
    if let Some(u) = &existing
        && u.status == UnitStatus::Done
        && status != UnitStatus::Done
    {
        return refuse(RuleError::Demote {
            unit: name.to_string(),
            to: status,
        });
    }
    let empty = Vec::new();
    let effective_deps =
        deps.unwrap_or_else(|| existing.as_ref().map_or(&empty, |u| &u.depends_on));
    let starting = matches!(status, UnitStatus::InProgress | UnitStatus::Done);
    let already_done = existing
        .as_ref()
        .is_some_and(|u| u.status == UnitStatus::Done);
    if starting && !already_done && !missing(&*units, effective_deps)?.is_empty() {
        return refuse(RuleError::DepsNotDone {
            unit: name.to_string(),
            roots: roots(&*units, effective_deps)?,
        });
    }
    let was = existing.as_ref().map(|u| u.status);
    let mut u = existing.unwrap_or_else(|| new_unit(at_ms));
    if status == UnitStatus::InProgress {
        u.attempts += 1;
        u.started = Some(at_ms);
    }
    if status == UnitStatus::Done && u.status != UnitStatus::Done {
        u.finished = Some(at_ms);
    }
    u.status = status;
    if let Some(n) = note {
        u.note = n.to_string();
    }
    if let Some(d) = deps {
        u.depends_on = d.to_vec();
    }
    u.updated = at_ms;
    units.set(name, u, was)
}
