//! Proves the one-pass resume set equals the former per-unit walk (kept below as
//! the reference) on random graphs with cycles, unknown deps and every status,
//! whatever the row order, and that it finishes on 200,000-unit chains and fans
//! and a 1,000,000-unit chain (the walk takes no call stack); and that a run's
//! view, which keeps only the units held back while it reads, streams and
//! returns that same set.
use proptest::prelude::*;
use runlog::run::{ResumeSet, Unit, UnitStatus, blocking_roots, resume_set, resume_set_from_rows};
use std::collections::{BTreeMap, BTreeSet};

/// The resume set as computed before, one walk with a fresh `seen` per unit.
mod reference {
    use super::*;

    fn is_done(units: &BTreeMap<String, Unit>, name: &str) -> bool {
        units
            .get(name)
            .is_some_and(|u| u.status == UnitStatus::Done)
    }

    fn missing_deps<'a>(units: &BTreeMap<String, Unit>, deps: &'a [String]) -> Vec<&'a String> {
        deps.iter().filter(|d| !is_done(units, d)).collect()
    }

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
            return seen.into_iter().collect();
        }
        roots.into_iter().collect()
    }

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
}

fn unit(status: UnitStatus, deps: Vec<String>) -> Unit {
    Unit {
        status,
        depends_on: deps,
        note: String::new(),
        attempts: 0,
        created_at: String::new(),
        updated_at: String::new(),
        started_at: None,
        finished_at: None,
    }
}

type Row = (String, UnitStatus, Vec<String>);

/// Rows over a pool of 10 names: some names are never a unit (unknown deps),
/// some are given twice, deps repeat and point at their own unit.
fn rows() -> impl Strategy<Value = Vec<Row>> {
    let status = prop_oneof![
        3 => Just(UnitStatus::Done),
        2 => Just(UnitStatus::Pending),
        1 => Just(UnitStatus::InProgress),
        1 => Just(UnitStatus::Blocked),
        1 => Just(UnitStatus::DepBlocked),
    ];
    let name = (0..10u8).prop_map(|i| format!("u{i}"));
    let row = (name.clone(), status, prop::collection::vec(name, 0..4));
    prop::collection::vec(row, 0..14)
}

fn as_map(rows: &[Row]) -> BTreeMap<String, Unit> {
    rows.iter()
        .map(|(n, s, d)| (n.clone(), unit(*s, d.clone())))
        .collect()
}

