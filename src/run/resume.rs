//! The resume set: a pure function of the units. `done` skips; a unit whose
//! dependencies are all done is eligible (whatever else its status, an
//! interrupted `in_progress` included); any other is held back, pointing at the
//! not-done units at the root of its blocking chain.
//!
//! The whole set is computed in one pass over the graph of not-done units.
//! Tarjan's strongly connected components, run iteratively (a million-long
//! chain needs no call stack), closes each component after every component it
//! reaches, so a component's roots are the union of its successors' roots,
//! computed once. Root sets are hash-consed: units sharing a root set share one
//! copy, and a union over successors that all hold the same set costs one
//! look-up per edge. The cost is O(units + deps) plus, per component, the sizes
//! of its successors' distinct root sets, plus the output (each held-back unit
//! gets its own list). That is linear in the output for chains, fans, trees and
//! layers sharing their roots; only units whose dependencies hold many
//! different, overlapping root sets pay more, the price of the question itself
//! (a transitive closure).

use super::doc::{Unit, UnitStatus};
use super::record::UnitRecord;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

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

/// What a walk over dependencies reads of a unit: a document's [`Unit`] or a
/// table's [`UnitRecord`], whichever the caller holds.
pub(crate) trait DepNode {
    /// Its status.
    fn status(&self) -> UnitStatus;
    /// The units it depends on.
    fn depends_on(&self) -> &[String];
}

impl DepNode for Unit {
    fn status(&self) -> UnitStatus {
        self.status
    }
    fn depends_on(&self) -> &[String] {
        &self.depends_on
    }
}

impl DepNode for UnitRecord {
    fn status(&self) -> UnitStatus {
        self.status
    }
    fn depends_on(&self) -> &[String] {
        &self.depends_on
    }
}

/// Looks a unit up by name: `None` for a unit the run does not have; an error
/// (damage to the store) stops the walk that asked.
pub(crate) type Lookup<'l, N, E> = dyn FnMut(&str) -> Result<Option<N>, E> + 'l;

/// The not-done dependencies of `deps`, looking units up through `lookup`
/// (unknown units count as not done).
pub(crate) fn missing_deps_by<'d, N: DepNode, E>(
    deps: &'d [String],
    lookup: &mut Lookup<'_, N, E>,
) -> Result<Vec<&'d String>, E> {
    let mut out = vec![];
    for d in deps {
        if lookup(d)?.is_none_or(|u| u.status() != UnitStatus::Done) {
            out.push(d);
        }
    }
    Ok(out)
}

/// The roots of the blocking chain of a unit with dependencies `deps`: the
/// not-done units reachable through not-done dependencies that have no not-done
/// dependency themselves (unknown units are roots). When every chain ends in a
/// cycle, the not-done units reached are reported instead. Never loops.
///
/// One depth-first walk, each unit reached visited once: O((units + deps) ·
/// log units) per call. For one unit (the rules' refusals); `resume_set`
/// answers for every unit at once without repeating the walk per unit.
/// Test support (feature `sim`): the rules use [`blocking_roots_by`].
#[cfg(feature = "sim")]
pub fn blocking_roots(units: &BTreeMap<String, Unit>, deps: &[String]) -> Vec<String> {
    let mut lookup = |name: &str| Ok::<_, std::convert::Infallible>(units.get(name).cloned());
    match blocking_roots_by(deps, &mut lookup) {
        Ok(v) => v,
        Err(never) => match never {},
    }
}

