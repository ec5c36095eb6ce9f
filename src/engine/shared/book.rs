//! The writer's book of its files: which segments and snapshots are live, the
//! newest snapshot's chain, and the log bytes since that snapshot, which is
//! what decides the next compaction (FORMAT.md §5.4, §14.4).
//!
//! Its fields are its own. What it keeps: `segments` and `snapshots` are
//! ascending (oldest first), a segment enters only by a rotation (or the
//! open's first write) past the last one and a snapshot only by an install;
//! files leave only by [`Book::installed`], which drops exactly what the
//! previous snapshot made redundant and keeps every snapshot of the old and
//! new chains; `log_bytes_since_snapshot` counts the log written since the
//! last compaction's cut; `appended_bytes` counts only what this writer
//! appended itself, and only grows.

use crate::engine::machine::SnapshotSizes;
use crate::engine::options::{CompactionPolicy, Options};
use crate::engine::snapshot::chain::{self, Link};

pub(crate) struct Book {
    /// First seqs of the live segments, oldest first (the last is the active one).
    segments: Vec<u64>,
    /// Seqs of the live snapshots, oldest first.
    snapshots: Vec<u64>,
    /// The newest snapshot's chain (FORMAT.md §14), full snapshot first.
    chain: Vec<Link>,
    log_bytes_since_snapshot: u64,
    /// Bytes this writer appended itself since it opened: past
    /// `Options::delta_bytes` it is a long-lived writer, which merges.
    appended_bytes: u64,
}

/// The files an install made redundant, to be deleted.
pub(crate) struct Trimmed {
    /// First seqs of the segments.
    pub(crate) segments: Vec<u64>,
    /// Seqs of the snapshots.
    pub(crate) snapshots: Vec<u64>,
}

impl Book {
    /// The book of an open store: its live segments and snapshots (each
    /// ascending), the newest snapshot's chain and the log bytes after it.
    pub(crate) fn new(
        segments: Vec<u64>,
        snapshots: Vec<u64>,
        chain: Vec<Link>,
        log_bytes_since_snapshot: u64,
    ) -> Self {
        Book {
            segments,
            snapshots,
            chain,
            log_bytes_since_snapshot,
            appended_bytes: 0,
        }
    }

    /// The first seq of the newest live segment.
    pub(crate) fn last_segment(&self) -> Option<u64> {
        self.segments.last().copied()
    }

    /// The seq of the newest live snapshot (0 when none).
    pub(crate) fn newest_snapshot(&self) -> u64 {
        self.snapshots.last().copied().unwrap_or(0)
    }

    /// A new segment, starting at `first_seq`, follows the last one.
    pub(crate) fn rotated(&mut self, first_seq: u64) {
        self.segments.push(first_seq);
    }

    /// This writer appended `n` bytes of log.
    pub(crate) fn appended(&mut self, n: u64) {
        self.log_bytes_since_snapshot += n;
        self.appended_bytes += n;
    }

    /// A compaction cut the log: what follows counts towards the next one.
    pub(crate) fn cut(&mut self) {
        self.log_bytes_since_snapshot = 0;
    }

    /// The snapshot `link` is installed over `base` (the newest snapshot when
    /// its compaction cut the log): it joins the chain and the live snapshots,
    /// and the segments wholly below `base` and the snapshots older than `base`
    /// on neither the old chain nor the new one leave the book, returned to
    /// be deleted. The log between `base` and the new snapshot stays, so a
    /// damaged new snapshot can fall back to `base` (FORMAT.md §14.5).
    pub(crate) fn installed(&mut self, link: Link, base: u64) -> Trimmed {
        let new_chain = chain::after_install(&self.chain, link);
        let live: Vec<u64> = self
            .chain
            .iter()
            .chain(new_chain.iter())
            .map(|l| l.seq)
            .collect();
        self.chain = new_chain;
        self.snapshots.push(link.seq);
        let keep_from = self
            .segments
            .windows(2)
            .take_while(|w| w[1] <= base + 1)
            .count();
        let segments: Vec<u64> = self.segments.drain(..keep_from).collect();
        let (keep, snapshots): (Vec<u64>, Vec<u64>) = self
            .snapshots
            .iter()
            .partition(|&&s| s >= base || live.contains(&s));
        self.snapshots = keep;
        Trimmed {
            segments,
            snapshots,
        }
    }

