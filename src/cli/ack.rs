//! What an accepted change came to, as the ack lines of `apply` and `serve`
//! carry it (docs/CLI.md, "apply"; the line is the library's
//! `served::Acked`): its seq and, for an `item` or a `spend`, the state it
//! left: the new items' ids, the budget after the spend. The writer that
//! applied the change reads that state right after the batch that holds it,
//! so a batch ends after each `item` and each `spend`.

pub use runlog::run::served::Acked;
use runlog::run::{Change, Run, RunError};
use std::sync::atomic::{AtomicBool, Ordering};

/// The ids `item-(last-n+1)` ..= `item-last`: the `n` items an `item` change
/// opened, when the run's last id handed out is `last`.
pub fn ids_ending(last: u64, n: u64) -> Vec<String> {
    (last + 1 - n.min(last)..=last)
        .map(|i| format!("item-{i}"))
        .collect()
}

/// Whether this process said already that the run's automatic compaction is
/// deferred, since the last time one ran (`apply` and `serve` each hold one
/// run).
static DEFERRAL_SAID: AtomicBool = AtomicBool::new(false);

/// Says on stderr, once until a compaction runs again, that the long-lived
/// writer of `run` defers its automatic compaction for want of room on the
/// disk (FORMAT.md §5.4): `runlog: warning COMPACTION_DEFERRED: run ID: …`.
/// Appends go on; the log grows until there is room.
fn say_if_compaction_deferred(run: &Run) {
    match run.compaction_deferred() {
        None => DEFERRAL_SAID.store(false, Ordering::Relaxed),
        Some(why) => {
            if !DEFERRAL_SAID.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "runlog: warning COMPACTION_DEFERRED: run {}: {why}",
                    run.id()
                );
            }
        }
    }
}

/// What the state after a change must be read for.
enum After {
    Nothing,
    Items(u64),
    Budget(String),
}

fn after_of(c: &Change) -> After {
    match c {
        Change::Items { items } => After::Items(items.len() as u64),
        Change::Spend { budget, .. } => After::Budget(budget.clone()),
        _ => After::Nothing,
    }
}

/// Applies `changes` to `run`, of which this process is the only writer,
/// with `Run::apply_batch`: one write and one fdatasync for each stretch of
/// changes that ends at an `item`, a `spend` or the last change. Each result
/// is its change's ack or error, in order.
pub fn apply_batch(run: &Run, changes: Vec<Change>) -> Vec<Result<Acked, RunError>> {
    let mut out = Vec::with_capacity(changes.len());
    let mut rest = changes.into_iter();
    loop {
        let mut stretch = vec![];
        let mut after = After::Nothing;
        for c in rest.by_ref() {
            after = after_of(&c);
            stretch.push(c);
            if !matches!(after, After::Nothing) {
                break;
            }
        }
        if stretch.is_empty() {
            say_if_compaction_deferred(run);
            return out;
        }
        let mut results = run.apply_batch(stretch);
        let last = results.pop();
        out.extend(results.into_iter().map(|r| r.map(Acked::seq)));
        if let Some(r) = last {
            out.push(r.map(|seq| {
                let mut a = Acked::seq(seq);
                // Read before the next stretch is applied: the state this change left.
                match after {
                    After::Nothing => {}
                    After::Items(n) => {
                        a.ids = Some(ids_ending(run.read(|v| v.header().next_item), n))
                    }
                    After::Budget(name) => {
                        a.budget = run.read(|v| v.header().budgets.get(&name).cloned())
                    }
                }
                a
            }));
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
