//! Keeping a run's long lists current from the log's tail. After a scan
//! (lists.rs), the [`Follower`] reads only the transitions appended since the
//! seq its lists are at ([`Runs::units_changed`]), looks up each unit they
//! set as it was then (the read the lists were brought to, kept) and as it is
//! now, and moves it in or out of the blocked, retried, stuck and pending
//! lists ([`apply`]). Their totals stay exact; blocked's and pending's are
//! checked against the run's counts after each step. A unit leaving a list
//! takes its kept entry with it; a unit joining is kept when it sorts among
//! the kept entries (lists.rs, [`Bounded::join`]).
//!
//! What the tail does not keep current: eligible and held back (a unit done
//! changes its dependents, which the tail does not name) and with them the
//! resume set's summary (`done`), units in progress
//! that grow old enough to be stuck without a transition, the stuck threshold
//! and the chart. They are as of the last scan (`scanSeq`), which the watcher
//! repeats in the background when the run changed, no sooner than
//! [`super::lists::min_rescan_gap`].
//!
//! When the tail cannot be followed (the records needed were compacted away,
//! a damaged record, a record that does not decode, more than
//! [`MAX_CHANGED`] units changed in one step, totals that disagree with the
//! counts) the step says why ([`Step::Lost`]); the watcher counts it, logs it
//! and rescans at once.

use super::lists::{Bounded, Entry, Kind, ListSet};
use runlog::run::{RunRead, Runs, Unit, UnitStatus, UnitsChanged};
use std::sync::Arc;

/// Units one step may bring; past it the lists are scanned again.
pub const MAX_CHANGED: usize = 100_000;

/// What one step did.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// No lists yet, or lost and waiting for the rescan: nothing to follow.
    Waiting,
    /// The lists were already at the read's seq (or past it: a scan that
    /// ended after the read was made).
    Current,
    /// The lists were brought from one seq to another by these many units.
    Followed {
        /// The seq they were at.
        from: u64,
        /// The seq they are at now.
        to: u64,
        /// Units changed in between.
        units: usize,
    },
    /// The tail could not be followed: why. The lists stay as they were
    /// until a rescan.
    Lost(String),
}

/// A run's lists and the read they are current at.
#[derive(Default)]
pub struct Follower {
    lists: Option<Arc<ListSet>>,
    /// The read at the lists' seq (`None`: lost, or no lists yet).
    base: Option<RunRead>,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower")
            .field("seq", &self.lists.as_ref().map(|l| l.seq))
            .field("following", &self.base.is_some())
            .finish()
    }
}

impl Follower {
    /// The lists as they are now (`None` until the first scan).
    pub fn lists(&self) -> Option<Arc<ListSet>> {
        self.lists.clone()
    }

    /// True when the lists follow the tail (not lost, not waiting for a scan).
    #[cfg(test)]
    pub fn following(&self) -> bool {
        self.base.is_some()
    }

    /// A scan's lists, and the read it scanned, replace what was kept.
    pub fn rescanned(&mut self, lists: ListSet, read: RunRead) {
        self.lists = Some(Arc::new(lists));
        self.base = Some(read);
    }

    /// Brings the lists to `now`'s seq from the tail. Keep `now` with
    /// [`Follower::keep`] afterwards so the next step starts from it.
    pub fn step(&mut self, runs: &Runs, now: &RunRead) -> Step {
        let (Some(lists), Some(base)) = (&self.lists, &self.base) else {
            return Step::Waiting;
        };
        let to = now.recovery().last_seq;
        // A scan that ended after `now` was read is ahead of it: nothing to do.
        if to <= lists.seq {
            return Step::Current;
        }
        match follow(runs, lists, base, now) {
            Ok((l, units)) => {
                let from = lists.seq;
                self.lists = Some(Arc::new(l));
                Step::Followed { from, to, units }
            }
            Err(why) => {
                self.base = None;
                Step::Lost(why)
            }
        }
    }

    /// Keeps `now` as the read the lists are current at, when they are.
    pub fn keep(&mut self, now: RunRead) {
        if self.base.is_some()
            && self
                .lists
                .as_ref()
                .is_some_and(|l| l.seq == now.recovery().last_seq)
        {
            self.base = Some(now);
        }
    }
}

/// `lists` (current at `base`'s seq) brought to `now`'s seq, and how many
/// units changed; or why the tail cannot be followed.
pub fn follow(
    runs: &Runs,
    lists: &ListSet,
    base: &RunRead,
    now: &RunRead,
) -> Result<(ListSet, usize), String> {
    let chain = |e: runlog::run::RunError| runlog::run::ErrorChain(&e).to_string();
    let changed = runs
        .units_changed(now, lists.seq, MAX_CHANGED)
        .map_err(chain)?;
    if let UnitsChanged::Lost(why) = &changed {
        return Err(why.clone());
    }
    let (old_view, new_view) = (base.view(), now.view());
    let mut l = lists.clone();
    let mut n = 0usize;
    for c in changed.units(new_view) {
        let (_, name, new) = c.map_err(chain)?;
        let old = old_view.unit(name).map_err(chain)?;
        apply(&mut l, name, old.as_ref(), new.as_ref());
        n += 1;
    }
    let counts = new_view.counts();
    for (kind, want) in [
        (Kind::Blocked, counts.blocked),
        (Kind::Pending, counts.pending),
    ] {
        let got = l.list(kind).total;
        if got != want {
            return Err(format!(
                "the {} list's total came to {got} from the tail, the run counts {want}",
                kind.name()
            ));
        }
    }
    // `done` stays the scan's: with eligible and held back it is the resume
    // set's summary, as of one seq; the live counts have the current one.
    l.seq = now.recovery().last_seq;
    Ok((l, n))
}

