//! Following a run's log: which units the transitions after a given seq set,
//! read lock-free from the log's tail ([`Runs::units_changed`]), so a reader
//! that keeps something derived from the units (the view's lists) brings it
//! up to date without reading every unit again.

use super::doc::Unit;
use super::error::Result;
use super::runs::Runs;
use super::transition::{Change, Transition};
use super::view::{RunRead, RunView};
use crate::engine;
use std::collections::BTreeMap;

/// The units set by the transitions after one seq, up to a read's last seq.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitsChanged {
    /// Every transition in the range was read: each unit it set, once, with
    /// the seq of the last transition that set it, oldest first.
    Read(Vec<(u64, String)>),
    /// The log no longer holds every transition of the range (compacted away,
    /// damaged, a record this build cannot decode) or more units changed than
    /// the caller's limit: why, in words. Reading every unit again is the way on.
    Lost(String),
}

impl UnitsChanged {
    /// Each unit changed with the seq that last set it and the unit as `view`
    /// shows it (`None`: `view` does not have it), looked up as the iteration
    /// goes. Empty when [`UnitsChanged::Lost`].
    pub fn units<'a>(
        &'a self,
        view: RunView<'a>,
    ) -> impl Iterator<Item = Result<(u64, &'a str, Option<Unit>)>> + 'a {
        let list: &[(u64, String)] = match self {
            UnitsChanged::Read(l) => l,
            UnitsChanged::Lost(_) => &[],
        };
        list.iter()
            .map(move |(seq, name)| Ok((*seq, name.as_str(), view.unit(name)?)))
    }
}

/// The units a transition sets.
fn units_set(t: &Transition, mut f: impl FnMut(&str)) {
    match &t.change {
        Change::Unit { unit, .. } => f(unit),
        Change::Init(spec) => {
            let deps = spec
                .deps
                .iter()
                .flat_map(|(u, d)| std::iter::once(u).chain(d));
            for u in spec.units.iter().chain(deps) {
                f(u);
            }
        }
        _ => {}
    }
}

impl Runs {
    /// The units set by the transitions of run `read` after seq `after`, up
    /// to `read`'s last seq (later ones are left for the next call), read
    /// from the log's tail without a lock ([`engine::Reader::records_after`]:
    /// the segments holding them, nothing older). Memory: the names of the
    /// units changed, at most `limit` of them (more is
    /// [`UnitsChanged::Lost`]). Looking each up in `read`'s view
    /// ([`UnitsChanged::units`]) gives the units as they are at its seq.
    pub fn units_changed(&self, read: &RunRead, after: u64, limit: usize) -> Result<UnitsChanged> {
        let upto = read.recovery().last_seq;
        if after > upto {
            return Ok(UnitsChanged::Lost(format!(
                "the log ends at seq {upto}, before seq {after} (the run was rewritten)"
            )));
        }
        if after == upto {
            return Ok(UnitsChanged::Read(vec![]));
        }
        let dir = self.run_dir(read.id())?;
        let mut next = after + 1;
        let mut lost: Option<String> = None;
        let mut changed: BTreeMap<String, u64> = BTreeMap::new();
        engine::Reader::new(self.vfs.as_ref(), &dir).with_key(self.key()).records_after(after, |seq, codec, payload| {
                if lost.is_some() || seq > upto {
                    return;
                }
                if seq != next {
                    lost = Some(format!(
                        "seq {next} is no longer in the log (compacted away since; it goes on at seq {seq})"
                    ));
                    return;
                }
                next += 1;
                let t: Transition = match codec.decode(payload) {
                    Ok(t) => t,
                    Err(why) => {
                        lost = Some(format!("the record at seq {seq} does not decode: {why}"));
                        return;
                    }
                };
                units_set(&t, |u| {
                    if changed.len() < limit || changed.contains_key(u) {
                        changed.insert(u.to_string(), seq);
                    } else if lost.is_none() {
                        lost = Some(format!("more than {limit} units changed after seq {after}"));
                    }
                });
            })
        .map_err(|e| super::error::RunError::engine(read.id(), e))?;
        if let Some(why) = lost {
            return Ok(UnitsChanged::Lost(why));
        }
        if next <= upto {
            return Ok(UnitsChanged::Lost(format!(
                "the log's records after seq {after} end at seq {} (compacted away or damaged), not at seq {upto}",
                next - 1
            )));
        }
        let mut list: Vec<(u64, String)> = changed.into_iter().map(|(n, s)| (s, n)).collect();
        list.sort();
        Ok(UnitsChanged::Read(list))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{InitSpec, Run, UnitStatus};

    fn run_in(dir: &std::path::Path) -> (Runs, Run) {
        let runs = Runs::new(dir);
        let run = runs
            .init(InitSpec {
                id: "r1".into(),
                task: "t".into(),
                units: vec!["a".into(), "b".into()],
                ..Default::default()
            })
            .expect("init");
        (runs, run)
    }

    fn seq_of(runs: &Runs) -> u64 {
        runs.read_run("r1").expect("read").recovery().last_seq
    }

    #[test]
    fn each_unit_changed_is_named_once_with_the_last_seq_that_set_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (runs, run) = run_in(dir.path());
        let after = seq_of(&runs);
        run.set_unit("a", UnitStatus::InProgress, None, None)
            .expect("set");
        run.declare_budget("gpu", None, "me").expect("budget");
        run.set_unit("c", UnitStatus::Pending, None, None)
            .expect("set");
        let last_a = run
            .set_unit("a", UnitStatus::Done, None, None)
            .expect("set");
        let read = runs.read_run("r1").expect("read");
        // Appended after the read: left for the next call.
        run.set_unit("b", UnitStatus::Blocked, None, None)
            .expect("set");
        let got = runs.units_changed(&read, after, 100).expect("changes");
        let UnitsChanged::Read(list) = &got else {
            panic!("{got:?}");
        };
        assert_eq!(
            list,
            &[(after + 3, "c".to_string()), (last_a, "a".to_string())]
        );
        let units: Vec<_> = got
            .units(read.view())
            .map(|r| r.map(|(_, n, u)| (n.to_string(), u.map(|u| u.status))))
            .collect::<Result<_>>()
            .expect("lookups");
        assert_eq!(
            units,
            [
                ("c".to_string(), Some(UnitStatus::Pending)),
                ("a".to_string(), Some(UnitStatus::Done))
            ]
        );
        // Nothing after the read's own seq.
        let last = read.recovery().last_seq;
        assert_eq!(
            runs.units_changed(&read, last, 100).expect("changes"),
            UnitsChanged::Read(vec![])
        );
    }

