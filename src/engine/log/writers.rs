//! Many writer processes on one store (FORMAT.md §5.8): the `SHARED` file's
//! two slots (where the last record any writer appended ends, and the sync
//! state) and the sync lock (`SYNC`) held around every fsync of the log. A
//! writer whose records another process's fsync already covered acknowledges
//! without one of its own; a failed fsync, or one whose writer died during
//! it, stops every fsync and acknowledgement of its generation, for every
//! process. Whoever writes the sync state afresh (over a failed, dead, lost
//! or unreadable one) takes a new random generation, so every writer that
//! appended before refuses (FORMAT.md §5.8, "The invariant"). Pure encoding
//! first, then the handle.

use crate::engine::format::*;
use super::mark::{Mark, MarkFound, MarkWriter, decode_mark, read_mark};
use crate::engine::mutex::lock;
use crate::engine::io::vfs::{open_or_create, 
    LockAttempt, SharedFile, Vfs, VfsFile, read_full_with, write_all_at, write_all_with,
};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Where the last record a writer appended under the writer lock ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The boot it was written in (`Vfs::boot_id`).
    pub boot: [u8; 16],
    /// The record's seq.
    pub seq: u64,
    /// The first seq (the name) of its segment.
    pub segment: u64,
    /// Where its frame ends in that segment.
    pub end: u64,
    /// The sync state's generation its writer appended under.
    pub generation: u64,
}

/// What the processes syncing the log know together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncState {
    /// The boot it was written in.
    pub boot: [u8; 16],
    /// A random number, new whenever the sync state is written afresh (an
    /// open that copies the active segment, §5.5 step 4, or one that replaces
    /// a failed, dead, lost or unreadable state): a writer that appended under
    /// another generation may not acknowledge (its record may be gone, and its
    /// seq given to another writer's record).
    pub generation: u64,
    /// An fsync of the log is running (set before it, cleared after): found
    /// set by the next holder of the sync lock, its writer died during it.
    pub in_flight: bool,
    /// An fsync of the log failed (or died): nothing above the durability mark
    /// is acknowledged until an open copies the segment.
    pub failed: bool,
}

const BOOT_AT: usize = 12;
const A_AT: usize = 28;
const B_AT: usize = 36;
const C_AT: usize = 44;
const D_AT: usize = 52;
const CRC_AT: usize = SHARED_SLOT_LEN - 4;

