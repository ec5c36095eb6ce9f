//! What an accepted change came to, as the acks of `apply` and `serve`
//! carry it ([`Acked`]): its seq and, for an `item` or a `spend`, the state it
//! left: the new items' ids, the budget after the spend. The writer that
//! applied the change reads that state right after the batch that holds it,
//! so a batch ends after each `item` and each `spend`.

use super::protocol::Acked;
use crate::run::handle::Run;
use crate::run::open::Warning;
use crate::run::transition::Change;
use crate::run::view::RunView;
use crate::run::{Budget, RunError};
use std::sync::atomic::{AtomicBool, Ordering};

/// The ids `item-(last-n+1)` ..= `item-last`: the `n` items an `item` change
/// opened, when the run's last id handed out is `last`.
pub(crate) fn ids_ending(last: u64, n: u64) -> Vec<String> {
    (last + 1 - n.min(last)..=last)
        .map(|i| format!("item-{i}"))
        .collect()
}

/// What the state after a change must be read for.
pub(crate) enum After {
    Nothing,
    Items(u64),
    Budget(String),
}

impl After {
    pub(crate) fn of(c: &Change) -> After {
        match c {
            Change::Items { items } => After::Items(items.len() as u64),
            Change::Spend { budget, .. } => After::Budget(budget.clone()),
            _ => After::Nothing,
        }
    }

    /// The ack of the change applied as `seq`, read from the state it left.
    pub(crate) fn ack(&self, seq: u64, v: &RunView<'_>) -> Acked {
        let mut a = Acked::seq(seq);
        match self {
            After::Nothing => {}
            After::Items(n) => a.ids = Some(ids_ending(v.header().next_item, *n)),
            After::Budget(name) => a.budget = v.header().budgets.get(name).cloned(),
        }
        a
    }
}

/// The warning a `spend` that left budget `name` of run `id` as `b` gives:
/// [`Warning::BUDGET_EXCEEDED`] once its spending has reached its limit.
pub(crate) fn budget_warning(id: &str, name: &str, b: &Budget) -> Option<Warning> {
    b.is_exhausted().then(|| Warning {
        code: Warning::BUDGET_EXCEEDED.to_string(),
        message: format!(
            "budget {name:?} of run {id}: spent {} of its limit {} (owner {})",
            b.spent,
            b.limit.map_or("-".to_string(), |l| l.to_string()),
            b.owner
        ),
        changed: vec![name.to_string()],
        archived_to: String::new(),
    })
}

/// The warning, once until a compaction runs again, that a long-lived
/// writer defers its automatic compaction for want of room on the disk
/// (FORMAT.md §5.4): [`Warning::COMPACTION_DEFERRED`]. Appends go on; the
/// log grows until there is room.
pub(crate) struct Deferral {
    said: AtomicBool,
}

impl Deferral {
    pub(crate) fn new() -> Self {
        Deferral {
            said: AtomicBool::new(false),
        }
    }

    fn check(&self, run: &Run) -> Option<Warning> {
        match run.compaction_deferred() {
            None => {
                self.said.store(false, Ordering::Relaxed);
                None
            }
            Some(why) => (!self.said.swap(true, Ordering::Relaxed)).then(|| Warning {
                code: Warning::COMPACTION_DEFERRED.to_string(),
                message: format!("run {}: {why}", run.id()),
                changed: vec![],
                archived_to: String::new(),
            }),
        }
    }
}

/// Applies `changes` to `run`, of which this process is the only writer,
/// with `Run::apply_batch`: one write and one fdatasync for each stretch of
/// changes that ends at an `item`, a `spend` or the last change. Each result
/// is its change's ack or error, in order. A compaction deferred is said
/// through `warn`, once ([`Deferral`]).
pub(crate) fn apply_batch(
    run: &Run,
    changes: Vec<Change>,
    deferral: &Deferral,
    warn: &dyn Fn(&Warning),
) -> Vec<Result<Acked, RunError>> {
    let mut out = Vec::with_capacity(changes.len());
    let mut rest = changes.into_iter();
    loop {
        let mut stretch = vec![];
        let mut after = After::Nothing;
        for c in rest.by_ref() {
            after = After::of(&c);
            stretch.push(c);
            if !matches!(after, After::Nothing) {
                break;
            }
        }
        if stretch.is_empty() {
            if let Some(w) = deferral.check(run) {
                warn(&w);
            }
            return out;
        }
        let mut results = run.apply_batch(stretch);
        let last = results.pop();
        out.extend(results.into_iter().map(|r| r.map(Acked::seq)));
        if let Some(r) = last {
            // Read before the next stretch is applied: the state this change left.
            out.push(r.map(|seq| run.read(|v| after.ack(seq, v))));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_end_at_the_last_one_handed_out() {
        assert_eq!(ids_ending(5, 2), ["item-4", "item-5"]);
        assert_eq!(ids_ending(1, 1), ["item-1"]);
        assert!(ids_ending(3, 0).is_empty());
    }
}
