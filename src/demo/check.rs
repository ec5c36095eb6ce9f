//! The supervisor's independent check of a finished demo run: a pure function of
//! the plan, what the workers acknowledged, the log on disk, and the document.

use super::plan::result_of;
use runlog::run::{Change, RunDoc, RunStatus, UnitStatus};
use serde::Serialize;
use std::collections::HashMap;

/// A transition a worker acknowledged as durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acked {
    /// Its seq.
    pub seq: u64,
    /// The unit.
    pub unit: String,
    /// `in_progress` or `done`.
    pub status: String,
}

/// What the check found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Units in the plan.
    pub units: usize,
    /// Units done in the document with the right result.
    pub done: usize,
    /// Acknowledged transitions missing from the log (or different there).
    pub lost: usize,
    /// Units committed `done` more than once in the log.
    pub duplicates: usize,
    /// Units never committed `done`.
    pub missing: usize,
    /// Units whose committed result is not the one the plan computes.
    pub wrong_results: usize,
    /// The document's run status is `done`.
    pub finalized: bool,
    /// Human-readable descriptions of the first few problems.
    pub problems: Vec<String>,
}

impl Check {
    /// True when nothing is wrong.
    pub fn ok(&self) -> bool {
        self.done == self.units
            && self.lost == 0
            && self.duplicates == 0
            && self.missing == 0
            && self.wrong_results == 0
            && self.finalized
    }

    fn problem(&mut self, p: String) {
        if self.problems.len() < 10 {
            self.problems.push(p);
        }
    }
}

/// Checks the run against the plan: every unit done exactly once with its
/// result, every acknowledged transition present in the log as acknowledged.
pub fn check(plan: &[String], acked: &[Acked], log: &[(u64, Change)], doc: &RunDoc) -> Check {
    let mut c = Check {
        units: plan.len(),
        finalized: doc.status == RunStatus::Done,
        ..Check::default()
    };
    let by_seq: HashMap<u64, &Change> = log.iter().map(|(s, ch)| (*s, ch)).collect();
    for a in acked {
        let same = match by_seq.get(&a.seq) {
            Some(Change::Unit { unit, status, .. }) => {
                *unit == a.unit && status.as_str() == a.status
            }
            _ => false,
        };
        if !same {
            c.lost += 1;
            c.problem(format!(
                "acknowledged seq {} ({} {}) is not in the log as acknowledged",
                a.seq, a.unit, a.status
            ));
        }
    }
    let mut dones: HashMap<&str, usize> = HashMap::new();
    for (_, ch) in log {
        if let Change::Unit {
            unit,
            status: UnitStatus::Done,
            ..
        } = ch
        {
            *dones.entry(unit.as_str()).or_default() += 1;
        }
    }
    for u in plan {
        match dones.get(u.as_str()).copied().unwrap_or(0) {
            0 => {
                c.missing += 1;
                c.problem(format!("unit {u} was never committed done"));
            }
            1 => {}
            n => {
                c.duplicates += 1;
                c.problem(format!("unit {u} was committed done {n} times"));
            }
        }
        match doc.units.get(u) {
            Some(x) if x.status == UnitStatus::Done && x.note == result_of(u) => c.done += 1,
            Some(x) if x.status == UnitStatus::Done => {
                c.wrong_results += 1;
                c.problem(format!(
                    "unit {u} has result {:?}, expected {:?}",
                    x.note,
                    result_of(u)
                ));
            }
            _ => {}
        }
    }
    if !c.finalized {
        c.problem(format!("the run's status is {:?}, not done", doc.status));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use runlog::run::Unit;

    fn done(unit: &str) -> Change {
        Change::Unit {
            unit: unit.into(),
            status: UnitStatus::Done,
            note: Some(result_of(unit)),
            deps: None,
        }
    }

    fn doc_with(units: &[&str]) -> RunDoc {
        let mut d = RunDoc {
            status: RunStatus::Done,
            ..RunDoc::default()
        };
        for u in units {
            d.units.insert(
                u.to_string(),
                Unit {
                    status: UnitStatus::Done,
                    depends_on: vec![],
                    note: result_of(u),
                    attempts: 1,
                    created_at: String::new(),
                    updated_at: String::new(),
                    started_at: None,
                    finished_at: None,
                },
            );
        }
        d
    }

    fn acked(seq: u64, unit: &str) -> Acked {
        Acked {
            seq,
            unit: unit.into(),
            status: "done".into(),
        }
    }

    #[test]
    fn a_clean_run_passes() {
        let plan = vec!["a".to_string(), "b".to_string()];
        let c = check(
            &plan,
            &[acked(1, "a"), acked(2, "b")],
            &[(1, done("a")), (2, done("b"))],
            &doc_with(&["a", "b"]),
        );
        assert!(c.ok(), "{c:?}");
    }

    #[test]
    fn a_lost_acknowledgement_is_caught() {
        let plan = vec!["a".to_string()];
        let c = check(
            &plan,
            &[acked(1, "a"), acked(2, "a")],
            &[(1, done("a"))],
            &doc_with(&["a"]),
        );
        assert_eq!(c.lost, 1);
        assert!(!c.ok());
    }

    #[test]
    fn a_unit_done_twice_is_caught() {
        let plan = vec!["a".to_string()];
        let c = check(
            &plan,
            &[],
            &[(1, done("a")), (2, done("a"))],
            &doc_with(&["a"]),
        );
        assert_eq!(c.duplicates, 1);
        assert!(!c.ok());
    }

    #[test]
    fn a_missing_unit_and_a_wrong_result_are_caught() {
        let plan = vec!["a".to_string(), "b".to_string()];
        let mut doc = doc_with(&["a"]);
        doc.units.get_mut("a").unwrap().note = "forged".into();
        let c = check(&plan, &[], &[(1, done("a"))], &doc);
        assert_eq!((c.missing, c.wrong_results, c.done), (1, 1, 0));
    }
}
