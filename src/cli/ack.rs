//! What an accepted change came to, as the ack lines of `apply` and `serve`
//! carry it (docs/CLI.md, "apply"): its seq and, for an `item` or a `spend`,
//! the state it left: the new items' ids, the budget after the spend. The
//! writer that applied the change reads that state right after the batch
//! that holds it, so a batch ends after each `item` and each `spend`.

use runlog::run::{Budget, Change, Run, RunError};
use serde_json::{Value, json};

/// An accepted change's ack.
#[derive(Debug, Clone, PartialEq)]
pub struct Acked {
    pub seq: u64,
    /// An `item`'s new ids, in order.
    pub ids: Option<Vec<String>>,
    /// The budget a `spend` was recorded against, after it.
    pub budget: Option<Budget>,
}

impl Acked {
    pub fn seq(seq: u64) -> Self {
        Acked {
            seq,
            ids: None,
            budget: None,
        }
    }

    /// The ack line: `{"seq":N}`, with `"ids"` or `"budget"` when known.
    pub fn line(&self) -> String {
        let mut v = json!({ "seq": self.seq });
        if let Some(ids) = &self.ids {
            v["ids"] = json!(ids);
        }
        if let Some(b) = &self.budget {
            v["budget"] = json!(b);
        }
        v.to_string()
    }

    /// Reads an ack line's object; `None` when it is not one.
    pub fn parse(v: &Value) -> Option<Acked> {
        let ids = match v.get("ids") {
            None => None,
            Some(ids) => Some(
                ids.as_array()?
                    .iter()
                    .map(|id| id.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()?,
            ),
        };
        let budget = match v.get("budget") {
            None => None,
            Some(b) => Some(serde_json::from_value(b.clone()).ok()?),
        };
        Some(Acked {
            seq: v.get("seq")?.as_u64()?,
            ids,
            budget,
        })
    }
}

/// The ids `item-(last-n+1)` ..= `item-last`: the `n` items an `item` change
/// opened, when the run's last id handed out is `last`.
pub fn ids_ending(last: u64, n: u64) -> Vec<String> {
    (last + 1 - n.min(last)..=last)
        .map(|i| format!("item-{i}"))
        .collect()
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
    fn an_ack_line_reads_back_as_what_it_says() {
        let b = Budget {
            limit: Some(2.0),
            owner: "ops".into(),
            spent: 2.5,
            exhausted_at: Some("2026-12-05T00:00:00Z".into()),
        };
        for a in [
            Acked::seq(7),
            Acked {
                ids: Some(vec!["item-3".into(), "item-4".into()]),
                ..Acked::seq(8)
            },
            Acked {
                budget: Some(b),
                ..Acked::seq(9)
            },
        ] {
            let v: Value = serde_json::from_str(&a.line()).unwrap();
            assert_eq!(Acked::parse(&v), Some(a));
        }
        for bad in [
            json!({}),
            json!({"seq": -1}),
            json!({"seq": 1, "ids": "item-1"}),
            json!({"seq": 1, "ids": [1]}),
            json!({"seq": 1, "budget": {"limit": 1}}),
        ] {
            assert_eq!(Acked::parse(&bad), None, "{bad}");
        }
    }

    #[test]
    fn ids_end_at_the_last_one_handed_out() {
        assert_eq!(ids_ending(5, 2), ["item-4", "item-5"]);
        assert_eq!(ids_ending(1, 1), ["item-1"]);
        assert!(ids_ending(3, 0).is_empty());
    }
}
