//! Snapshots and compaction. The state at seq k is rebuilt from the files on disk
//! (previous snapshot + closed segments) on the compacting thread, so appenders
//! never wait while a large state is serialized (a delta flush copies the small
//! tail the live state holds instead, when the machine offers a copy); then the snapshot is installed
//! (temp, fsync, rename, fsync directory) and only then is older log deleted.
//!
//! Compaction depends on the writer's shared state (`shared/`), rotation
//! (`shared/segment.rs`) and replay (`load/`), never on `Store`, `open.rs` or `append.rs`:
//! the store calls down into `run`, `spawn_background` and `wait_idle`.

use crate::engine::error::{Error, Result};
use crate::engine::format::*;
use crate::engine::load::recovery::Verdict;
use crate::engine::load::replay::replay_one;
use crate::engine::load::{LoadSpec, load};
use crate::engine::machine::Machine;
use crate::engine::mutex::lock;
use crate::engine::shared::{Inner, Shared};
use crate::engine::snapshot::chain::Link;
use crate::engine::snapshot::table::Table;
use crate::engine::snapshot::{SnapshotData, SnapshotSink, is_table};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactReport {
    /// The seq the newest snapshot covers.
    pub snapshot_seq: u64,
    /// Size of the snapshot file written (0 when there was nothing new to snapshot).
    pub snapshot_bytes: u64,
    /// Log segments deleted.
    pub segments_removed: usize,
    /// Older snapshots deleted.
    pub snapshots_removed: usize,
    /// Wall time taken.
    pub elapsed: Duration,
}

/// What a compaction writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A full snapshot (`Store::compact`, `runlog compact`).
    Full,
    /// A delta table of the tail (FORMAT.md §14.4; a full snapshot when the
    /// state has no table to write it over): `Store::flush`.
    Delta,
    /// Whatever the policy says is due (FORMAT.md §14.4): a delta or a full
    /// snapshot.
    Policy,
}

/// Runs one compaction on this thread, first waiting for a running one (so
/// "a compaction is already running" is never an error).
pub(crate) fn run<M: Machine>(shared: &Arc<Shared<M>>, kind: Kind) -> Result<CompactReport> {
    shared.compaction.claim();
    let r = run_claimed(shared, kind);
    finish(shared, &r);
    r
}

fn finish<M: Machine>(shared: &Shared<M>, r: &Result<CompactReport>) {
    // The state rebuilt at k is gone by now; hand its pages back.
    super::trim::release_free_heap();
    let error = r
        .as_ref()
        .err()
        .map(|e| crate::engine::ErrorChain(e).to_string());
    match (r, error) {
        (Err(Error::Io { op, .. }), Some(why)) if *op == DEFERRED => {
            shared.compaction.free_deferred(why)
        }
        (_, error) => shared.compaction.free(error),
    }
}

/// The operation an automatic compaction deferred for want of room is
/// reported as ([`Error::Io`], `StorageFull`).
const DEFERRED: &str = "defer an automatic compaction of";

/// The room an automatic compaction that writes about `writes` bytes must
/// leave the log (FORMAT.md §5.4): as much as it takes itself, and never
/// less than two preallocation steps.
pub(crate) fn log_reserve(writes: u64, preallocate: u64) -> u64 {
    writes.max(preallocate.saturating_mul(2))
}

/// Whether a compaction that writes about `writes` bytes fits in `free`
/// bytes (`None`: not known, so it is started) and leaves the log `reserve`.
pub(crate) fn has_room(free: Option<u64>, writes: u64, reserve: u64) -> bool {
    free.is_none_or(|f| f >= writes.saturating_add(reserve))
}

/// Looks at the free space before an automatic compaction that writes about
/// `writes` bytes: `Err` (counted in `Stats::compactions_deferred`) when it
/// would leave the log less than its reserve.
fn check_room<M: Machine>(shared: &Shared<M>, writes: u64) -> Result<()> {
    let reserve = log_reserve(writes, shared.opts.preallocate);
    let free = shared.vfs.free_space(&shared.dir);
    if has_room(free, writes, reserve) {
        return Ok(());
    }
    shared
        .stats
        .compactions_deferred
        .fetch_add(1, Ordering::Relaxed);
    Err(Error::Io {
        op: DEFERRED,
        path: shared.dir.clone(),
        source: std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            format!(
                "{} bytes free on its filesystem; the compaction would write about {writes} bytes and must leave the log {reserve}: not started (the log keeps every record; it is tried again after a later append)",
                free.unwrap_or(0)
            ),
        ),
    })
}

