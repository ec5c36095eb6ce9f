//! The tail cache (FORMAT.md §15) as a load uses it: which cache stands on
//! the chosen base ([`standing`], read once the base is chosen), and the
//! digest a replay keeps of the records above the base ([`TailDigest`]),
//! which a writer's open leaves a new cache with. The cache's bytes and file
//! are `tailcache.rs`'s; a cache whose records are not the log's is dropped
//! and the replay runs again without it (in `load`).

use super::report::RecoveryReport;
use super::tailcache::{TailCache, fold, read_tail_cache};
use crate::engine::io::vfs::Vfs;
use std::path::Path;

/// The records above a load's base, as a tail cache names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TailDigest {
    /// The base snapshot's seq (0: none).
    pub base_seq: u64,
    /// The last record folded (`base_seq` when none).
    pub last_seq: u64,
    /// `tailcache::fold` over `base_seq + 1 ..= last_seq`.
    pub digest: u64,
    /// Of those, the records decoded and applied (not supplied by a cache).
    pub applied: u64,
}

impl TailDigest {
    /// Folds the record `seq` (the next above `last_seq`) into the digest,
    /// for a catch-up extending what the load folded.
    pub fn push(&mut self, seq: u64, payload: &[u8]) {
        self.digest = fold(self.digest, seq, payload);
        self.last_seq = seq;
    }
}

/// The tail cache a load may use: read when the load keeps a digest
/// (`wanted`), and used when it stands on the base at `base_seq`. One that
/// stands on another snapshot, or cannot be read, is only reported
/// (`tail_cache_ignored`): a cache is never needed.
pub(super) fn standing(
    vfs: &dyn Vfs,
    dir: &Path,
    wanted: bool,
    base_seq: u64,
    report: &mut RecoveryReport,
) -> Option<TailCache> {
    match wanted.then(|| read_tail_cache(vfs, dir)) {
        Some(Ok(Some(c))) if c.base_seq == base_seq => Some(c),
        Some(Ok(Some(c))) => {
            report.tail_cache_ignored = Some(format!(
                "it stands on the snapshot at seq {}, the open on {}",
                c.base_seq, base_seq
            ));
            None
        }
        Some(Err(why)) => {
            report.tail_cache_ignored = Some(why);
            None
        }
        _ => None,
    }
}