/// `blocking_roots`, looking units up through `lookup` (a run kept in a
/// table answers by lookup, without a map of every unit).
pub(crate) fn blocking_roots_by<N: DepNode, E>(
    deps: &[String],
    lookup: &mut Lookup<'_, N, E>,
) -> Result<Vec<String>, E> {
    let mut roots: BTreeSet<String> = BTreeSet::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut stack: Vec<String> = missing_deps_by(deps, lookup)?
        .into_iter()
        .cloned()
        .collect();
    while let Some(d) = stack.pop() {
        if seen.contains(&d) {
            continue;
        }
        let before = stack.len();
        if let Some(u) = lookup(&d)? {
            stack.extend(
                missing_deps_by(u.depends_on(), lookup)?
                    .into_iter()
                    .cloned(),
            );
        }
        if stack.len() == before {
            roots.insert(d.clone());
        }
        seen.insert(d);
    }
    // Only cycles: name every not-done unit reached, so the cycle is visible.
    let picked = if roots.is_empty() { seen } else { roots };
    Ok(picked.into_iter().collect())
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
/// let set = run.resume_set()?;
/// assert_eq!(set.eligible, ["a"]); // interrupted: eligible again
/// assert_eq!(set.dep_blocked["b"], ["a"]); // held back, pointing at its root
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
/// Test support (feature `sim`): a run computes its resume set from its rows
/// ([`resume_set_from_rows`]).
#[cfg(any(test, feature = "sim"))]
pub fn resume_set(units: &BTreeMap<String, Unit>) -> ResumeSet {
    resume_set_from_rows(
        units
            .iter()
            .map(|(name, u)| (name.as_str(), u.status, &u.depends_on)),
    )
}

/// Computes the resume set from a stream of rows `(name, status, deps)`, for a
/// caller that does not hold the units in a `BTreeMap<String, Unit>` (a sorted
/// table read row by row, say). The result is exactly `resume_set` of the
/// map those rows would build:
///
/// * the rows may come in any order; every list in the result is sorted by
///   name (so a sorted input costs no extra sorting work);
/// * a name given twice counts once, with its last row (as collecting into a
///   map would);
/// * a dependency no row names is an unknown unit: never done, a root.
///
/// Each row is read once and dropped: what is kept is one copy of each name
/// and the dependency graph as integer ids, O(units + deps), never a `Unit`.
///
/// ```
/// use runlog::run::{UnitStatus::*, resume_set_from_rows};
/// let rows = [("a", Done, vec![]), ("b", Pending, vec!["a"]), ("c", Pending, vec!["b", "x"])];
/// let set = resume_set_from_rows(rows);
/// assert_eq!(set.skip, ["a"]);
/// assert_eq!(set.eligible, ["b"]);
/// assert_eq!(set.dep_blocked["c"], ["b", "x"]); // `x` is unknown: a root
/// ```
pub fn resume_set_from_rows<I, N, D>(rows: I) -> ResumeSet
where
    I: IntoIterator<Item = (N, UnitStatus, D)>,
    N: AsRef<str>,
    D: IntoIterator,
    D::Item: AsRef<str>,
{
    let graph = Graph::build(rows);
    let mut solver = Solver::new(&graph);
    solver.run();
    solver.into_resume_set()
}

/// "No such id" in the index vectors below.
const NONE: usize = usize::MAX;

/// One row as kept: its status and its dependencies, `deps[start..end]`.
struct Row {
    status: UnitStatus,
    start: usize,
    end: usize,
}

/// The units as integer ids: every name (unit or dependency) interned once.
struct Graph {
    /// Name by id.
    names: Vec<Rc<str>>,
    /// Row by id (`NONE`: a name only seen as a dependency, an unknown unit).
    row_of: Vec<usize>,
    rows: Vec<Row>,
    /// Dependency ids of every row, back to back.
    deps: Vec<usize>,
}

impl Graph {
    fn build<I, N, D>(input: I) -> Graph
    where
        I: IntoIterator<Item = (N, UnitStatus, D)>,
        N: AsRef<str>,
        D: IntoIterator,
        D::Item: AsRef<str>,
    {
        let mut g = Graph {
            names: vec![],
            row_of: vec![],
            rows: vec![],
            deps: vec![],
        };
        let mut ids: HashMap<Rc<str>, usize> = HashMap::new();
        let mut intern = |g: &mut Graph, name: &str| -> usize {
            if let Some(&id) = ids.get(name) {
                return id;
            }
            let id = g.names.len();
            let name: Rc<str> = Rc::from(name);
            g.names.push(Rc::clone(&name));
            g.row_of.push(NONE);
            ids.insert(name, id);
            id
        };
        for (name, status, deps) in input {
            let id = intern(&mut g, name.as_ref());
            let start = g.deps.len();
            for d in deps {
                let d = intern(&mut g, d.as_ref());
                g.deps.push(d);
            }
            // A repeated name: the last row wins; the earlier one's deps stay unreferenced.
            g.row_of[id] = g.rows.len();
            g.rows.push(Row {
                status,
                start,
                end: g.deps.len(),
            });
        }
        g
    }

    fn row(&self, id: usize) -> Option<&Row> {
        self.rows.get(*self.row_of.get(id)?)
    }

    /// Unknown units count as not done.
    fn not_done(&self, id: usize) -> bool {
        self.row(id).is_none_or(|r| r.status != UnitStatus::Done)
    }

    /// Every dependency of `id` (done ones included; none for an unknown unit).
    fn edges(&self, id: usize) -> &[usize] {
        self.row(id)
            .and_then(|r| self.deps.get(r.start..r.end))
            .unwrap_or(&[])
    }

    /// A not-done unit none of whose dependencies is not done: eligible, or a root.
    fn is_leaf(&self, id: usize) -> bool {
        self.not_done(id) && self.edges(id).iter().all(|&w| !self.not_done(w))
    }

    /// Ids in name order (`String`'s byte order, as a `BTreeMap` sorts).
    fn order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.names.len()).collect();
        order.sort_by(|&a, &b| self.names[a].cmp(&self.names[b]));
        order
    }
}