/// About how many bytes a compaction over `delta_over` (`None`: full) at the
/// live state's seq writes (`Book::compaction_bytes`).
fn estimate<M: Machine>(g: &Inner<M>, delta_over: Option<u64>) -> u64 {
    g.book
        .compaction_bytes(delta_over, M::snapshot_sizes(g.live.state()))
}

/// Whether an automatic compaction is due now and has room to run (FORMAT.md
/// §5.4). One that is due without room is deferred: counted, and kept as the
/// reason [`Store::compaction_deferred`](crate::engine::Store::compaction_deferred)
/// and `last_compaction_error` give.
pub(crate) fn due_with_room<M: Machine>(shared: &Shared<M>, g: &Inner<M>) -> bool {
    let Some(delta_over) = shared.next_compaction(g, g.live.last_seq()) else {
        return false;
    };
    match check_room(shared, estimate(g, delta_over)) {
        Ok(()) => true,
        Err(e) => {
            shared
                .compaction
                .defer(crate::engine::ErrorChain(&e).to_string());
            false
        }
    }
}

/// Starts a compaction in a background thread unless one is running.
pub(crate) fn spawn_background<M: Machine>(shared: &Arc<Shared<M>>) {
    let s = shared.clone();
    shared.compaction.spawn_if_free(move || {
        let r = run_claimed(&s, Kind::Policy);
        finish(&s, &r);
    });
}

/// Waits for any background compaction to end.
pub(crate) fn wait_idle<M: Machine>(shared: &Shared<M>) {
    shared.compaction.wait_idle();
}

fn run_claimed<M: Machine>(shared: &Shared<M>, kind: Kind) -> Result<CompactReport> {
    let started = Instant::now();
    // 1. Cut: every record up to k goes into closed, fsynced segments.
    let (k, base, delta_over, copy) = {
        let mut g = lock(&shared.inner);
        g.poison.check()?;
        let k = g.live.last_seq();
        let base = g.book.newest_snapshot();
        let delta_over = match kind {
            Kind::Full => None,
            Kind::Delta => g.book.delta_parent(k, shared.opts.delta_bytes),
            Kind::Policy => match shared.next_compaction(&g, k) {
                Some(d) => d,
                // Due no more (another compaction ran since this was asked for).
                None if k > base => return Ok(nothing(base, started)),
                None => None,
            },
        };
        if k == base {
            return Ok(nothing(base, started));
        }
        // An automatic one first looks for room (§5.4); an explicit one runs,
        // and a full disk fails it at its write (its temp file removed).
        if kind == Kind::Policy {
            check_room(shared, estimate(&g, delta_over))?;
        }
        if g.active.first_seq() <= k
            && let Err(e) = shared.rotate(&mut g, k + 1)
        {
            shared.poison(&mut g, e.poison_cause());
            return Err(e);
        }
        g.book.cut();
        // A delta needs only what changed since the newest snapshot, which the
        // live state holds at k right now: copied, no rebuild (§14.4 step 2).
        let copy = delta_over.and_then(|_| g.live.tail_copy());
        (k, base, delta_over, copy)
    };
    let state = match copy {
        Some(state) => state,
        None => rebuild(shared, k)?,
    };
    // 3. Install it: temp, fsync, rename, fsync directory, in the shape the
    //    machine keeps (a whole state, or a table streamed from the old one).
    let sink = SnapshotSink {
        vfs: &shared.vfs,
        dir: &shared.dir,
        name: snapshot_name(k),
        codec: shared.codec,
        seq: k,
        tagging: shared.tagging.as_ref(),
        max_len: shared.opts.max_snapshot_len,
        delta_over,
    };
    let written = M::write_snapshot(&state, sink)?;
    drop(state);
    shared.stats.snapshots.fetch_add(1, Ordering::Relaxed);
    install(shared, k, base, written, started)
}

/// Step 2 of a compaction: the state at k, rebuilt from disk with no lock
/// held (the snapshot chain and the closed segments after it, which must
/// replay cleanly to k).
fn rebuild<M: Machine>(shared: &Shared<M>, k: u64) -> Result<M::State> {
    let mut decode_state = M::decode_snapshot;
    let mut apply = replay_one::<M>;
    let loaded = load(
        shared.vfs.as_ref(),
        &shared.dir,
        LoadSpec {
            mapped: true,
            upto: Some(k),
            decode_state: &mut decode_state,
            apply: &mut apply,
            progress: None,
            key: shared.opts.key.as_ref(),
            decode_tail: None,
        },
    )?;
    if loaded.next_seq != k + 1 || !matches!(loaded.verdict, Verdict::Clean) {
        return Err(Error::Corrupt {
            path: shared.dir.clone(),
            offset: None,
            seq: Some(k),
            reason: format!(
                "closed segments replay to seq {} instead of {k}",
                loaded.next_seq - 1
            ),
        });
    }
    Ok(loaded.state)
}