    /// What an automatic compaction at `k` writes now under `opts`:
    /// `Some(None)` a full snapshot, `Some(Some(p))` a delta over `p`, `None`
    /// nothing yet.
    pub(crate) fn next_compaction(&self, opts: &Options, k: u64) -> Option<Option<u64>> {
        let CompactionPolicy::Auto {
            min_log_bytes,
            ratio,
        } = opts.compaction
        else {
            return None;
        };
        let log = self.log_bytes_since_snapshot;
        let full_due = chain::full_due(&self.chain, log, min_log_bytes, ratio);
        let step = opts.delta_bytes;
        if step == 0 {
            return full_due.then_some(None);
        }
        if log < step && !full_due {
            return None;
        }
        let long_lived = self.appended_bytes >= step;
        if full_due && long_lived {
            return Some(None);
        }
        if log < step {
            return None;
        }
        Some(self.delta_parent(k, step))
    }

    /// About how many bytes a compaction writes (its snapshot or delta
    /// table), for the room check before an automatic one (FORMAT.md §5.4).
    /// With the machine's estimate of the state (`sizes`): a full one, its
    /// full size; a delta over `p`, the deltas above `p` it merges plus the
    /// changes since the newest snapshot. Without: the tables of the newest
    /// chain it rewrites (all of them for a full one, `delta_over` `None`)
    /// plus every byte of the log since, an upper bound.
    pub(crate) fn compaction_bytes(
        &self,
        delta_over: Option<u64>,
        sizes: Option<SnapshotSizes>,
    ) -> u64 {
        let merged: u64 = self
            .chain
            .iter()
            .filter(|l| delta_over.is_none_or(|p| l.seq > p))
            .map(|l| l.bytes)
            .sum();
        match (delta_over, sizes) {
            (None, Some(s)) => s.full,
            (Some(_), Some(s)) => merged.saturating_add(s.delta),
            (_, None) => merged.saturating_add(self.log_bytes_since_snapshot),
        }
    }

    /// The parent a delta at `k` takes (`None`: it must be full), for a
    /// writer whose deltas are `delta_bytes` long.
    pub(crate) fn delta_parent(&self, k: u64, delta_bytes: u64) -> Option<u64> {
        chain::delta_parent(&self.chain, k, self.merges_tiers(delta_bytes))
    }

    /// Whether a delta written now also merges the newest deltas (§14.4): a
    /// long-lived writer's does, a one-shot writer's only on a long chain.
    fn merges_tiers(&self, delta_bytes: u64) -> bool {
        self.appended_bytes >= delta_bytes
            || chain::deltas(&self.chain) >= chain::LIGHT_MERGE_DELTAS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(seq: u64, parent: Option<u64>, bytes: u64) -> Link {
        Link {
            seq,
            parent,
            bytes,
            table: true,
        }
    }

    #[test]
    fn a_compaction_is_estimated_from_what_it_rewrites() {
        // A full table at 100 (1,000 bytes), deltas at 150 and 180; 4,000
        // bytes of log since.
        let chain = vec![
            link(100, None, 1_000),
            link(150, Some(100), 300),
            link(180, Some(150), 200),
        ];
        let mut b = Book::new(vec![1], vec![100, 150, 180], chain, 0);
        b.appended(4_000);
        // Not known: every table it rewrites, and the whole log.
        assert_eq!(b.compaction_bytes(None, None), 1_500 + 4_000);
        // A delta over 150 merges the delta at 180.
        assert_eq!(b.compaction_bytes(Some(150), None), 200 + 4_000);
        // Over the newest: the log only.
        assert_eq!(b.compaction_bytes(Some(180), None), 4_000);
        // With the machine's estimate: a full one is the state's size; a
        // delta, what it merges and the changes since.
        let sizes = Some(SnapshotSizes {
            full: 1_100,
            delta: 90,
        });
        assert_eq!(b.compaction_bytes(None, sizes), 1_100);
        assert_eq!(b.compaction_bytes(Some(150), sizes), 200 + 90);
        assert_eq!(b.compaction_bytes(Some(180), sizes), 90);
    }
}