/// Sets of units as sorted name ranks, hash-consed: equal sets share one id,
/// so a union over many successors holding the same set reads it once.
struct Sets {
    /// Set by id; id 0 is the empty set.
    all: Vec<Rc<[usize]>>,
    ids: HashMap<Rc<[usize]>, usize>,
    /// Per rank, then per set id: the union that last took it.
    rank_mark: Vec<usize>,
    set_mark: Vec<usize>,
    generation: usize,
    /// Scratch space of `union`.
    distinct: Vec<usize>,
    buf: Vec<usize>,
}

const EMPTY: usize = 0;

impl Sets {
    fn new(ranks: usize) -> Sets {
        let empty: Rc<[usize]> = Rc::from(Vec::new());
        Sets {
            all: vec![Rc::clone(&empty)],
            ids: HashMap::from([(empty, EMPTY)]),
            rank_mark: vec![0; ranks],
            set_mark: vec![0],
            generation: 0,
            distinct: vec![],
            buf: vec![],
        }
    }

    fn get(&self, id: usize) -> &[usize] {
        self.all.get(id).map_or(&[], |s| &s[..])
    }

    /// The id of the set holding `sorted` (ranks sorted, no repeats).
    fn intern(&mut self, sorted: &[usize]) -> usize {
        if let Some(&id) = self.ids.get(sorted) {
            return id;
        }
        let id = self.all.len();
        let set: Rc<[usize]> = Rc::from(sorted);
        self.all.push(Rc::clone(&set));
        self.set_mark.push(0);
        self.ids.insert(set, id);
        id
    }

    /// The union of the sets `children` (repeats allowed) and the ranks
    /// `extra`. Costs the sizes of the distinct children, or nothing beyond
    /// the scan of `children` when they all hold one set and `extra` is empty.
    fn union(&mut self, children: &[usize], extra: &[usize]) -> usize {
        self.generation += 1;
        let g = self.generation;
        let mut distinct = std::mem::take(&mut self.distinct);
        distinct.clear();
        for &c in children {
            if let Some(m) = self.set_mark.get_mut(c)
                && c != EMPTY
                && *m != g
            {
                *m = g;
                distinct.push(c);
            }
        }
        let id = match (&distinct[..], extra) {
            ([], []) => EMPTY,
            ([only], []) => *only,
            _ => {
                let mut buf = std::mem::take(&mut self.buf);
                buf.clear();
                let ranks = distinct.iter().flat_map(|&c| self.all[c].iter());
                for &r in ranks.chain(extra) {
                    if let Some(m) = self.rank_mark.get_mut(r)
                        && *m != g
                    {
                        *m = g;
                        buf.push(r);
                    }
                }
                buf.sort_unstable();
                let id = self.intern(&buf);
                self.buf = buf;
                id
            }
        };
        self.distinct = distinct;
        id
    }
}

/// Tarjan's strongly connected components over the not-done units, iterative,
/// with each component's root set computed as it closes.
struct Solver<'g> {
    g: &'g Graph,
    /// Ids in name order, and each id's place in it.
    order: Vec<usize>,
    rank: Vec<usize>,
    index: Vec<usize>,
    low: Vec<usize>,
    on_stack: Vec<bool>,
    comp_of: Vec<usize>,
    stack: Vec<usize>,
    next_index: usize,
    /// Per component: the roots reported for its units (leaves reached, or
    /// when there are none, the not-done units reached), its leaves, and the
    /// not-done units reached from it, itself included (only kept for
    /// components that reach no leaf: only those need it).
    answer: Vec<usize>,
    leaves: Vec<usize>,
    reach: Vec<usize>,
    sets: Sets,
    members: Vec<usize>,
    scratch: Vec<usize>,
}