fn encode_slot(magic: &[u8; 8], boot: &[u8; 16], f: [u64; 4]) -> [u8; SHARED_SLOT_LEN] {
    let mut s = [0u8; SHARED_SLOT_LEN];
    s[..8].copy_from_slice(magic);
    s[8..10].copy_from_slice(&SHARED_VERSION.to_le_bytes());
    s[BOOT_AT..A_AT].copy_from_slice(boot);
    for (at, v) in [A_AT, B_AT, C_AT, D_AT].into_iter().zip(f) {
        s[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    let crc = masked_crc(&[&s[..CRC_AT]]);
    s[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    s
}

type Slot = ([u8; 16], [u64; 4]);

fn decode_slot(magic: &[u8; 8], s: &[u8]) -> Result<Slot, String> {
    if s.len() != SHARED_SLOT_LEN {
        return Err(format!("{} bytes, a slot has {SHARED_SLOT_LEN}", s.len()));
    }
    if masked_crc(&[&s[..CRC_AT]]) != le_u32(s, CRC_AT) {
        return Err("checksum mismatch".into());
    }
    if &s[..8] != magic {
        return Err("bad magic".into());
    }
    let version = le_u16(s, 8);
    if version != SHARED_VERSION {
        return Err(format!("version {version}, this build reads {SHARED_VERSION}"));
    }
    if s[10..12] != [0, 0] {
        return Err("reserved bytes not zero".into());
    }
    let mut boot = [0u8; 16];
    boot.copy_from_slice(&s[BOOT_AT..A_AT]);
    let f = [A_AT, B_AT, C_AT, D_AT].map(|at| le_u64(s, at));
    Ok((boot, f))
}

/// The appended-position slot's 64 bytes.
pub fn encode_appended(a: &Appended) -> [u8; SHARED_SLOT_LEN] {
    encode_slot(APPENDED_MAGIC, &a.boot, [a.seq, a.segment, a.end, a.generation])
}

/// Decodes an appended-position slot; `Err` says why the bytes are not one.
pub fn decode_appended(s: &[u8]) -> Result<Appended, String> {
    let (boot, [seq, segment, end, generation]) = decode_slot(APPENDED_MAGIC, s)?;
    if segment == 0 || segment > seq || end == 0 {
        return Err(format!("seq {seq} in segment {segment} ending at {end}: not a record"));
    }
    Ok(Appended {
        boot,
        seq,
        segment,
        end,
        generation,
    })
}

/// The sync-state slot's 64 bytes.
pub fn encode_sync_state(s: &SyncState) -> [u8; SHARED_SLOT_LEN] {
    encode_slot(
        SYNC_STATE_MAGIC,
        &s.boot,
        [s.generation, u64::from(s.in_flight), u64::from(s.failed), 0],
    )
}

/// Decodes a sync-state slot; `Err` says why the bytes are not one.
pub fn decode_sync_state(s: &[u8]) -> Result<SyncState, String> {
    let (boot, [generation, in_flight, failed, reserved]) = decode_slot(SYNC_STATE_MAGIC, s)?;
    if in_flight > 1 || failed > 1 {
        return Err(format!("flags {in_flight}/{failed}, each is 0 or 1"));
    }
    if reserved != 0 {
        return Err("reserved bytes not zero".into());
    }
    Ok(SyncState {
        boot,
        generation,
        in_flight: in_flight == 1,
        failed: failed == 1,
    })
}

/// What `SHARED` held: each slot when it decodes and was written in this boot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Found {
    /// The appended position.
    pub appended: Option<Appended>,
    /// The sync state.
    pub state: Option<SyncState>,
}

/// Decodes `SHARED`'s bytes as read, keeping only slots of boot `boot` (a slot
/// of another boot describes page caches that are gone). A boot id of zeros
/// (unknown) keeps nothing.
pub fn decode_shared(bytes: &[u8], boot: &[u8; 16]) -> Found {
    let this_boot = |b: &[u8; 16]| b == boot && *boot != [0u8; 16];
    let slot = |i: usize| bytes.get(i * SHARED_SLOT_LEN..(i + 1) * SHARED_SLOT_LEN);
    Found {
        appended: slot(0)
            .and_then(|s| decode_appended(s).ok())
            .filter(|a| this_boot(&a.boot)),
        state: slot(1)
            .and_then(|s| decode_sync_state(s).ok())
            .filter(|s| this_boot(&s.boot)),
    }
}

/// A new generation for a sync state written afresh: random (std's SipHash
/// keys come from the OS's randomness), never 0 (what a writer holds before
/// it read one) and never `old`, the one it replaces. A writer that appended
/// under an earlier generation, even one whose `SHARED` was lost meanwhile,
/// meets a generation it does not hold, but for a chance of 2^-64.
fn new_generation(old: Option<u64>) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    loop {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let g = h.finish();
        if g != 0 && Some(g) != old {
            return g;
        }
    }
}

/// Times a slot that fails to decode is read again: a writer may be
/// rewriting it (a positional write is not atomic against a read).
const TORN_READ_RETRIES: usize = 3;

/// A writer's handle on `SHARED` and the sync lock.
pub(crate) struct Writers {
    dir: PathBuf,
    boot: [u8; 16],
    file: Mutex<Option<Box<dyn VfsFile>>>,
    /// Handles kept open where the filesystem offers them (`Vfs::open_shared`):
    /// `SYNC`, `SHARED`, `DURABLE` (reads; opened once it exists).
    sync_file: Mutex<Option<Arc<dyn SharedFile>>>,
    shared_file: Mutex<Option<Arc<dyn SharedFile>>>,
    mark_file: Mutex<Option<Arc<dyn SharedFile>>>,
    /// The sync lock among this process's threads: a `flock` belongs to an
    /// open file description, which they share.
    in_process: Mutex<()>,
    /// The sync state's generation this writer appends under, read at its open.
    generation: AtomicU64,
    /// The sync state this writer's open settled on ([`Writers::settle`]):
    /// a copy at its first write finds it unchanged, or writes nothing.
    settled: Mutex<Option<SyncState>>,
    /// Writes to `SHARED` that failed (a hint lost: the next open copies
    /// instead of trusting it).
    pub(crate) failures: AtomicU64,
    /// A long-lived writer's last seq at its open (`u64::MAX`: a one-shot
    /// writer, never alone).
    alone_after: AtomicU64,
    /// Set once a long-lived writer is the store's only syncer (see
    /// [`Writers::fsync`]): its fsyncs take neither the sync lock nor `SHARED`.
    alone: AtomicBool,
}

/// How long a writer waits for the sync lock, whatever its wait for the
/// writer lock: the lock's holder runs one fsync, and a writer that stopped
/// waiting would have to refuse a batch it has already written.
const SYNC_LOCK_WAIT: Duration = Duration::from_secs(600);

/// The longest a writer about to fsync waits, under the sync lock, for
/// another process that holds the writer lock to let it go (§5.8, step 3.5).
pub(crate) const APPENDER_WAIT: Duration = Duration::from_millis(1);
/// How often it looks again meanwhile.
const APPENDER_POLL: Duration = Duration::from_micros(50);

impl Writers {
    pub(crate) fn new(vfs: &dyn Vfs, dir: &Path) -> Self {
        Writers {
            dir: dir.to_path_buf(),
            boot: vfs.boot_id(),
            file: Mutex::new(None),
            sync_file: Mutex::new(None),
            shared_file: Mutex::new(None),
            mark_file: Mutex::new(None),
            in_process: Mutex::new(()),
            generation: AtomicU64::new(0),
            settled: Mutex::new(None),
            failures: AtomicU64::new(0),
            alone_after: AtomicU64::new(u64::MAX),
            alone: AtomicBool::new(false),
        }
    }

    /// Says this writer holds the writer lock until it closes, and that the
    /// log's last record at its open was `last`.
    pub(crate) fn long_lived(&self, last: u64) {
        self.alone_after.store(last, Ordering::Relaxed);
    }

    /// The kept-open handle on `name` (`None`: this filesystem keeps none, or
    /// the file is absent and not to be created).
    fn handle(
        &self,
        vfs: &dyn Vfs,
        slot: &Mutex<Option<Arc<dyn SharedFile>>>,
        name: &str,
        create: bool,
    ) -> io::Result<Option<Arc<dyn SharedFile>>> {
        let mut h = lock(slot);
        if h.is_none() {
            match vfs.open_shared(&self.dir.join(name), create) {
                None => return Ok(None),
                Some(Err(e)) if e.kind() == io::ErrorKind::NotFound && !create => return Ok(None),
                Some(r) => *h = Some(Arc::from(r?)),
            }
        }
        Ok(h.clone())
    }

    /// Up to `max` bytes of a kept-open file from its start.
    fn read_handle(h: &dyn SharedFile, max: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; max];
        let n = read_full_with(|b, at| h.read_at(b, at), &mut buf, 0)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// The kept-open handle of `DURABLE`, once it exists.
    fn kept_mark(&self, vfs: &dyn Vfs) -> Option<Arc<dyn SharedFile>> {
        self.handle(vfs, &self.mark_file, MARK_FILE, false).ok().flatten()
    }

    /// The durability mark, through the kept-open handle when there is one.
    fn read_mark(&self, vfs: &dyn Vfs) -> Option<Mark> {
        match self.kept_mark(vfs) {
            Some(h) => match Self::read_handle(h.as_ref(), MARK_LEN + 1) {
                Ok(b) => decode_mark(&b).ok(),
                Err(_) => None,
            },
            None => match read_mark(vfs, &self.dir) {
                Ok(MarkFound::Valid(m)) => Some(m),
                _ => None,
            },
        }
    }

    /// This boot's slots of `SHARED`; nothing when it is absent or unreadable.
    pub(crate) fn read(&self, vfs: &dyn Vfs) -> Found {
        let path = self.dir.join(SHARED_FILE);
        let mut found = Found::default();
        let kept = self.handle(vfs, &self.shared_file, SHARED_FILE, false).ok().flatten();
        for _ in 0..TORN_READ_RETRIES {
            let read = match &kept {
                Some(h) => Self::read_handle(h.as_ref(), 2 * SHARED_SLOT_LEN),
                None => vfs.read_head(&path, 2 * SHARED_SLOT_LEN),
            };
            let Ok(bytes) = read else {
                return found;
            };
            found = decode_shared(&bytes, &self.boot);
            let complete = bytes.len() == 2 * SHARED_SLOT_LEN;
            if !complete || (found.appended.is_some() && found.state.is_some()) {
                return found;
            }
        }
        found
    }

    fn write_slot(&self, vfs: &dyn Vfs, index: usize, slot: &[u8]) -> io::Result<()> {
        let at = (index * SHARED_SLOT_LEN) as u64;
        if let Some(h) = self.handle(vfs, &self.shared_file, SHARED_FILE, true)? {
            let r = write_all_with(|b, off| h.write_at(b, off), slot, at);
            if r.is_err() {
                self.failures.fetch_add(1, Ordering::Relaxed);
            }
            return r;
        }
        let path = self.dir.join(SHARED_FILE);
        let mut f = lock(&self.file);
        if f.is_none() {
            *f = Some(open_or_create(vfs, &path)?);
        }
        let file = f.as_ref().expect("opened above");
        let r = write_all_at(file.as_ref(), slot, at);
        if r.is_err() {
            *f = None;
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        r
    }

    fn write_state(&self, vfs: &dyn Vfs, s: &SyncState) -> io::Result<()> {
        self.write_slot(vfs, 1, &encode_sync_state(s))
    }

    fn fresh_state(&self) -> SyncState {
        SyncState {
            boot: self.boot,
            generation: self.generation.load(Ordering::Relaxed),
            in_flight: false,
            failed: false,
        }
    }

    /// Records where the last record this writer appended, under the writer
    /// lock, ends. A failed write loses only the hint (the next open copies
    /// the segment instead of trusting it).
    pub(crate) fn publish(&self, vfs: &dyn Vfs, seq: u64, segment: u64, end: u64) {
        let a = Appended {
            boot: self.boot,
            seq,
            segment,
            end,
            generation: self.generation.load(Ordering::Relaxed),
        };
        let _ = self.write_slot(vfs, 0, &encode_appended(&a));
    }

    /// Takes the sync lock: on the kept-open `SYNC` (waiting in the kernel
    /// until its holder's fsync ends), else by path.
    pub(crate) fn lock(&self, vfs: &dyn Vfs) -> io::Result<SyncGuard<'_>> {
        if let Some(h) = self.handle(vfs, &self.sync_file, SYNC_LOCK_FILE, true)? {
            let in_process = lock(&self.in_process);
            h.lock()?;
            return Ok(SyncGuard::Kept(in_process, h));
        }
        self.lock_by_path(vfs).map(SyncGuard::Path)
    }

    fn lock_by_path(&self, vfs: &dyn Vfs) -> io::Result<Box<dyn Send + Sync>> {
        let path = self.dir.join(SYNC_LOCK_FILE);
        let holder = format!("pid {}", std::process::id());
        let attempt = match vfs.try_lock(&path, &holder)? {
            LockAttempt::Busy(_) => {
                vfs.lock_wait(&path, &holder, SYNC_LOCK_WAIT)?
            }
            got => got,
        };
        match attempt {
            LockAttempt::Acquired(g) => Ok(g),
            LockAttempt::Busy(h) => Err(io::Error::other(format!(
                "the sync lock {} is held by {} for longer than {:?}",
                path.display(),
                h.as_deref().unwrap_or("another writer"),
                SYNC_LOCK_WAIT
            ))),
        }
    }

    /// At a writer's open, under the writer lock, after its replay: takes
    /// the sync lock and says whether the replay read a log no failure has
    /// changed since (FORMAT.md §5.8, "The open's replay"). `before` is the
    /// sync state read before the replay began. A flag *in flight* found
    /// under the lock is a syncer that died during its fsync: written as
    /// *failed* first. The replay is current when the state is as it was
    /// before it, generation and *failed* alike: a failure (the only thing
    /// that drops or cleans pages) that came during the replay was recorded
    /// before this lock was free, and changed one or the other. The guard is
    /// held through the open's decisions ([`Writers::vouches`],
    /// [`Writers::adopt`]), so that none is made on a state that has moved.
    pub(crate) fn settle(
        &self,
        vfs: &dyn Vfs,
        before: Option<SyncState>,
    ) -> io::Result<(SyncGuard<'_>, Option<SyncState>, bool)> {
        let g = self.lock(vfs)?;
        let mut now = self.read(vfs).state;
        if let Some(s) = now.as_mut().filter(|s| s.in_flight) {
            s.in_flight = false;
            s.failed = true;
            self.write_state(vfs, s)?;
        }
        let same = |a: &SyncState, b: &SyncState| a.generation == b.generation && a.failed == b.failed;
        let current = match (before, now) {
            (None, None) => true,
            (Some(b), Some(n)) => same(&b, &n),
            _ => false,
        };
        if current {
            *lock(&self.settled) = now;
        }
        Ok((g, now, current))
    }

    /// The state to read before an open's replay, for [`Writers::settle`].
    pub(crate) fn before_replay(&self, vfs: &dyn Vfs) -> Option<SyncState> {
        self.read(vfs).state
    }

    /// At a writer's open, holding the sync lock ([`Writers::settle`] settled
    /// on `state`): whether the records above the durability mark that end
    /// the log at `last` may stay as they are (§5.8): this boot's sync state,
    /// no failure, and the appended position exactly at the log's last
    /// record, written under the state's generation (so every one of them was
    /// written in it by a writer that follows this protocol). Records the
    /// generation the writer appends under.
    pub(crate) fn vouches(
        &self,
        vfs: &dyn Vfs,
        state: Option<SyncState>,
        last: (u64, u64, u64),
    ) -> bool {
        let Some(state) = state else {
            return false;
        };
        self.generation.store(state.generation, Ordering::Relaxed);
        !state.failed
            && self.read(vfs).appended.is_some_and(|a| {
                (a.seq, a.segment, a.end) == last && a.generation == state.generation
            })
    }

    /// At a writer's open, holding the sync lock ([`Writers::settle`] settled
    /// on `state`), when no record is above the durability mark: a sync state
    /// that is failed, missing, of another boot or unreadable is written
    /// afresh with a new generation (nothing unproven is in the log, so the
    /// failure lost only records no one may acknowledge now: every writer
    /// that appended before this write holds the old generation, and
    /// refuses). Records the generation this writer appends under.
    pub(crate) fn adopt(&self, vfs: &dyn Vfs, state: Option<SyncState>) -> io::Result<()> {
        if let Some(s) = state.filter(|s| !s.failed) {
            self.generation.store(s.generation, Ordering::Relaxed);
            return Ok(());
        }
        let s = SyncState {
            generation: new_generation(state.map(|s| s.generation)),
            ..self.fresh_state()
        };
        self.generation.store(s.generation, Ordering::Relaxed);
        *lock(&self.settled) = Some(s);
        self.write_state(vfs, &s)
    }

    /// Runs `f`, an fsync of the log outside the group commit (an open's cut
    /// of a torn tail, or its close of a last segment the history does not
    /// continue in), under the sync lock; its failure is recorded for every
    /// process, as a failed fsync of [`Writers::fsync`]'s is.
    pub(crate) fn guarded(
        &self,
        vfs: &dyn Vfs,
        f: impl FnOnce() -> crate::engine::error::Result<()>,
    ) -> crate::engine::error::Result<()> {
        let _g = self
            .lock(vfs)
            .map_err(|e| crate::engine::error::Error::io("take the sync lock", self.dir.join(SYNC_LOCK_FILE), e))?;
        // In flight while it runs, as [`Writers::fsync`]'s: a writer that dies
        // during it leaves the flag, read as a failure, since the failure it
        // may have been told of is told to no later fsync.
        let mut s = self.read(vfs).state.unwrap_or_else(|| self.fresh_state());
        s.failed |= s.in_flight;
        s.in_flight = true;
        self.write_state(vfs, &s)
            .map_err(|e| crate::engine::error::Error::io("write the sync state", self.dir.join(SHARED_FILE), e))?;
        let r = f();
        s.in_flight = false;
        s.failed |= r.is_err();
        let _ = self.write_state(vfs, &s);
        // This writer's own write of the state: what its open settled on
        // moves with it (a copy after this cut finds it so, §5.8 "Read").
        *lock(&self.settled) = Some(s);
        r
    }

    /// Runs `install` (an open's copy of the active segment, §5.5 step 4)
    /// under the sync lock, then starts a new generation with no failure,
    /// and records its last record as the appended position.
    pub(crate) fn replace(
        &self,
        vfs: &dyn Vfs,
        last: (u64, u64, u64),
        probe: impl FnOnce() -> crate::engine::error::Result<()>,
        install: impl FnOnce() -> crate::engine::error::Result<()>,
    ) -> crate::engine::error::Result<()> {
        let _g = self
            .lock(vfs)
            .map_err(|e| crate::engine::error::Error::io("take the sync lock", self.dir.join(SYNC_LOCK_FILE), e))?;
        let found = self.read(vfs).state;
        // The copy writes what the open read: only if no failure came since
        // (it may have dropped the very bytes the open replayed).
        let settled = *lock(&self.settled);
        let moved = match (settled, found) {
            (None, None) => false,
            (Some(a), Some(b)) => a.generation != b.generation || a.failed != b.failed || b.in_flight,
            _ => true,
        };
        if moved {
            return Err(crate::engine::error::Error::io(
                "copy the last segment",
                self.dir.join(SHARED_FILE),
                io::Error::other(
                    "the sync state changed since this writer's open (an fsync failed or \
                     started a new generation in another process): nothing was written",
                ),
            ));
        }
        // An fsync of the old file first: a failure of it that no fsync has
        // reported yet (the kernel's own writeback) is reported here, and
        // recorded, before its bytes are read for the copy.
        if let Err(e) = probe() {
            let mut s = found.unwrap_or_else(|| self.fresh_state());
            s.failed = true;
            let _ = self.write_state(vfs, &s);
            return Err(e);
        }
        let before = found.map(|s| s.generation);
        install()?;
        let s = SyncState {
            generation: new_generation(before),
            ..self.fresh_state()
        };
        self.generation.store(s.generation, Ordering::Relaxed);
        *lock(&self.settled) = Some(s);
        self.publish(vfs, last.0, last.1, last.2);
        self.write_state(vfs, &s).map_err(|e| {
            crate::engine::error::Error::io("write the sync state", self.dir.join(SHARED_FILE), e)
        })
    }

    /// One fsync of the log, under the sync lock (FORMAT.md §5.8), for the
    /// records up to `own` (its segment and end): `Ok(false)` when the
    /// durability mark already covers them (`covered_ok`) and nothing was
    /// fsynced, `Ok(true)` after `fsync` succeeded and the mark was raised to
    /// the furthest record appended before it. Refused, with nothing fsynced,
    /// when an fsync failed or died since the last copy, or the segment was
    /// copied since this writer appended. A failed `fsync` is recorded for
    /// every process before the lock is released. A writer that does not hold
    /// the writer lock (`appenders`: another process may be appending) first
    /// waits for the one that holds it ([`Writers::wait_for_appender`]).
    pub(crate) fn fsync(
        &self,
        vfs: &dyn Vfs,
        mark: &Mutex<MarkWriter>,
        own: Mark,
        covered_ok: bool,
        appenders: bool,
        fsync: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<bool> {
        if self.alone.load(Ordering::Acquire) {
            return self.fsync_alone(vfs, mark, own, fsync);
        }
        let _g = self.lock(vfs)?;
        let found = self.read(vfs);
        let on_disk = self.read_mark(vfs);
        let mut state = found.state;
        if let Some(s) = state.as_mut().filter(|s| s.in_flight) {
            // Its writer died during its fsync, which may have failed unseen.
            s.in_flight = false;
            s.failed = true;
            self.write_state(vfs, s)?;
        }
        // Before the mark is believed: only in the generation this writer
        // appended under does a position name its record. A new one began
        // after a failure, a copy or a lost state: its record may be gone,
        // and another's may hold its seq (FORMAT.md §5.8, "The invariant").
        let mine = self.generation.load(Ordering::Relaxed);
        let Some(mut state) = state else {
            return Err(io::Error::other(format!(
                "the sync state in {} is missing or unreadable: whether an earlier fsync \
                 failed is unknown (the next writer's open starts a new generation)",
                self.dir.join(SHARED_FILE).display()
            )));
        };
        if state.generation != mine {
            return Err(io::Error::other(
                "another writer's open started a new sync generation since this writer \
                 appended (after a failed fsync, or to copy the active segment): whether \
                 this batch is in the log is not known",
            ));
        }
        if covered_ok && on_disk.is_some_and(|m| m.seq >= own.seq) {
            return Ok(false);
        }
        if state.failed {
            return Err(io::Error::other(
                "an fsync of the log failed in another writer, or its writer died during it: \
                 what it covered is not known durable (the next writer's open copies the segment)",
            ));
        }
        // A record appended while this writer waited is covered by its fsync.
        let appended = match appenders && self.wait_for_appender(vfs) {
            true => self.read(vfs).appended,
            false => found.appended,
        };
        let target = match appended {
            Some(a)
                if a.generation == mine
                    && a.segment == own.segment
                    && a.seq > own.seq
                    && a.end > own.end =>
            {
                Mark {
                    seq: a.seq,
                    segment: a.segment,
                    end: a.end,
                }
            }
            _ => own,
        };
        state.in_flight = true;
        self.write_state(vfs, &state)?;
        match fsync() {
            Ok(()) => {
                // Before anything it covers is acknowledged (§5.7).
                let marked = {
                    let mut m = lock(mark);
                    m.write_above(vfs, &self.dir, target, on_disk, self.kept_mark(vfs).as_deref());
                    m.written_seq() >= target.seq
                };
                state.in_flight = false;
                let published = self.write_state(vfs, &state).is_ok();
                // A long-lived writer whose fsync covered a record of its own
                // covered every other process's too (none can append while it
                // holds the writer lock), and the mark on disk says so: a
                // one-shot writer still waiting for the sync lock acknowledges
                // under it without an fsync of its own. From now on this
                // writer is the store's only syncer.
                if published
                    && marked
                    && target.seq > self.alone_after.load(Ordering::Relaxed)
                {
                    self.alone.store(true, Ordering::Release);
                }
                Ok(true)
            }
            Err(e) => {
                state.in_flight = false;
                state.failed = true;
                let _ = self.write_state(vfs, &state);
                Err(e)
            }
        }
    }

    /// Under the sync lock, before an fsync: while another process holds the
    /// writer lock (it is catching up or appending, and will want this fsync
    /// next), waits for it to let go, up to [`APPENDER_WAIT`], so that one
    /// fsync covers its record too (a commit delay that waits only for an
    /// appender known to be there). Whether it waited at all.
    fn wait_for_appender(&self, vfs: &dyn Vfs) -> bool {
        let path = self.dir.join(LOCK_FILE);
        let started = std::time::Instant::now();
        let mut waited = false;
        while vfs.lock_busy(&path) {
            waited = true;
            let left = APPENDER_WAIT.saturating_sub(started.elapsed());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(APPENDER_POLL.min(left));
        }
        waited
    }

    /// The fsync of a long-lived writer that is the store's only syncer
    /// (FORMAT.md §5.8): no other process has a record to sync, none can
    /// append before this writer lets the writer lock go, and none writes the
    /// mark (the one that might still wait for the sync lock finds its
    /// records under it), so neither the sync lock nor `SHARED` is needed. A
    /// failure is still written to `SHARED`, under the sync lock, and ends it.
    fn fsync_alone(
        &self,
        vfs: &dyn Vfs,
        mark: &Mutex<MarkWriter>,
        own: Mark,
        fsync: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<bool> {
        match fsync() {
            Ok(()) => {
                lock(mark).write(vfs, &self.dir, own);
                Ok(true)
            }
            Err(e) => {
                self.alone.store(false, Ordering::Release);
                if let Ok(_g) = self.lock(vfs) {
                    let mut state = self.read(vfs).state.unwrap_or_else(|| self.fresh_state());
                    state.failed = true;
                    let _ = self.write_state(vfs, &state);
                }
                Err(e)
            }
        }
    }

    /// Writes the mark `m` under the sync lock, unless the one on disk is at
    /// or past it (a mark that says less proves less: never written over a
    /// higher one).
    pub(crate) fn mark(&self, vfs: &dyn Vfs, mark: &Mutex<MarkWriter>, m: Mark) {
        if let Ok(_g) = self.lock(vfs) {
            let on_disk = self.read_mark(vfs);
            let kept = self.kept_mark(vfs);
            lock(mark).write_above(vfs, &self.dir, m, on_disk, kept.as_deref());
        }
    }
}

/// The sync lock, held until dropped.
pub(crate) enum SyncGuard<'a> {
    /// On the kept-open `SYNC`, with this process's threads kept out.
    Kept(#[allow(dead_code)] MutexGuard<'a, ()>, Arc<dyn SharedFile>),
    /// Taken by path (`Vfs::try_lock`).
    Path(#[allow(dead_code)] Box<dyn Send + Sync>),
}

impl Drop for SyncGuard<'_> {
    fn drop(&mut self) {
        if let SyncGuard::Kept(_, h) = self {
            // A lock whose release fails is released when the file closes
            // (the process's exit at the latest).
            let _ = h.unlock();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOT: [u8; 16] = [7; 16];

    #[test]
    fn both_slots_round_trip_and_every_flipped_bit_or_cut_is_refused() {
        let a = Appended {
            boot: BOOT,
            seq: 41,
            segment: 1,
            end: 4096,
            generation: 0x5eed,
        };
        let s = SyncState {
            boot: BOOT,
            generation: 3,
            in_flight: true,
            failed: false,
        };
        let (ea, es) = (encode_appended(&a), encode_sync_state(&s));
        assert_eq!(decode_appended(&ea), Ok(a));
        assert_eq!(decode_sync_state(&es), Ok(s));
        for (bytes, name) in [(ea, "appended"), (es, "sync state")] {
            for i in 0..bytes.len() * 8 {
                let mut c = bytes;
                c[i / 8] ^= 1 << (i % 8);
                assert!(
                    decode_appended(&c).is_err() && decode_sync_state(&c).is_err(),
                    "{name}: bit {i} flipped still decodes"
                );
            }
            for n in 0..bytes.len() {
                assert!(decode_appended(&bytes[..n]).is_err(), "{name} cut at {n}");
                assert!(decode_sync_state(&bytes[..n]).is_err(), "{name} cut at {n}");
            }
        }
        // Each slot's magic keeps it from being read as the other.
        assert!(decode_sync_state(&ea).is_err() && decode_appended(&es).is_err());
        assert!(decode_appended(&[0u8; SHARED_SLOT_LEN]).is_err());
    }

    #[test]
    fn slots_of_another_boot_or_an_unknown_boot_are_ignored() {
        let a = Appended {
            boot: BOOT,
            seq: 2,
            segment: 1,
            end: 90,
            generation: 9,
        };
        let s = SyncState {
            boot: BOOT,
            generation: 0,
            in_flight: false,
            failed: false,
        };
        let mut bytes = encode_appended(&a).to_vec();
        bytes.extend_from_slice(&encode_sync_state(&s));
        assert_eq!(
            decode_shared(&bytes, &BOOT),
            Found {
                appended: Some(a),
                state: Some(s)
            }
        );
        assert_eq!(decode_shared(&bytes, &[8; 16]), Found::default());
        let zeros = Appended { boot: [0; 16], ..a };
        let mut unknown = encode_appended(&zeros).to_vec();
        unknown.extend_from_slice(&encode_sync_state(&SyncState { boot: [0; 16], ..s }));
        assert_eq!(decode_shared(&unknown, &[0; 16]), Found::default());
        // A file cut inside the second slot keeps the first.
        assert_eq!(decode_shared(&bytes[..100], &BOOT).appended, Some(a));
        assert_eq!(decode_shared(&bytes[..100], &BOOT).state, None);
    }
}
