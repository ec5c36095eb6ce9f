//! The chain of snapshots a store's state is read from (FORMAT.md §14): a
//! full snapshot and the delta tables over it, each naming its parent by seq
//! in its file header. Pure rules over the chain: which parent a new delta
//! takes (tiered merges), when the full table is merged, and which snapshot
//! files an install leaves live. No I/O here.

/// Most delta tables over one full table that an open reads: a chain longer
/// than this is refused as damage (a limit on a length read from disk), and a
/// writer merges the full table before it would get there.
pub(crate) const MAX_DELTA_CHAIN: usize = 32;

/// Deltas a short-lived writer lets pile up before it merges any of them:
/// below this, a writer that has appended less than one delta's worth itself
/// (a one-shot call) writes only the delta of its own tail.
pub(crate) const LIGHT_MERGE_DELTAS: usize = 8;

/// One snapshot of the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Link {
    /// The seq it covers.
    pub seq: u64,
    /// A delta's parent seq (`None`: a full snapshot).
    pub parent: Option<u64>,
    /// Its file's size.
    pub bytes: u64,
    /// A table (full or delta), not a whole-state snapshot.
    pub table: bool,
}

/// The parent a delta at `k` takes over `chain` (oldest first), or `None`
/// when the next snapshot must be full (no table to write a delta over, or the
/// chain is as long as it may get). With `merge_tiers`, the delta also absorbs
/// the newest deltas while each covers no more records than the delta grows to:
/// a binary counter, so a chain of d deltas covers ~2^d flushes and every
/// record is rewritten O(log) times before the full merge.
pub(crate) fn delta_parent(chain: &[Link], k: u64, merge_tiers: bool) -> Option<u64> {
    let base = chain.first()?;
    if !base.table {
        return None;
    }
    let mut i = chain.len() - 1;
    let mut acc = k.saturating_sub(chain[i].seq);
    if merge_tiers {
        while i > 0 {
            let covered = chain[i].seq - chain[i].parent.unwrap_or(0);
            if covered > acc {
                break;
            }
            acc += covered;
            i -= 1;
        }
    }
    let parent = chain[i].seq;
    // A merge that would leave the chain at its limit writes the full table.
    (i < MAX_DELTA_CHAIN).then_some(parent)
}

/// The chain once `new` is installed over `chain`.
pub(crate) fn after_install(chain: &[Link], new: Link) -> Vec<Link> {
    match new.parent {
        None => vec![new],
        Some(p) => match chain.iter().position(|l| l.seq == p) {
            Some(i) => chain[..=i].iter().copied().chain([new]).collect(),
            // Not over this chain (cannot happen: the parent was chosen from
            // it); the new file is then read alone and must be full.
            None => vec![new],
        },
    }
}

/// Whether the full table is due for a merge: what the deltas and the log
/// since the newest snapshot hold is past both `min_bytes` and `ratio` × the
/// full snapshot's size. With no delta this is the plain compaction rule.
pub(crate) fn full_due(chain: &[Link], log_bytes: u64, min_bytes: u64, ratio: f64) -> bool {
    let deltas: u64 = chain.iter().skip(1).map(|l| l.bytes).sum();
    let base = chain.first().map_or(0, |l| l.bytes);
    let total = deltas + log_bytes;
    total >= min_bytes && (total as f64) >= ratio * base as f64
}

/// The deltas in `chain` (every link after the full one).
pub(crate) fn deltas(chain: &[Link]) -> usize {
    chain.len().saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(seq: u64) -> Link {
        Link {
            seq,
            parent: None,
            bytes: 1000,
            table: true,
        }
    }

    fn delta(parent: u64, seq: u64) -> Link {
        Link {
            seq,
            parent: Some(parent),
            bytes: 10,
            table: true,
        }
    }

    /// Flushes every 100 records, merging tiers: the chain stays logarithmic
    /// in the flushes, and its links always nest parent to child.
    #[test]
    fn tiered_deltas_keep_the_chain_logarithmic_in_the_flushes() {
        let mut chain = vec![full(0)];
        let mut longest = 0;
        for n in 1..=1000u64 {
            let k = n * 100;
            let p = delta_parent(&chain, k, true).expect("a delta over a table");
            chain = after_install(&chain, delta(p, k));
            longest = longest.max(deltas(&chain));
            for w in chain.windows(2) {
                assert_eq!(w[1].parent, Some(w[0].seq));
            }
            assert_eq!(deltas(&chain), n.count_ones() as usize, "after {n} flushes");
        }
        assert_eq!(longest, 9);
    }

    #[test]
    fn without_tier_merges_each_delta_is_over_the_newest() {
        let mut chain = vec![full(0)];
        for n in 1..=5u64 {
            assert_eq!(delta_parent(&chain, n * 10, false), Some((n - 1) * 10));
            chain = after_install(&chain, delta((n - 1) * 10, n * 10));
        }
        assert_eq!(deltas(&chain), 5);
    }

    #[test]
    fn no_delta_over_a_whole_snapshot_an_empty_chain_or_a_full_chain() {
        assert_eq!(delta_parent(&[], 5, true), None);
        let whole = Link {
            table: false,
            ..full(3)
        };
        assert_eq!(delta_parent(&[whole], 5, true), None);
        let mut chain = vec![full(0)];
        for n in 1..=MAX_DELTA_CHAIN as u64 {
            chain.push(delta(n - 1, n));
        }
        assert_eq!(delta_parent(&chain, 100, false), None);
    }

    #[test]
    fn a_full_snapshot_starts_a_new_chain() {
        let chain = vec![full(0), delta(0, 5)];
        assert_eq!(after_install(&chain, full(9)), vec![full(9)]);
    }

    #[test]
    fn the_full_merge_is_due_past_the_ratio_of_the_full_table() {
        let chain = vec![full(0), delta(0, 5), delta(5, 9)];
        // deltas 20 bytes + 79 of log < 10% of 1000.
        assert!(!full_due(&chain, 79, 0, 0.1));
        assert!(full_due(&chain, 80, 0, 0.1));
        assert!(!full_due(&chain, 80, 101, 0.1));
    }
}