/// When `u` went in progress (its last change when the start is unknown).
fn started_ms(u: &Unit) -> Option<i64> {
    let ms = |s: &str| runlog::run::SystemClock::parse_rfc3339(s);
    u.started_at
        .as_deref()
        .and_then(ms)
        .or_else(|| ms(&u.updated_at))
}

/// Whether `u` belongs in list `kind` (of those the tail keeps by record alone).
fn belongs(kind: Kind, u: &Unit) -> bool {
    match kind {
        Kind::Blocked => u.status == UnitStatus::Blocked,
        Kind::Pending => u.status == UnitStatus::Pending,
        Kind::Retried => u.attempts > 1,
        Kind::Stuck | Kind::Eligible | Kind::HeldBack => false,
    }
}

/// Moves unit `name`, `old` as the lists last saw it and `new` as it is now,
/// in or out of the lists the tail keeps (blocked, pending, retried, stuck).
pub fn apply(l: &mut ListSet, name: &str, old: Option<&Unit>, new: Option<&Unit>) {
    for kind in [Kind::Blocked, Kind::Pending, Kind::Retried] {
        let list: &mut Bounded = l.list_mut(kind);
        let was = old.is_some_and(|u| belongs(kind, u));
        match (was, new.filter(|u| belongs(kind, u))) {
            (true, None) => list.leave(name),
            (false, Some(u)) => list.join(Entry::of(name, u, vec![])),
            (true, Some(u)) => list.update(Entry::of(name, u, vec![])),
            (false, None) => {}
        }
    }
    // Stuck: counted by the scan when in progress for `stuck_after_ms` at
    // its clock; it stays while that same attempt goes on.
    let (at, after) = (l.scanned_at_ms, l.stuck_after_ms as i64);
    let was_stuck = old
        .filter(|u| u.status == UnitStatus::InProgress)
        .and_then(|u| {
            started_ms(u)
                .filter(|s| at - s >= after)
                .map(|s| (s, u.attempts))
        });
    if let Some((s, attempts)) = was_stuck {
        let list = l.list_mut(Kind::Stuck);
        match new {
            Some(u)
                if u.status == UnitStatus::InProgress
                    && u.attempts == attempts
                    && started_ms(u) == Some(s) =>
            {
                list.update(Entry::of(name, u, vec![]))
            }
            _ => list.leave(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::lists::{self, KEPT_PER_LIST};
    use super::*;
    use runlog::run::{InitSpec, Run};

    /// The scan's clock: an hour ahead, so every unit in progress is stuck.
    fn later() -> i64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after 1970");
        now.as_millis() as i64 + 3_600_000
    }

    fn names(l: &ListSet, k: Kind) -> Vec<String> {
        l.list(k).kept.iter().map(|e| e.name.clone()).collect()
    }

    fn run_with(dir: &std::path::Path) -> (Runs, Run) {
        let runs = Runs::new(dir);
        let units = ["a", "b", "c", "d", "e", "f", "g"]
            .map(String::from)
            .to_vec();
        let run = runs
            .init(InitSpec {
                id: "r1".into(),
                task: "t".into(),
                units,
                ..Default::default()
            })
            .expect("init");
        let set = |u: &str, s: UnitStatus| run.set_unit(u, s, Some("why"), None).expect("set");
        set("b", UnitStatus::Blocked);
        set("c", UnitStatus::InProgress);
        set("d", UnitStatus::InProgress);
        set("d", UnitStatus::Pending);
        set("d", UnitStatus::InProgress);
        (runs, run)
    }

    fn scanned(runs: &Runs) -> (ListSet, RunRead) {
        let read = runs.read_run("r1").expect("read");
        let seq = read.recovery().last_seq;
        let l = lists::scan(&read.view(), seq, later()).expect("scan");
        (l, read)
    }

    #[test]
    fn transitions_after_the_scan_move_units_between_lists_without_a_rescan() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (runs, run) = run_with(dir.path());
        let (l, read) = scanned(&runs);
        assert_eq!(names(&l, Kind::Blocked), ["b"]);
        assert_eq!(names(&l, Kind::Retried), ["d"]);
        assert_eq!(names(&l, Kind::Stuck), ["c", "d"]);
        let scan_seq = l.seq;
        let mut f = Follower::default();
        f.rescanned(l, read);
        let set = |u: &str, s: UnitStatus| run.set_unit(u, s, Some("now"), None).expect("set");
        set("b", UnitStatus::Done); // leaves blocked
        set("e", UnitStatus::Blocked); // joins blocked, leaves pending
        set("c", UnitStatus::Done); // leaves stuck
        set("f", UnitStatus::InProgress);
        set("f", UnitStatus::Pending);
        set("f", UnitStatus::InProgress); // a new retry
        set("zz", UnitStatus::Pending); // a new unit
        let now = runs.read_run("r1").expect("read");
        let step = f.step(&runs, &now);
        let to = now.recovery().last_seq;
        assert_eq!(
            step,
            Step::Followed {
                from: scan_seq,
                to,
                units: 5
            }
        );
        f.keep(now);
        let got = f.lists().expect("lists");
        assert_eq!((got.seq, got.scan_seq), (to, scan_seq));
        assert_eq!(names(&got, Kind::Blocked), ["e"]);
        assert_eq!(names(&got, Kind::Retried), ["d", "f"]);
        assert_eq!(names(&got, Kind::Stuck), ["d"]);
        assert_eq!(got.list(Kind::Stuck).total, 1);
        assert_eq!(names(&got, Kind::Pending), ["a", "g", "zz"]);
        // The same as a scan of the run now, list by list.
        let (fresh, _) = scanned(&runs);
        for k in [Kind::Blocked, Kind::Retried, Kind::Pending] {
            assert_eq!(names(&got, k), names(&fresh, k), "{}", k.name());
            assert_eq!(got.list(k).total, fresh.list(k).total, "{}", k.name());
        }
        // Nothing new: the next step has nothing to do.
        let again = runs.read_run("r1").expect("read");
        assert_eq!(f.step(&runs, &again), Step::Current);
    }

    #[test]
    fn a_tail_compacted_away_is_lost_then_a_rescan_is_right() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (runs, run) = run_with(dir.path());
        let (l, read) = scanned(&runs);
        let mut f = Follower::default();
        f.rescanned(l, read);
        // Two compactions: the second deletes the segment that held the
        // transitions right after the lists' seq.
        run.set_unit("b", UnitStatus::Done, None, None)
            .expect("set");
        run.compact().expect("compact");
        run.set_unit("e", UnitStatus::Blocked, None, None)
            .expect("set");
        run.compact().expect("compact");
        run.set_unit("g", UnitStatus::Blocked, None, None)
            .expect("set");
        let now = runs.read_run("r1").expect("read");
        let Step::Lost(why) = f.step(&runs, &now) else {
            panic!("the step should have lost the tail");
        };
        assert!(why.contains("compacted"), "{why}");
        assert!(!f.following());
        // Waiting for the rescan: the lists stay as they were.
        assert_eq!(f.step(&runs, &now), Step::Waiting);
        let (l, read) = scanned(&runs);
        f.rescanned(l, read);
        let got = f.lists().expect("lists");
        assert_eq!(names(&got, Kind::Blocked), ["e", "g"]);
        // And it follows again from there.
        run.set_unit("e", UnitStatus::Done, None, None)
            .expect("set");
        let now = runs.read_run("r1").expect("read");
        assert!(matches!(
            f.step(&runs, &now),
            Step::Followed { units: 1, .. }
        ));
        assert_eq!(names(&f.lists().expect("lists"), Kind::Blocked), ["g"]);
    }

    fn entry(name: &str) -> Entry {
        Entry {
            name: name.into(),
            status: UnitStatus::Blocked,
            attempts: 0,
            note: String::new(),
            updated_at: String::new(),
            started_at: None,
            open_deps: vec![],
        }
    }

    #[test]
    fn a_full_list_keeps_its_first_members_by_name_as_units_join_and_leave() {
        let mut b = Bounded {
            total: KEPT_PER_LIST as u64 + 500,
            kept: (0..KEPT_PER_LIST)
                .map(|i| entry(&format!("u{i:05}")))
                .collect(),
        };
        // Before the last kept one: kept, the last kept one drops off.
        b.join(entry("u00000a"));
        assert_eq!(
            (b.total, b.kept.len()),
            (KEPT_PER_LIST as u64 + 501, KEPT_PER_LIST)
        );
        assert_eq!(b.kept[1].name, "u00000a");
        assert_eq!(b.kept.last().expect("kept").name, "u00998");
        // After it: counted, not kept (units between are not known).
        b.join(entry("u99999"));
        assert_eq!(b.total, KEPT_PER_LIST as u64 + 502);
        assert!(b.kept.iter().all(|e| e.name != "u99999"));
        // Leaving: the entry goes, the kept ones fall short until a rescan.
        b.leave("u00003");
        assert_eq!(
            (b.total, b.kept.len()),
            (KEPT_PER_LIST as u64 + 501, KEPT_PER_LIST - 1)
        );
        b.join(entry("u99998"));
        assert_eq!(b.kept.len(), KEPT_PER_LIST - 1);
        // A list whose every member is kept takes any joining unit.
        let mut small = Bounded {
            total: 1,
            kept: vec![entry("m")],
        };
        small.join(entry("z"));
        small.join(entry("a"));
        let got: Vec<_> = small.kept.iter().map(|e| e.name.as_str()).collect();
        assert_eq!((small.total, got), (3, vec!["a", "m", "z"]));
    }
}