fn check_against_reference(units: &BTreeMap<String, Unit>) {
    let expected = reference::resume_set(units);
    assert_eq!(resume_set(units), expected);
    for (name, roots) in &expected.dep_blocked {
        let deps = &units[name].depends_on;
        assert_eq!(
            &blocking_roots(units, deps),
            roots,
            "blocking_roots({name})"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2048,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn one_pass_equals_the_per_unit_walk(rows in rows()) {
        let units = as_map(&rows);
        check_against_reference(&units);
        let expected = reference::resume_set(&units);
        // Rows as given (repeated names: the last row wins, as in the map) …
        let from_rows = resume_set_from_rows(rows.iter().map(|(n, s, d)| (n, *s, d)));
        prop_assert_eq!(&from_rows, &expected);
        // … and in reverse name order: the result is sorted whatever the order.
        let reversed = units.iter().rev().map(|(n, u)| (n, u.status, &u.depends_on));
        prop_assert_eq!(&resume_set_from_rows(reversed), &expected);
    }
}

/// A run whose units are `rows` (the last row of a name wins), made through
/// the run's own changes: each unit's status first, then its dependencies
/// (unknown names stay unknown). A unit in progress keeps no dependency: the
/// rules refuse starting one whose dependencies are not done; nor does a
/// unit depend on itself (refused too; cycles through others remain).
fn run_of(dir: &std::path::Path, rows: &[Row]) -> runlog::run::Run {
    use runlog::run::{Change, InitSpec, Runs};
    let runs = Runs::new(dir).with_compaction(runlog::engine::CompactionPolicy::Manual);
    let run = runs
        .init(InitSpec {
            id: "r".into(),
            ..InitSpec::default()
        })
        .unwrap();
    let mut units = as_map(rows);
    for (name, u) in units.iter_mut() {
        u.depends_on.retain(|d| d != name);
    }
    for (name, u) in &units {
        let change = |deps| Change::Unit {
            unit: name.clone(),
            status: u.status,
            note: None,
            deps,
        };
        run.apply(change(None)).unwrap();
        if !u.depends_on.is_empty() && u.status != UnitStatus::InProgress {
            run.apply(change(Some(u.depends_on.clone()))).unwrap();
        }
    }
    run
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 96,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Issue 50: the view works the resume set out holding only the units
    /// held back, then lists `skip` and `eligible` as it reads them again.
    #[test]
    fn a_runs_streamed_resume_set_equals_the_reference(rows in rows()) {
        let dir = tempfile::tempdir().unwrap();
        let run = run_of(dir.path(), &rows);
        let expected = reference::resume_set(&run.doc().unwrap().units);
        run.read(|view| {
            for pretty in [false, true] {
                let mut out = Vec::new();
                view.write_resume_json(&mut out, pretty).unwrap();
                let whole = if pretty {
                    serde_json::to_string_pretty(&expected)
                } else {
                    serde_json::to_string(&expected)
                };
                assert_eq!(String::from_utf8(out).unwrap(), whole.unwrap(), "pretty: {pretty}");
            }
            assert_eq!(view.resume_set().unwrap(), expected);
            let mut eligible = Vec::new();
            let dep_blocked = view.resume_streamed(&mut |n| eligible.push(n)).unwrap();
            assert_eq!(eligible, expected.eligible);
            assert_eq!(dep_blocked, expected.dep_blocked);
        });
    }
}

/// A seeded generator (splitmix64), so the medium graph is the same every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

#[test]
fn medium_random_graphs_equal_the_reference() {
    for seed in 0..4 {
        let mut rng = Rng(seed);
        let units: BTreeMap<String, Unit> = (0..1500)
            .map(|i| {
                let status = UnitStatus::ALL[rng.below(5) as usize];
                let n = rng.below(4);
                // 1,650 names for 1,500 units: about one dep in eleven is unknown.
                let deps = (0..n).map(|_| format!("n{}", rng.below(1650))).collect();
                (format!("n{i}"), unit(status, deps))
            })
            .collect();
        check_against_reference(&units);
    }
}

fn name(i: usize) -> String {
    format!("u{i:07}")
}

#[test]
fn a_200k_chain_points_every_unit_at_its_root() {
    const N: usize = 200_000;
    // u0 → u1 → … → u199999 (each depends on the next): the walk from u0, the
    // first unit in name order, goes the whole chain deep.
    let mut units: BTreeMap<String, Unit> = (0..N)
        .map(|i| {
            let deps = if i + 1 < N { vec![name(i + 1)] } else { vec![] };
            (name(i), unit(UnitStatus::Pending, deps))
        })
        .collect();
    units.insert(name(N - 1), unit(UnitStatus::InProgress, vec![]));
    let r = resume_set(&units);
    assert!(r.skip.is_empty());
    assert_eq!(r.eligible, [name(N - 1)]);
    assert_eq!(r.dep_blocked.len(), N - 1);
    assert!(r.dep_blocked.values().all(|roots| roots == &[name(N - 1)]));
    // The rules' single-unit question, once, from the far end of the chain.
    assert_eq!(
        blocking_roots(&units, &units[&name(0)].depends_on),
        [name(N - 1)]
    );

    // The root done: the next unit becomes eligible, the rest point at it.
    units.get_mut(&name(N - 1)).unwrap().status = UnitStatus::Done;
    let r = resume_set(&units);
    assert_eq!(r.skip, [name(N - 1)]);
    assert_eq!(r.eligible, [name(N - 2)]);
    assert!(r.dep_blocked.values().all(|roots| roots == &[name(N - 2)]));
}

#[test]
fn a_200k_fan_in_and_fan_out() {
    const N: usize = 200_000;
    // One sink on 200,000 pending leaves.
    let mut units: BTreeMap<String, Unit> = (0..N)
        .map(|i| (name(i), unit(UnitStatus::Pending, vec![])))
        .collect();
    let all: Vec<String> = units.keys().cloned().collect();
    units.insert("sink".into(), unit(UnitStatus::Pending, all.clone()));
    let r = resume_set(&units);
    assert_eq!(r.eligible, all);
    assert_eq!(r.dep_blocked.len(), 1);
    assert_eq!(r.dep_blocked["sink"], all);

    // 200,000 units on one unknown root.
    let units: BTreeMap<String, Unit> = (0..N)
        .map(|i| (name(i), unit(UnitStatus::Blocked, vec!["root".into()])))
        .collect();
    let r = resume_set(&units);
    assert!(r.eligible.is_empty());
    assert_eq!(r.dep_blocked.len(), N);
    assert!(r.dep_blocked.values().all(|roots| roots == &["root"]));
}

#[test]
fn wide_layers_share_one_root_set() {
    const W: usize = 400;
    const LAYERS: usize = 4;
    // Every unit of layer k depends on every unit of layer k-1: 480,000 edges,
    // and every held-back unit is blocked by all of layer 0.
    let layer = |k: usize| (0..W).map(move |i| format!("l{k}-{i:04}"));
    let mut units = BTreeMap::new();
    for k in 0..LAYERS {
        let deps: Vec<String> = if k == 0 {
            vec![]
        } else {
            layer(k - 1).collect()
        };
        for n in layer(k) {
            units.insert(n, unit(UnitStatus::Pending, deps.clone()));
        }
    }
    let r = resume_set(&units);
    let roots: Vec<String> = layer(0).collect();
    assert_eq!(r.eligible, roots);
    assert_eq!(r.dep_blocked.len(), (LAYERS - 1) * W);
    assert!(r.dep_blocked.values().all(|v| v == &roots));
}

#[test]
fn a_million_chain_from_rows_without_a_map() {
    const N: usize = 1_000_000;
    // Rows as a table would stream them, from the chain's far end: the walk
    // starts at the first row and goes a million deep.
    let rows = (0..N).rev().map(|i| {
        let deps = if i + 1 < N { vec![name(i + 1)] } else { vec![] };
        (name(i), UnitStatus::Pending, deps)
    });
    let r = resume_set_from_rows(rows);
    assert_eq!(r.eligible, [name(N - 1)]);
    assert_eq!(r.dep_blocked.len(), N - 1);
    assert!(r.dep_blocked.values().all(|roots| roots == &[name(N - 1)]));
    assert_eq!(r.dep_blocked.keys().next(), Some(&name(0)));
}

#[test]
fn a_long_cycle_behind_a_tail_names_every_unit_reached() {
    const C: usize = 500;
    // t0 → t1 → t2 → c000 → c001 → … → c499 → c000: no leaf anywhere.
    let mut units: BTreeMap<String, Unit> = (0..C)
        .map(|i| {
            let next = format!("c{:03}", (i + 1) % C);
            (format!("c{i:03}"), unit(UnitStatus::Pending, vec![next]))
        })
        .collect();
    units.insert("t0".into(), unit(UnitStatus::Pending, vec!["t1".into()]));
    units.insert("t1".into(), unit(UnitStatus::Pending, vec!["t2".into()]));
    units.insert("t2".into(), unit(UnitStatus::Pending, vec!["c000".into()]));
    check_against_reference(&units);
    let r = resume_set(&units);
    assert_eq!(r.dep_blocked["t1"].len(), C + 1, "t2 and the cycle");
    assert_eq!(r.dep_blocked["c000"].len(), C, "the cycle itself");
}