/// Step 4 of a compaction: the snapshot at k, `written` bytes, is in place;
/// hand it to the live state and delete what the previous snapshot (base)
/// made redundant.
fn install<M: Machine>(
    shared: &Shared<M>,
    k: u64,
    base: u64,
    written: u64,
    started: Instant,
) -> Result<CompactReport> {
    // A table snapshot holds what the live state kept since the last one: hand
    // it over, so a long-lived writer's memory stays bounded too.
    let installed = open_installed_table(shared, k)?;
    let link = Link {
        seq: k,
        parent: installed.as_ref().and_then(|t| t.parent()),
        bytes: written,
        table: installed.is_some(),
    };
    if link.parent.is_some() {
        shared.stats.deltas.fetch_add(1, Ordering::Relaxed);
    }

    // Only now delete what the previous snapshot (base) made redundant. The log
    // between base and k stays, so a damaged new snapshot can fall back to
    // base; so do the snapshots of both chains (FORMAT.md §14.5).
    let (segs, snaps) = {
        let mut g = lock(&shared.inner);
        if let Some(t) = installed {
            g.live.snapshot_installed(k, SnapshotData::Table(t));
        }
        let t = g.book.installed(link, base);
        (t.segments, t.snapshots)
    };
    let vfs = shared.vfs.as_ref();
    // A failed unlink or directory fsync here is harmless (a redundant file is
    // left, FORMAT.md §5.4 step 5) but never silent: counted in `Stats`, and
    // `verify` names the files left behind.
    let mut cleanup_failures = 0u64;
    let names = segs
        .iter()
        .map(|s| segment_name(*s))
        .chain(snaps.iter().map(|s| snapshot_name(*s)));
    for name in names {
        match vfs.remove(&shared.dir.join(name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => cleanup_failures += 1,
            _ => {}
        }
    }
    if (!segs.is_empty() || !snaps.is_empty())
        && crate::engine::io::vfs::retry_interrupted(|| vfs.sync_dir(&shared.dir)).is_err()
    {
        // Not needed for safety (a deletion that is lost leaves a redundant file),
        // but keeps the directory's durable view close to the live one.
        cleanup_failures += 1;
    }
    shared
        .stats
        .cleanup_failures
        .fetch_add(cleanup_failures, Ordering::Relaxed);
    Ok(CompactReport {
        snapshot_seq: k,
        snapshot_bytes: written,
        segments_removed: segs.len(),
        snapshots_removed: snaps.len(),
        elapsed: started.elapsed(),
    })
}

fn nothing(base: u64, started: Instant) -> CompactReport {
    CompactReport {
        snapshot_seq: base,
        snapshot_bytes: 0,
        segments_removed: 0,
        snapshots_removed: 0,
        elapsed: started.elapsed(),
    }
}

/// The table just installed at `k`, reopened (header, index and footer only),
/// or `None` when the machine wrote its state whole.
fn open_installed_table<M: Machine>(shared: &Shared<M>, k: u64) -> Result<Option<Arc<Table>>> {
    let path = shared.dir.join(snapshot_name(k));
    let bytes = shared
        .vfs
        .read_mapped(&path)
        .map_err(|e| Error::io("read installed snapshot", &path, e))?;
    if !is_table((*bytes).as_ref()) {
        return Ok(None);
    }
    let key = shared.tagging.as_ref().map(|s| &s.0);
    Ok(Some(Arc::new(Table::from_bytes(path, bytes, key)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_automatic_compaction_needs_room_for_itself_and_as_much_again_for_the_log() {
        // Two 64 KiB preallocation steps at least, else what it writes.
        assert_eq!(log_reserve(1_000, 64 << 10), 128 << 10);
        assert_eq!(log_reserve(4 << 20, 64 << 10), 4 << 20);
        let fits =
            |free: Option<u64>, writes: u64| has_room(free, writes, log_reserve(writes, 64 << 10));
        // The report: a 4 MB table with 3.5 MB free is deferred.
        assert!(!fits(Some(3_500_000), 4_000_000));
        assert!(!fits(Some(7_999_999), 4_000_000));
        assert!(fits(Some(8_000_000), 4_000_000));
        // A small delta on a nearly full disk still runs: it is what gives room back.
        assert!(fits(Some(1 << 20), 16 << 10));
        assert!(!fits(Some(100 << 10), 16 << 10));
        // Not known: started, as before.
        assert!(fits(None, u64::MAX));
    }
}