    #[test]
    fn more_units_than_the_limit_or_a_seq_past_the_read_is_lost() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (runs, run) = run_in(dir.path());
        let after = seq_of(&runs);
        for u in ["x", "y", "z"] {
            run.set_unit(u, UnitStatus::Pending, None, None)
                .expect("set");
        }
        let read = runs.read_run("r1").expect("read");
        let got = runs.units_changed(&read, after, 2).expect("changes");
        assert!(
            matches!(&got, UnitsChanged::Lost(w) if w.contains("more than 2")),
            "{got:?}"
        );
        let last = read.recovery().last_seq;
        let got = runs.units_changed(&read, last + 5, 100).expect("changes");
        assert!(
            matches!(&got, UnitsChanged::Lost(w) if w.contains("rewritten")),
            "{got:?}"
        );
    }

    #[test]
    fn a_record_damaged_after_the_read_is_lost_not_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (runs, run) = run_in(dir.path());
        let after = seq_of(&runs);
        run.set_unit("a", UnitStatus::Blocked, Some("first"), None)
            .expect("set");
        run.set_unit("b", UnitStatus::Blocked, Some("second-unique-note"), None)
            .expect("set");
        let read = runs.read_run("r1").expect("read");
        // Flip a byte inside the last record's note, in the segment file.
        let run_dir = runs.run_dir("r1").expect("dir");
        let mut hit = false;
        for e in std::fs::read_dir(&run_dir).expect("list") {
            let p = e.expect("entry").path();
            let mut bytes = std::fs::read(&p).expect("read");
            let needle = b"second-unique-note";
            if let Some(i) = bytes.windows(needle.len()).position(|w| w == needle) {
                bytes[i + 3] ^= 0x55;
                std::fs::write(&p, &bytes).expect("write");
                hit = true;
            }
        }
        assert!(hit, "the note was found in a segment");
        let got = runs.units_changed(&read, after, 100).expect("changes");
        assert!(
            matches!(&got, UnitsChanged::Lost(w) if w.contains("damaged")),
            "{got:?}"
        );
    }
}
