//! The resume set: a pure function of the units. `done` skips; a unit whose
//! dependencies are all done is eligible (whatever else its status, an
//! interrupted `in_progress` included); any other is held back, pointing at the
//! not-done units at the root of its blocking chain.

use super::doc::{Unit, UnitStatus};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What a resumed run skips, runs, and holds back.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ResumeSet {
    /// Done units.
    pub skip: Vec<String>,
    /// Not-done units whose every dependency is done.
    pub eligible: Vec<String>,
    /// Not-done units with a not-done dependency → the roots blocking them.
    pub dep_blocked: BTreeMap<String, Vec<String>>,
}

fn is_done(units: &BTreeMap<String, Unit>, name: &str) -> bool {
    units
        .get(name)
        .is_some_and(|u| u.status == UnitStatus::Done)
}

/// The not-done dependencies of `deps` (unknown units count as not done).
pub fn missing_deps<'a>(units: &BTreeMap<String, Unit>, deps: &'a [String]) -> Vec<&'a String> {
    deps.iter().filter(|d| !is_done(units, d)).collect()
}

/// The roots of the blocking chain of a unit with dependencies `deps`: the
/// not-done units reachable through not-done dependencies that have no not-done
/// dependency themselves (unknown units are roots). When every chain ends in a
/// cycle, the not-done units on it are reported instead. Never loops.
pub fn blocking_roots(units: &BTreeMap<String, Unit>, deps: &[String]) -> Vec<String> {
    let mut roots = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut stack: Vec<&String> = missing_deps(units, deps);
    while let Some(d) = stack.pop() {
        if !seen.insert(d.clone()) {
            continue;
        }
        let next = match units.get(d) {
            None => vec![],
            Some(u) => missing_deps(units, &u.depends_on),
        };
        if next.is_empty() {
            roots.insert(d.clone());
        }
        stack.extend(next);
    }
    if roots.is_empty() {
        // Only cycles: name every not-done unit reached, so the cycle is visible.
        return seen.into_iter().collect();
    }
    roots.into_iter().collect()
}

/// Computes the resume set of `units`.
///
/// ```
/// use runlog::run::{InitSpec, Runs, UnitStatus};
/// let root = tempfile::tempdir()?;
/// let runs = Runs::new(root.path());
/// let run = runs.init(InitSpec {
///     id: "r".into(),
///     task: "t".into(),
///     units: vec!["a".into(), "b".into()],
///     deps: [("b".to_string(), vec!["a".to_string()])].into(),
///     ..InitSpec::default()
/// })?;
/// run.set_unit("a", UnitStatus::InProgress, None, None)?; // then killed, say
/// let set = run.resume_set();
/// assert_eq!(set.eligible, ["a"]); // interrupted: eligible again
/// assert_eq!(set.dep_blocked["b"], ["a"]); // held back, pointing at its root
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn resume_set(units: &BTreeMap<String, Unit>) -> ResumeSet {
    let mut r = ResumeSet::default();
    for (name, u) in units {
        if u.status == UnitStatus::Done {
            r.skip.push(name.clone());
        } else if missing_deps(units, &u.depends_on).is_empty() {
            r.eligible.push(name.clone());
        } else {
            r.dep_blocked
                .insert(name.clone(), blocking_roots(units, &u.depends_on));
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(status: UnitStatus, deps: &[&str]) -> Unit {
        Unit {
            status,
            depends_on: deps.iter().map(|s| s.to_string()).collect(),
            note: String::new(),
            attempts: 0,
            created_at: String::new(),
            updated_at: String::new(),
            started_at: None,
            finished_at: None,
        }
    }

    #[test]
    fn chains_point_at_roots_and_cycles_terminate() {
        use UnitStatus::*;
        let units: BTreeMap<String, Unit> = [
            ("a", unit(Done, &[])),
            ("b", unit(InProgress, &["a"])),
            ("c", unit(Pending, &["b"])),
            ("d", unit(Pending, &["c", "ghost"])),
            ("x", unit(Pending, &["y"])),
            ("y", unit(Pending, &["x"])),
        ]
        .into_iter()
        .map(|(n, u)| (n.to_string(), u))
        .collect();
        let r = resume_set(&units);
        assert_eq!(r.skip, ["a"]);
        assert_eq!(r.eligible, ["b"]);
        assert_eq!(r.dep_blocked["c"], ["b"]);
        assert_eq!(r.dep_blocked["d"], ["b", "ghost"]);
        assert_eq!(r.dep_blocked["x"], ["x", "y"]);
    }
}