impl<'g> Solver<'g> {
    fn new(g: &'g Graph) -> Solver<'g> {
        let n = g.names.len();
        let order = g.order();
        let mut rank = vec![0; n];
        for (r, &id) in order.iter().enumerate() {
            rank[id] = r;
        }
        Solver {
            g,
            order,
            rank,
            index: vec![NONE; n],
            low: vec![NONE; n],
            on_stack: vec![false; n],
            comp_of: vec![NONE; n],
            stack: vec![],
            next_index: 0,
            answer: vec![],
            leaves: vec![],
            reach: vec![],
            sets: Sets::new(n),
            members: vec![],
            scratch: vec![],
        }
    }

    fn visit(&mut self, v: usize) {
        self.index[v] = self.next_index;
        self.low[v] = self.next_index;
        self.next_index += 1;
        self.stack.push(v);
        self.on_stack[v] = true;
    }

    /// Walks from every held-back unit: leaves are only of interest as roots,
    /// so they get a set only when some held-back unit reaches them.
    fn run(&mut self) {
        let g = self.g;
        // (unit, next position in its dependencies): the DFS's own stack.
        let mut call: Vec<(usize, usize)> = vec![];
        for s in 0..g.names.len() {
            if self.index[s] != NONE || g.row(s).is_none() || !g.not_done(s) || g.is_leaf(s) {
                continue;
            }
            self.visit(s);
            call.push((s, 0));
            while let Some((v, pos)) = call.last_mut() {
                let v = *v;
                if let Some(&w) = g.edges(v).get(*pos) {
                    *pos += 1;
                    if !g.not_done(w) {
                        continue;
                    }
                    if self.index[w] == NONE {
                        self.visit(w);
                        call.push((w, 0));
                    } else if self.on_stack[w] {
                        self.low[v] = self.low[v].min(self.index[w]);
                    }
                } else {
                    call.pop();
                    if self.low[v] == self.index[v] {
                        self.close(v);
                    }
                    if let Some(&(p, _)) = call.last() {
                        self.low[p] = self.low[p].min(self.low[v]);
                    }
                }
            }
        }
    }

    /// Closes the component rooted at `v`: every component it reaches is closed.
    fn close(&mut self, v: usize) {
        let g = self.g;
        let c = self.answer.len();
        self.members.clear();
        while let Some(w) = self.stack.pop() {
            self.on_stack[w] = false;
            self.comp_of[w] = c;
            self.members.push(w);
            if w == v {
                break;
            }
        }
        let cyclic = self.members.len() > 1 || g.edges(v).contains(&v);
        // The components this one depends on, by their leaf sets.
        self.scratch.clear();
        let mut successors = false;
        for &m in &self.members {
            for &w in g.edges(m) {
                let cw = self.comp_of[w];
                if g.not_done(w) && cw != c && cw != NONE {
                    successors = true;
                    self.scratch.push(self.leaves[cw]);
                }
            }
        }
        if !cyclic && !successors {
            let leaf = self.sets.intern(&[self.rank[v]]);
            self.leaves.push(leaf);
            self.reach.push(EMPTY);
            self.answer.push(leaf);
            return;
        }
        let leaves = self.sets.union(&self.scratch, &[]);
        self.leaves.push(leaves);
        if leaves != EMPTY {
            self.reach.push(EMPTY);
            self.answer.push(leaves);
            return;
        }
        // Every chain from here ends in a cycle: report the not-done units reached.
        // Those successors reach no leaf either, so their reach sets are kept.
        self.scratch.clear();
        for &m in &self.members {
            for &w in g.edges(m) {
                let cw = self.comp_of[w];
                if g.not_done(w) && cw != c && cw != NONE {
                    self.scratch.push(self.reach[cw]);
                }
            }
        }
        let beyond = self.sets.union(&self.scratch, &[]);
        let own: Vec<usize> = self.members.iter().map(|&m| self.rank[m]).collect();
        let reach = self.sets.union(&[beyond], &own);
        self.reach.push(reach);
        // A unit on a cycle reaches itself; one off it reaches only what lies beyond.
        self.answer.push(if cyclic { reach } else { beyond });
    }

    fn into_resume_set(self) -> ResumeSet {
        let g = self.g;
        let name = |r: &usize| {
            self.order
                .get(*r)
                .map_or(String::new(), |&id| g.names[id].to_string())
        };
        let mut r = ResumeSet::default();
        let mut blocked = vec![];
        for &id in &self.order {
            let Some(row) = g.row(id) else { continue };
            if row.status == UnitStatus::Done {
                r.skip.push(g.names[id].to_string());
            } else if g.is_leaf(id) {
                r.eligible.push(g.names[id].to_string());
            } else {
                let set = self.comp_of.get(id).and_then(|&c| self.answer.get(c));
                let roots = set.map_or(&[][..], |&s| self.sets.get(s));
                blocked.push((g.names[id].to_string(), roots.iter().map(name).collect()));
            }
        }
        // Already sorted by name: the map is built in one pass.
        r.dep_blocked = blocked.into_iter().collect();
        r
    }
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
