//! A simulated filesystem behind [`Vfs`], for crash and fault tests and fuzzers.
//! Test support compiled only under the `sim` feature and hidden from the docs:
//! not part of runlog's API, and free to change in any release.
//!
//! # Fault model
//!
//! What the simulator assumes of a disk and a filesystem, and what it breaks:
//!
//! * **Page cache.** Every write, truncate, create, rename and unlink is seen at
//!   once by in-process reads (as on Linux). Separately, the simulator keeps for
//!   each file its *durable* bytes and its *pending* (unsynced) writes and
//!   truncates, and for each directory its durable entries and its pending
//!   creates, renames and unlinks.
//! * **Durability.** `sync_data`/`sync_all` make every pending write and
//!   truncate of that file durable (size included). `sync_dir` makes that
//!   directory's pending entry operations durable. Nothing else does: a new
//!   file's *name* is durable only after its directory is synced, its *data*
//!   only after the file is synced; a rename or unlink likewise needs the
//!   directory sync.
//! * **Crash.** At a crash a subset of the pending operations persists. Each
//!   pending write is absent, whole, or persisted sector by sector (512-byte
//!   sectors aligned to the file offset): each sector of it old, new, garbage or
//!   zeros, within the bytes the write covers — an overwrite in place too, as
//!   FORMAT.md §7 says of any write not yet fsynced. So a write over bytes that
//!   were durable may destroy them; runlog never writes over a record it has
//!   acknowledged (its only overwrite in place is the durability mark, which a
//!   torn write leaves failing its checksum). Bytes past the old end that no
//!   persisted write covers read as zeros. Each pending
//!   directory operation is applied or not; a rename is atomic.
//! * **Persistence models.** [`Persistence::Ordered`] (ext4 `data=ordered`-like):
//!   directory operations persist as a prefix of the order they were issued in
//!   (one journal), and a file's writes persist as a prefix of its own order,
//!   the last persisted one possibly torn. [`Persistence::WeakDirs`]: directory
//!   operations in any subset, a file's writes still as a prefix.
//!   [`Persistence::Weak`] (ALICE's weakest model): any subset of anything,
//!   including a write persisted with a hole before later sectors or writes.
//! * **Failed fsync (fsyncgate), two ways ([`FailedFsync`]).** When
//!   `sync_data`/`sync_all` fails, the file's pending writes never reach the
//!   disk, whoever wrote them: every "process" (every open of one `SimFs`)
//!   shares one page cache, as processes on one machine do. Under
//!   [`FailedFsync::KeepClean`] (the default) the pages stay in the cache,
//!   marked clean: reads still see the new bytes, and a later successful fsync
//!   does not write them. Under [`FailedFsync::DropPages`] the pages are
//!   dropped: reads return the durable bytes again (zeros where the durable
//!   file is shorter; the file keeps its size), for every process. Either way
//!   the failure is reported once, to the fsync that met it (as Linux reports
//!   it to one caller). A failed `sync_dir` leaves the directory's operations
//!   pending (they may or may not persist).
//! * **Injected faults.** The Nth operation (every [`Vfs`] and [`VfsFile`] call
//!   counts, from 0) fails with EIO, ENOSPC, a short write or EINTR, once or from
//!   then on (a persistent EINTR: the next [`EINTR_BURST`] applicable calls).
//!   A failing call has no effect, except a short write (which writes
//!   the first half) and a failing fsync (above). EINTR is injected only where
//!   POSIX allows it for regular files (write, fsync, ftruncate, directory
//!   fsync); a short write only on writes; ENOSPC only on calls that may
//!   allocate (writes, creates, renames, truncates, fsyncs).
//! * **Not modelled.** Bit rot of durable data, misdirected writes, lying
//!   fsyncs, a `LOCK` file (locks are in memory only; no file is created),
//!   file permissions, symlinks, cross-directory renames. Directories have a
//!   mode: [`Vfs::create_dir`] makes them 0700 (as `RealFs` does),
//!   [`SimFs::set_dir_mode`] changes it (chmod), and crashes keep it.
//!
//! # Setting up a test
//!
//! [`SimFs::mkdir`], [`SimFs::put`], [`SimFs::set_files`] and
//! [`SimFs::set_dir_mode`] shape the filesystem as if it had been so before the
//! test and synced: they are durable at once, are not counted as operations and
//! are never faulted. [`SimFs::get`] and [`SimFs::files`] read what in-process
//! reads see, uncounted too.
//!
//! All randomness comes from a seed ([`SimRng`]); the simulator is deterministic
//! given the order of calls.

use super::vfs::{FileBytes, LockAttempt, Vfs, VfsFile};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// A persistent EINTR fires this many times, then stops: an EINTR that never
/// ends is a hung system, which no retry loop survives.
pub const EINTR_BURST: u64 = 16;

/// Sector size of the simulated disk.
pub const SECTOR: u64 = 512;

/// splitmix64: a tiny deterministic generator for simulations.
#[derive(Debug, Clone)]
pub struct SimRng(u64);

impl SimRng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> SimRng {
        SimRng(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
    /// True with probability 1/`n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// Which subsets of pending operations may persist at a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// Directory operations persist in issue order; a file's writes in its order.
    Ordered,
    /// Directory operations persist in any subset; a file's writes in its order.
    WeakDirs,
    /// Any subset of anything (ALICE's weak model).
    Weak,
}

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// `EIO`.
    Eio,
    /// `ENOSPC`.
    Enospc,
    /// A write writes only the first half of its buffer.
    ShortWrite,
    /// `EINTR`.
    Eintr,
}

/// What a failed `sync_data`/`sync_all` does to the file's unsynced writes
/// (FORMAT.md §7): either way they never reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailedFsync {
    /// The pages stay in the cache, marked clean: reads see the new bytes.
    #[default]
    KeepClean,
    /// The pages are dropped: reads return the durable bytes, for everyone.
    DropPages,
}

/// A fault to inject at operation `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// Index of the first operation that fails (every call counts, from 0).
    pub at: u64,
    /// The failure.
    pub kind: FaultKind,
    /// Fail every applicable operation from `at` on, not only the first.
    pub persistent: bool,
}

/// The operations, for fault applicability and crash-point reporting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `Vfs::create_dir`.
    CreateDir,
    /// `Vfs::dir_mode`.
    DirMode,
    /// `Vfs::list`.
    List,
    /// `Vfs::create_new`.
    CreateNew,
    /// `Vfs::open_write`.
    OpenWrite,
    /// `Vfs::read` / `read_mapped`.
    Read,
    /// `Vfs::rename`.
    Rename,
    /// `Vfs::remove`.
    Remove,
    /// `Vfs::remove_dir`.
    RemoveDir,
    /// `Vfs::sync_dir`.
    SyncDir,
    /// `Vfs::try_lock`.
    TryLock,
    /// `Vfs::lock_busy`.
    LockProbe,
    /// `VfsFile::write_at`.
    Write,
    /// `VfsFile::sync_data` / `sync_all`.
    Fsync,
    /// `VfsFile::set_len`.
    SetLen,
}

impl Op {
    /// Changes what is on disk or what may persist: a crash boundary.
    pub fn mutates(self) -> bool {
        use Op::*;
        matches!(
            self,
            CreateDir | CreateNew | Rename | Remove | RemoveDir | SyncDir | Write | Fsync | SetLen
        )
    }
    /// Whether `kind` can be injected into this operation.
    pub fn accepts(self, kind: FaultKind) -> bool {
        use Op::*;
        match kind {
            FaultKind::Eio => true,
            FaultKind::ShortWrite => self == Write,
            FaultKind::Eintr => {
                matches!(self, Write | Fsync | SetLen | SyncDir | Rename | CreateDir)
            }
            FaultKind::Enospc => matches!(
                self,
                Write | CreateNew | CreateDir | Rename | SetLen | Fsync | SyncDir
            ),
        }
    }
}

type Ino = usize;

#[derive(Debug, Clone)]
enum FileOp {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Debug, Clone)]
enum DirOp {
    Link {
        name: String,
        ino: Ino,
    },
    Unlink {
        name: String,
    },
    Rename {
        from: String,
        to: String,
        ino: Ino,
    },
    /// A rename from another directory (`from_dir`), pending in the
    /// destination: atomic at a crash (both entries change, or neither), as a
    /// journaling filesystem commits a rename, and durable once the destination
    /// is synced.
    MoveIn {
        from_dir: Ino,
        from: String,
        to: String,
        ino: Ino,
    },
}

#[derive(Debug, Clone, Default)]
struct FileNode {
    durable: Vec<u8>,
    live: Vec<u8>,
    pending: Vec<(u64, FileOp)>,
}

#[derive(Debug, Clone)]
struct DirNode {
    durable: BTreeMap<String, Ino>,
    live: BTreeMap<String, Ino>,
    pending: Vec<(u64, DirOp)>,
    /// Permission bits (`dir_mode`); a mode change is durable at once.
    mode: u32,
}

impl Default for DirNode {
    fn default() -> Self {
        DirNode {
            durable: BTreeMap::new(),
            live: BTreeMap::new(),
            pending: Vec::new(),
            mode: DIR_MODE,
        }
    }
}

/// The mode [`Vfs::create_dir`] gives a directory, as `RealFs` does.
const DIR_MODE: u32 = 0o700;

#[derive(Debug, Clone)]
enum Node {
    File(FileNode),
    Dir(DirNode),
}

/// What happens to one sector of a pending write at a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SectorFate {
    /// The old bytes (zeros past the old end).
    Old,
    /// The bytes written.
    New,
    /// Garbage derived from this seed.
    Garbage(u64),
    /// Zeros.
    Zero,
}

/// What happens to one pending operation at a crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// Lost.
    Absent,
    /// Persisted whole.
    Whole,
    /// A write persisted sector by sector (one entry per sector it touches).
    Sectors(Vec<SectorFate>),
}

/// One pending operation, as listed by [`SimState::pending`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    /// A write of `len` bytes at `offset`, touching `sectors` sectors.
    Write {
        /// The file (inode number).
        ino: usize,
        /// Offset of the write.
        offset: u64,
        /// Bytes written.
        len: u64,
        /// Sectors touched.
        sectors: usize,
    },
    /// A truncate or extend.
    SetLen {
        /// The file (inode number).
        ino: usize,
    },
    /// A directory entry operation (create, rename or unlink).
    Dir {
        /// The directory (inode number).
        ino: usize,
    },
}

type Observer = Box<dyn FnMut(&SimState, u64, Op) + Send>;
type ProbeHook = Box<dyn FnMut() + Send>;
type LockHook = Box<dyn FnMut(&Path) + Send>;

/// The whole simulated filesystem at one instant: what is durable and what is pending.
pub struct SimState {
    nodes: Vec<Node>,
    next_gseq: u64,
    ops: u64,
    fault: Option<Fault>,
    faults_fired: u64,
    durable_changes: u64,
    log: Vec<Op>,
    locks: BTreeSet<PathBuf>,
    observer: Option<Observer>,
    /// Run by `Vfs::lock_busy` after it looked, with the filesystem unlocked.
    probe_hook: Option<ProbeHook>,
    /// Run by `Vfs::try_lock` before it tries, with the filesystem unlocked.
    lock_hook: Option<LockHook>,
    /// The boot this filesystem is in: a crash image starts the next one.
    boot: u64,
    /// What a failed fsync does to the file's unsynced writes.
    failed_fsync: FailedFsync,
    /// The next call of this operation fails so (then it is cleared).
    fail_next: Option<(Op, FaultKind)>,
}

impl fmt::Debug for SimState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimState")
            .field("ops", &self.ops)
            .field("pending", &self.pending().len())
            .finish_non_exhaustive()
    }
}

/// A simulated filesystem. Clones share the same state.
#[derive(Clone)]
pub struct SimFs {
    state: Arc<Mutex<SimState>>,
}

impl fmt::Debug for SimFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimFs").finish_non_exhaustive()
    }
}

impl Default for SimFs {
    fn default() -> Self {
        SimFs::new()
    }
}

fn err(kind: io::ErrorKind, msg: impl Into<String>) -> io::Error {
    io::Error::new(kind, msg.into())
}

fn fault_error(kind: FaultKind) -> io::Error {
    let code = match kind {
        FaultKind::Eio => libc::EIO,
        FaultKind::Enospc => libc::ENOSPC,
        FaultKind::Eintr => libc::EINTR,
        FaultKind::ShortWrite => unreachable!("a short write is not an error"),
    };
    io::Error::from_raw_os_error(code)
}

/// Splits an absolute path into its parent components and final name.
fn components(path: &Path) -> io::Result<Vec<String>> {
    let mut out = Vec::new();
    for c in path.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(s) => out.push(
                s.to_str()
                    .ok_or_else(|| err(io::ErrorKind::InvalidInput, "non-UTF-8 path"))?
                    .to_string(),
            ),
            _ => {
                return Err(err(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not a plain absolute path", path.display()),
                ));
            }
        }
    }
    if !path.is_absolute() {
        return Err(err(io::ErrorKind::InvalidInput, "sim paths are absolute"));
    }
    Ok(out)
}

fn garbage(seed: u64, len: usize) -> Vec<u8> {
    let mut r = SimRng::new(seed);
    (0..len).map(|_| r.next_u64() as u8).collect()
}

/// Sector indices touched by a write of `len` bytes at `offset`.
fn sector_span(offset: u64, len: u64) -> (u64, u64) {
    let first = offset / SECTOR;
    let end = (offset + len).div_ceil(SECTOR).max(first + 1);
    (first, end)
}

fn write_into(buf: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let end = offset as usize + data.len();
    if buf.len() < end {
        buf.resize(end, 0);
    }
    buf[offset as usize..end].copy_from_slice(data);
}

impl SimState {
    fn new() -> SimState {
        SimState {
            nodes: vec![Node::Dir(DirNode::default())],
            next_gseq: 0,
            ops: 0,
            fault: None,
            faults_fired: 0,
            durable_changes: 0,
            log: Vec::new(),
            locks: BTreeSet::new(),
            observer: None,
            probe_hook: None,
            lock_hook: None,
            boot: 1,
            failed_fsync: FailedFsync::default(),
            fail_next: None,
        }
    }

    fn dir(&self, ino: Ino) -> io::Result<&DirNode> {
        match &self.nodes[ino] {
            Node::Dir(d) => Ok(d),
            Node::File(_) => Err(err(io::ErrorKind::NotADirectory, "not a directory")),
        }
    }

    fn dir_mut(&mut self, ino: Ino) -> &mut DirNode {
        match &mut self.nodes[ino] {
            Node::Dir(d) => d,
            Node::File(_) => unreachable!("checked to be a directory"),
        }
    }

    fn file_mut(&mut self, ino: Ino) -> &mut FileNode {
        match &mut self.nodes[ino] {
            Node::File(f) => f,
            Node::Dir(_) => unreachable!("a file handle is always a file"),
        }
    }

    /// The live inode at `path`.
    fn lookup(&self, path: &Path) -> io::Result<Ino> {
        let mut ino = 0;
        for c in components(path)? {
            ino = *self.dir(ino)?.live.get(&c).ok_or_else(|| {
                err(
                    io::ErrorKind::NotFound,
                    format!("{}: no such file", path.display()),
                )
            })?;
        }
        Ok(ino)
    }

    /// A sync of directory `dir` commits every cross-directory move it takes
    /// part in, on both sides (as a journaling filesystem commits a rename):
    /// the source entry of each move into `dir` leaves the source durably, and
    /// each move out of `dir` still pending in its destination lands there.
    fn commit_moves(&mut self, dir: Ino) {
        let into: Vec<(Ino, String, Ino)> = self
            .dir(dir)
            .map(|d| {
                d.pending
                    .iter()
                    .filter_map(|(_, op)| match op {
                        DirOp::MoveIn {
                            from_dir,
                            from,
                            ino,
                            ..
                        } => Some((*from_dir, from.clone(), *ino)),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        for (from_dir, from, ino) in into {
            let d = self.dir_mut(from_dir);
            if d.durable.get(&from) == Some(&ino) {
                d.durable.remove(&from);
            }
        }
        for other in 0..self.nodes.len() {
            if other == dir {
                continue;
            }
            let Node::Dir(d) = &mut self.nodes[other] else {
                continue;
            };
            d.pending.retain(|(_, op)| match op {
                DirOp::MoveIn {
                    from_dir, to, ino, ..
                } if *from_dir == dir => {
                    d.durable.insert(to.clone(), *ino);
                    false
                }
                _ => true,
            });
        }
    }

    /// The live parent of `path`, the final name, and the inode it names.
    fn entry(&self, path: &Path) -> io::Result<(Ino, String, Ino)> {
        let (parent, name) = self.parent(path)?;
        let ino = *self.dir(parent)?.live.get(&name).ok_or_else(|| {
            err(
                io::ErrorKind::NotFound,
                format!("{}: no such file or directory", path.display()),
            )
        })?;
        Ok((parent, name, ino))
    }

    /// Whether directory `dir` is `target` or holds it, at any depth (live).
    fn contains(&self, dir: Ino, target: Ino) -> bool {
        if dir == target {
            return true;
        }
        match &self.nodes[dir] {
            Node::Dir(d) => d.live.values().any(|&i| self.contains(i, target)),
            Node::File(_) => false,
        }
    }

    /// The live parent directory of `path` and the final name.
    fn parent(&self, path: &Path) -> io::Result<(Ino, String)> {
        let mut c = components(path)?;
        let name = c
            .pop()
            .ok_or_else(|| err(io::ErrorKind::InvalidInput, "the root has no parent"))?;
        let parent = self.lookup(&c.iter().fold(PathBuf::from("/"), |p, s| p.join(s)))?;
        self.dir(parent)?;
        Ok((parent, name))
    }

    fn gseq(&mut self) -> u64 {
        self.next_gseq += 1;
        self.next_gseq
    }

    fn dir_op(&mut self, dir: Ino, op: DirOp) {
        let g = self.gseq();
        let d = self.dir_mut(dir);
        match &op {
            DirOp::Link { name, ino } => {
                d.live.insert(name.clone(), *ino);
            }
            DirOp::Unlink { name } => {
                d.live.remove(name);
            }
            DirOp::Rename { from, to, ino } => {
                d.live.remove(from);
                d.live.insert(to.clone(), *ino);
            }
            DirOp::MoveIn { to, ino, .. } => {
                d.live.insert(to.clone(), *ino);
            }
        }
        if let DirOp::MoveIn { from_dir, from, .. } = &op {
            let (from_dir, from) = (*from_dir, from.clone());
            self.dir_mut(from_dir).live.remove(&from);
        }
        self.dir_mut(dir).pending.push((g, op));
    }

    fn file_op(&mut self, ino: Ino, op: FileOp) {
        let g = self.gseq();
        let f = self.file_mut(ino);
        match &op {
            FileOp::Write { offset, data } => write_into(&mut f.live, *offset, data),
            FileOp::SetLen(n) => f.live.resize(*n as usize, 0),
        }
        f.pending.push((g, op));
    }

    /// Counts one call, runs the crash observer before a mutating one, and
    /// returns the fault to inject into it, if any.
    fn begin(&mut self, op: Op) -> Option<FaultKind> {
        let n = self.ops;
        self.ops += 1;
        self.log.push(op);
        if op.mutates()
            && let Some(mut obs) = self.observer.take()
        {
            obs(self, n, op);
            self.observer = Some(obs);
        }
        if let Some((o, k)) = self.fail_next
            && o == op
            && op.accepts(k)
        {
            self.fail_next = None;
            self.faults_fired += 1;
            return Some(k);
        }
        let f = self.fault?;
        let hit = n == f.at || (f.persistent && n > f.at);
        let spent = f.kind == FaultKind::Eintr && self.faults_fired >= EINTR_BURST;
        if hit && !spent && op.accepts(f.kind) {
            self.faults_fired += 1;
            Some(f.kind)
        } else {
            None
        }
    }

    /// Calls made so far.
    pub fn ops(&self) -> u64 {
        self.ops
    }

    /// How many syncs so far made something durable (a crash image can differ
    /// from an earlier one with nothing pending only if this changed).
    pub fn durable_changes(&self) -> u64 {
        self.durable_changes
    }

    /// The pending operations, oldest first. A crash [`choice`](Self::image)
    /// assigns one [`Fate`] to each, in this order.
    pub fn pending(&self) -> Vec<Pending> {
        self.pending_ops()
            .into_iter()
            .map(|(_, ino, op)| match op {
                PendingRef::File(FileOp::Write { offset, data }) => {
                    let (a, b) = sector_span(*offset, data.len() as u64);
                    Pending::Write {
                        ino,
                        offset: *offset,
                        len: data.len() as u64,
                        sectors: (b - a) as usize,
                    }
                }
                PendingRef::File(FileOp::SetLen(_)) => Pending::SetLen { ino },
                PendingRef::Dir(_) => Pending::Dir { ino },
            })
            .collect()
    }

    fn pending_ops(&self) -> Vec<(u64, Ino, PendingRef<'_>)> {
        let mut v = Vec::new();
        for (ino, n) in self.nodes.iter().enumerate() {
            match n {
                Node::File(f) => v.extend(
                    f.pending
                        .iter()
                        .map(|(g, o)| (*g, ino, PendingRef::File(o))),
                ),
                Node::Dir(d) => {
                    v.extend(d.pending.iter().map(|(g, o)| (*g, ino, PendingRef::Dir(o))))
                }
            }
        }
        v.sort_by_key(|x| x.0);
        v
    }

    /// The fates worth trying for each pending operation: absent, whole, and for
    /// a write torn after the first sector, at the middle and before the last,
    /// garbage or zeros in its last sector, and (weak model) a hole in the middle.
    fn candidates(&self, model: Persistence, seed: u64) -> Vec<Vec<Fate>> {
        self.pending()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut c = vec![Fate::Absent, Fate::Whole];
                if let Pending::Write { sectors: n, .. } = *p {
                    let mut torn = BTreeSet::new();
                    for k in [1, n / 2, n.saturating_sub(1)] {
                        if k > 0 && k < n {
                            torn.insert(k);
                        }
                    }
                    for k in torn {
                        c.push(Fate::Sectors(
                            (0..n)
                                .map(|s| {
                                    if s < k {
                                        SectorFate::New
                                    } else {
                                        SectorFate::Old
                                    }
                                })
                                .collect(),
                        ));
                    }
                    let last = |f: SectorFate| {
                        Fate::Sectors(
                            (0..n)
                                .map(|s| if s + 1 < n { SectorFate::New } else { f })
                                .collect(),
                        )
                    };
                    c.push(last(SectorFate::Garbage(seed ^ (i as u64) << 32)));
                    c.push(last(SectorFate::Zero));
                    if model == Persistence::Weak && n >= 3 {
                        c.push(Fate::Sectors(
                            (0..n)
                                .map(|s| {
                                    if s == n / 2 {
                                        SectorFate::Old
                                    } else {
                                        SectorFate::New
                                    }
                                })
                                .collect(),
                        ));
                    }
                }
                c
            })
            .collect()
    }

    /// Whether `choice` is a crash outcome the persistence model allows.
    pub fn allowed(&self, model: Persistence, choice: &[Fate]) -> bool {
        if model == Persistence::Weak {
            return true;
        }
        let ops = self.pending_ops();
        let mut dir_gap = false;
        let mut file_gap: BTreeMap<Ino, bool> = BTreeMap::new();
        for ((_, ino, op), fate) in ops.iter().zip(choice) {
            let gap = match op {
                PendingRef::Dir(_) => &mut dir_gap,
                PendingRef::File(_) => file_gap.entry(*ino).or_default(),
            };
            let ordered = match op {
                PendingRef::Dir(_) => model == Persistence::Ordered,
                PendingRef::File(_) => true,
            };
            if ordered && *gap && *fate != Fate::Absent {
                return false;
            }
            if *fate != Fate::Whole {
                *gap = true;
            }
        }
        true
    }

    fn repair(&self, model: Persistence, choice: &mut [Fate]) {
        // Everything before the last persisted op of a file (and, ordered, of
        // the directory journal) persisted whole.
        let ops = self.pending_ops();
        let mut last: BTreeMap<Option<Ino>, usize> = BTreeMap::new();
        for (i, (_, ino, op)) in ops.iter().enumerate() {
            let key = match op {
                PendingRef::Dir(_) => None,
                PendingRef::File(_) => Some(*ino),
            };
            if choice[i] != Fate::Absent {
                last.insert(key, i);
            }
        }
        for (i, (_, ino, op)) in ops.iter().enumerate() {
            let key = match op {
                PendingRef::Dir(_) if model != Persistence::Ordered => continue,
                PendingRef::Dir(_) => None,
                PendingRef::File(_) => Some(*ino),
            };
            if last.get(&key).is_some_and(|&l| i < l) {
                choice[i] = Fate::Whole;
            }
        }
    }

    /// Crash outcomes to try: all the model allows among the candidate fates when
    /// there are at most `cap`, otherwise `cap` of them drawn from `seed` (always
    /// including "nothing persisted" and "everything persisted").
    pub fn outcomes(&self, model: Persistence, cap: usize, seed: u64) -> Vec<Vec<Fate>> {
        let cands = self.candidates(model, seed);
        let total = cands
            .iter()
            .try_fold(1usize, |acc, c| acc.checked_mul(c.len()));
        if let Some(total) = total.filter(|&t| t <= cap.saturating_mul(8)) {
            let mut out = Vec::new();
            for mut k in 0..total {
                let choice: Vec<Fate> = cands
                    .iter()
                    .map(|c| {
                        let f = c[k % c.len()].clone();
                        k /= c.len();
                        f
                    })
                    .collect();
                if self.allowed(model, &choice) {
                    out.push(choice);
                }
            }
            if out.len() <= cap {
                return out;
            }
        }
        let mut rng = SimRng::new(seed);
        let mut out: Vec<Vec<Fate>> = vec![
            cands.iter().map(|_| Fate::Absent).collect(),
            cands.iter().map(|_| Fate::Whole).collect(),
        ];
        while out.len() < cap.max(2) {
            out.push(self.pick(model, &cands, &mut rng));
        }
        out
    }

    fn pick(&self, model: Persistence, cands: &[Vec<Fate>], rng: &mut SimRng) -> Vec<Fate> {
        let mut choice: Vec<Fate> = cands
            .iter()
            .map(|c| c[rng.below(c.len() as u64) as usize].clone())
            .collect();
        if model != Persistence::Weak {
            self.repair(model, &mut choice);
        }
        choice
    }

    /// One crash outcome drawn from `rng`.
    pub fn sample(&self, model: Persistence, rng: &mut SimRng) -> Vec<Fate> {
        let cands = self.candidates(model, rng.next_u64());
        self.pick(model, &cands, rng)
    }

    /// The filesystem a crash with `choice` leaves: durable bytes plus the chosen
    /// pending operations, nothing pending, no locks, no faults. Operations past
    /// the end of `choice` are absent (`&[]`: only what is durable).
    pub fn image(&self, choice: &[Fate]) -> SimFs {
        let mut nodes: Vec<Node> = self
            .nodes
            .iter()
            .map(|n| match n {
                Node::File(f) => Node::File(FileNode {
                    durable: f.durable.clone(),
                    ..Default::default()
                }),
                Node::Dir(d) => Node::Dir(DirNode {
                    durable: d.durable.clone(),
                    mode: d.mode,
                    ..Default::default()
                }),
            })
            .collect();
        let ops = self.pending_ops();
        assert!(ops.len() >= choice.len(), "one fate per pending operation");
        // The source side of each cross-directory move that persisted.
        let mut moved_out: Vec<(Ino, &String, Ino)> = Vec::new();
        for ((_, ino, op), fate) in ops.iter().zip(choice) {
            if *fate == Fate::Absent {
                continue;
            }
            match (&mut nodes[*ino], op) {
                (Node::File(f), PendingRef::File(FileOp::SetLen(n))) => {
                    f.durable.resize(*n as usize, 0)
                }
                (Node::File(f), PendingRef::File(FileOp::Write { offset, data })) => match fate {
                    Fate::Sectors(sectors) => {
                        persist_sectors(&mut f.durable, *offset, data, sectors)
                    }
                    _ => write_into(&mut f.durable, *offset, data),
                },
                (Node::Dir(d), PendingRef::Dir(op)) => match op {
                    DirOp::Link { name, ino } => {
                        d.durable.insert(name.clone(), *ino);
                    }
                    DirOp::Unlink { name } => {
                        d.durable.remove(name);
                    }
                    DirOp::Rename { from, to, ino } => {
                        if d.durable.get(from) == Some(ino) {
                            d.durable.remove(from);
                        }
                        d.durable.insert(to.clone(), *ino);
                    }
                    DirOp::MoveIn {
                        from_dir,
                        from,
                        to,
                        ino,
                    } => {
                        d.durable.insert(to.clone(), *ino);
                        moved_out.push((*from_dir, from, *ino));
                    }
                },
                _ => unreachable!("pending ops match their node kinds"),
            }
        }
        for (dir, name, ino) in moved_out {
            if let Node::Dir(d) = &mut nodes[dir]
                && d.durable.get(name) == Some(&ino)
            {
                d.durable.remove(name);
            }
        }
        for n in &mut nodes {
            match n {
                Node::File(f) => f.live = f.durable.clone(),
                Node::Dir(d) => d.live = d.durable.clone(),
            }
        }
        let mut s = SimState::new();
        s.nodes = nodes;
        s.boot = self.boot + 1;
        SimFs {
            state: Arc::new(Mutex::new(s)),
        }
    }

    /// Every durable file reachable from the root, by path, with its bytes
    /// (what [`image`](Self::image) with everything absent holds).
    pub fn durable_files(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        self.files(true)
    }

    /// Every file as in-process reads see it.
    pub fn live_files(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        self.files(false)
    }

    fn files(&self, durable: bool) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![(PathBuf::from("/"), 0usize)];
        while let Some((p, ino)) = stack.pop() {
            match &self.nodes[ino] {
                Node::Dir(d) => {
                    let entries = if durable { &d.durable } else { &d.live };
                    for (name, i) in entries {
                        stack.push((p.join(name), *i));
                    }
                }
                Node::File(f) => {
                    out.insert(
                        p,
                        if durable {
                            f.durable.clone()
                        } else {
                            f.live.clone()
                        },
                    );
                }
            }
        }
        out
    }
}

#[derive(Debug, Clone, Copy)]
enum PendingRef<'a> {
    File(&'a FileOp),
    Dir(&'a DirOp),
}

fn persist_sectors(buf: &mut Vec<u8>, offset: u64, data: &[u8], sectors: &[SectorFate]) {
    let (first, _) = sector_span(offset, data.len() as u64);
    let end = offset + data.len() as u64;
    for (i, fate) in sectors.iter().enumerate() {
        let s = (first + i as u64) * SECTOR;
        let (a, b) = (s.max(offset), (s + SECTOR).min(end));
        if a >= b {
            continue;
        }
        let bytes = match fate {
            SectorFate::Old => continue,
            SectorFate::New => data[(a - offset) as usize..(b - offset) as usize].to_vec(),
            SectorFate::Garbage(seed) => garbage(seed ^ s, (b - a) as usize),
            SectorFate::Zero => vec![0; (b - a) as usize],
        };
        write_into(buf, a, &bytes);
    }
}

impl SimFs {
    /// An empty filesystem holding only the root directory `/`.
    pub fn new() -> SimFs {
        SimFs {
            state: Arc::new(Mutex::new(SimState::new())),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SimState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the current state (durable and pending), e.g. to take crash images.
    pub fn with_state<R>(&self, f: impl FnOnce(&SimState) -> R) -> R {
        f(&self.lock())
    }

    /// Calls made so far.
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// Every call made so far, in order (index = operation number).
    pub fn op_log(&self) -> Vec<Op> {
        self.lock().log.clone()
    }

    /// Faults injected so far.
    pub fn faults_fired(&self) -> u64 {
        self.lock().faults_fired
    }

    /// Injects `fault` (replacing any earlier one); `None` clears it.
    pub fn inject(&self, fault: Option<Fault>) {
        self.lock().fault = fault;
    }

    /// Makes the next call of an operation fail so (once), whatever its
    /// index: for a test that holds its "processes" at named points and fails
    /// one process's call. `None` disarms one that has not fired.
    pub fn fail_next(&self, next: Option<(Op, FaultKind)>) {
        self.lock().fail_next = next;
    }

    /// Sets what a failed fsync does to the file's unsynced writes (the
    /// default: [`FailedFsync::KeepClean`]).
    pub fn on_failed_fsync(&self, how: FailedFsync) {
        self.lock().failed_fsync = how;
    }

    /// Calls `f(state, op_index, op)` before every mutating operation (a crash
    /// boundary), with the filesystem locked: `f` may take crash images.
    pub fn observe(&self, f: Option<Observer>) {
        self.lock().observer = f;
    }

    /// Calls `f` at every `Vfs::lock_busy`, after the lock was looked at and
    /// with the filesystem unlocked: `f` may act as another process would
    /// between the look and what its caller does next (append, say).
    pub fn on_lock_probe(&self, f: Option<ProbeHook>) {
        self.lock().probe_hook = f;
    }

    /// Calls `f(path)` at every `Vfs::try_lock`, before the lock is tried and
    /// with the filesystem unlocked: `f` may act as another process would
    /// between what the caller did before (a replay without the lock, say)
    /// and its taking the lock. Not called again while it runs.
    pub fn on_try_lock(&self, f: Option<LockHook>) {
        self.lock().lock_hook = f;
    }

    /// A crash now with `choice` (see [`SimState::image`]).
    pub fn crash(&self, choice: &[Fate]) -> SimFs {
        self.lock().image(choice)
    }

    /// Test setup: creates the directory `dir` with `mode`, and any missing
    /// parent with mode 0700; an existing `dir` gets `mode`. Durable at once,
    /// uncounted (see the module docs). Panics if a component is a file.
    pub fn mkdir(&self, dir: &Path, mode: u32) {
        let ino = self.lock().mkdir_all(dir);
        self.lock().dir_mut(ino).mode = mode;
    }

    /// Test setup: sets the mode of the existing directory `dir` (chmod).
    pub fn set_dir_mode(&self, dir: &Path, mode: u32) -> io::Result<()> {
        let mut s = self.lock();
        let ino = s.lookup(dir)?;
        s.dir(ino)?;
        s.dir_mut(ino).mode = mode;
        Ok(())
    }

    /// The bytes of the file at `path` as in-process reads see them, if it exists.
    pub fn get(&self, path: &Path) -> Option<Vec<u8>> {
        let s = self.lock();
        match &s.nodes[s.lookup(path).ok()?] {
            Node::File(f) => Some(f.live.clone()),
            Node::Dir(_) => None,
        }
    }

    /// Every file directly in `dir` (not subdirectories) with its bytes as
    /// in-process reads see them, sorted by name; empty if `dir` is absent.
    pub fn files(&self, dir: &Path) -> Vec<(String, Vec<u8>)> {
        let s = self.lock();
        let Some(d) = s.lookup(dir).ok().and_then(|i| s.dir(i).ok()) else {
            return Vec::new();
        };
        d.live
            .iter()
            .filter_map(|(name, &i)| match &s.nodes[i] {
                Node::File(f) => Some((name.clone(), f.live.clone())),
                Node::Dir(_) => None,
            })
            .collect()
    }

    /// Test setup: writes `bytes` as the whole file at `path` (a new file,
    /// replacing any there; missing parents are created 0700). Durable at once,
    /// uncounted.
    pub fn put(&self, path: &Path, bytes: Vec<u8>) {
        let mut s = self.lock();
        let parent = path.parent().expect("a file path has a parent");
        let dir = s.mkdir_all(parent);
        let name = path
            .file_name()
            .expect("a file path has a name")
            .to_string_lossy()
            .into_owned();
        s.link_durable(dir, name, bytes);
    }

    /// Test setup: makes `files` the only files of `dir` (created 0700 if
    /// absent). Durable at once, uncounted.
    pub fn set_files(&self, dir: &Path, files: &[(String, Vec<u8>)]) {
        let mut s = self.lock();
        let d = s.mkdir_all(dir);
        let old: Vec<String> = s
            .dir(d)
            .expect("a directory")
            .live
            .iter()
            .filter(|&(_, &i)| matches!(s.nodes[i], Node::File(_)))
            .map(|(n, _)| n.clone())
            .collect();
        let dn = s.dir_mut(d);
        for n in old {
            dn.live.remove(&n);
            dn.durable.remove(&n);
        }
        for (name, bytes) in files {
            s.link_durable(d, name.clone(), bytes.clone());
        }
    }
}

impl SimState {
    /// `mkdir -p`, durable at once: the inode of `dir`.
    fn mkdir_all(&mut self, dir: &Path) -> Ino {
        let mut ino = 0;
        for c in components(dir).expect("a plain absolute path") {
            let next = match self.dir(ino).expect("a directory").live.get(&c) {
                Some(&i) => i,
                None => {
                    self.nodes.push(Node::Dir(DirNode::default()));
                    let i = self.nodes.len() - 1;
                    let d = self.dir_mut(ino);
                    d.live.insert(c.clone(), i);
                    d.durable.insert(c, i);
                    i
                }
            };
            ino = next;
        }
        self.dir(ino).expect("a directory");
        ino
    }

    /// Links a new durable file `name` holding `bytes` into directory `dir`.
    fn link_durable(&mut self, dir: Ino, name: String, bytes: Vec<u8>) {
        self.nodes.push(Node::File(FileNode {
            durable: bytes.clone(),
            live: bytes,
            pending: Vec::new(),
        }));
        let i = self.nodes.len() - 1;
        let d = self.dir_mut(dir);
        d.live.insert(name.clone(), i);
        d.durable.insert(name, i);
    }
}

#[derive(Debug)]
struct SimFile {
    fs: SimFs,
    ino: Ino,
}

impl VfsFile for SimFile {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        let mut s = self.fs.lock();
        let n = match s.begin(Op::Write) {
            Some(FaultKind::ShortWrite) => (buf.len() / 2).max(1).min(buf.len()),
            Some(k) => return Err(fault_error(k)),
            None => buf.len(),
        };
        if n > 0 {
            s.file_op(
                self.ino,
                FileOp::Write {
                    offset,
                    data: buf[..n].to_vec(),
                },
            );
        }
        Ok(n)
    }
    fn sync_data(&self) -> io::Result<()> {
        let mut s = self.fs.lock();
        let fault = s.begin(Op::Fsync);
        if fault.is_none() && !s.file_mut(self.ino).pending.is_empty() {
            s.durable_changes += 1;
        }
        let drop_pages = s.failed_fsync == FailedFsync::DropPages;
        let f = s.file_mut(self.ino);
        match fault {
            None => {
                for (_, op) in std::mem::take(&mut f.pending) {
                    match op {
                        FileOp::Write { offset, data } => write_into(&mut f.durable, offset, &data),
                        FileOp::SetLen(n) => f.durable.resize(n as usize, 0),
                    }
                }
                Ok(())
            }
            Some(FaultKind::Eintr) => Err(fault_error(FaultKind::Eintr)),
            Some(k) => {
                // fsyncgate: the pages never reach the disk. Kept in the cache
                // marked clean, or dropped: then every reader sees the durable
                // bytes again, at the size the file had.
                f.pending.clear();
                if drop_pages {
                    let size = f.live.len();
                    f.live = f.durable.clone();
                    f.live.resize(size, 0);
                }
                Err(fault_error(k))
            }
        }
    }
    fn sync_all(&self) -> io::Result<()> {
        self.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut s = self.fs.lock();
        if let Some(k) = s.begin(Op::SetLen) {
            return Err(fault_error(k));
        }
        s.file_op(self.ino, FileOp::SetLen(len));
        Ok(())
    }
}

struct SimLock {
    fs: SimFs,
    path: PathBuf,
}

impl Drop for SimLock {
    fn drop(&mut self) {
        self.fs.lock().locks.remove(&self.path);
    }
}

impl Vfs for SimFs {
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        if let Some(k) = s.begin(Op::CreateDir) {
            return Err(fault_error(k));
        }
        let (parent, name) = s.parent(path)?;
        if s.dir(parent)?.live.contains_key(&name) {
            return Err(err(io::ErrorKind::AlreadyExists, "exists"));
        }
        s.nodes.push(Node::Dir(DirNode::default()));
        let ino = s.nodes.len() - 1;
        s.dir_op(parent, DirOp::Link { name, ino });
        Ok(())
    }

    fn dir_mode(&self, path: &Path) -> io::Result<u32> {
        let mut s = self.lock();
        if let Some(k) = s.begin(Op::DirMode) {
            return Err(fault_error(k));
        }
        let ino = s.lookup(path)?;
        let d = s
            .dir(ino)
            .map_err(|_| err(io::ErrorKind::InvalidInput, "not a directory"))?;
        Ok(d.mode)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut s = self.lock();
        if let Some(k) = s.begin(Op::List) {
            return Err(fault_error(k));
        }
        let ino = s.lookup(dir)?;
        Ok(s.dir(ino)?.live.keys().cloned().collect())
    }

    fn create_new(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        let mut s = self.lock();
        if let Some(k) = s.begin(Op::CreateNew) {
            return Err(fault_error(k));
        }
        let (parent, name) = s.parent(path)?;
        if s.dir(parent)?.live.contains_key(&name) {
            return Err(err(io::ErrorKind::AlreadyExists, "exists"));
        }
        s.nodes.push(Node::File(FileNode::default()));
        let ino = s.nodes.len() - 1;
        s.dir_op(parent, DirOp::Link { name, ino });
        Ok(Box::new(SimFile {
            fs: self.clone(),
            ino,
        }))
    }

    fn open_write(&self, path: &Path) -> io::Result<Box<dyn VfsFile>> {
        let mut s = self.lock();
        if let Some(k) = s.begin(Op::OpenWrite) {
            return Err(fault_error(k));
        }
        let ino = s.lookup(path)?;
        if !matches!(s.nodes[ino], Node::File(_)) {
            return Err(err(io::ErrorKind::InvalidInput, "not a regular file"));
        }
        Ok(Box::new(SimFile {
            fs: self.clone(),
            ino,
        }))
    }

    fn read(&self, path: &Path) -> io::Result<FileBytes> {
        let mut s = self.lock();
        if let Some(k) = s.begin(Op::Read) {
            return Err(fault_error(k));
        }
        let ino = s.lookup(path)?;
        match &s.nodes[ino] {
            Node::File(f) => Ok(Box::new(f.live.clone())),
            Node::Dir(_) => Err(err(io::ErrorKind::InvalidInput, "not a regular file")),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        if let Some(k) = s.begin(Op::Rename) {
            return Err(fault_error(k));
        }
        let (pf, from_name) = s.parent(from)?;
        let (pt, to_name) = s.parent(to)?;
        let ino = *s
            .dir(pf)?
            .live
            .get(&from_name)
            .ok_or_else(|| err(io::ErrorKind::NotFound, "no such file"))?;
        if let Some(&there) = s.dir(pt)?.live.get(&to_name) {
            // Over an existing entry: files only (a directory is never replaced).
            if matches!(s.nodes[there], Node::Dir(_)) || matches!(s.nodes[ino], Node::Dir(_)) {
                return Err(err(io::ErrorKind::AlreadyExists, "rename over a directory"));
            }
        }
        if pf == pt {
            s.dir_op(
                pf,
                DirOp::Rename {
                    from: from_name,
                    to: to_name,
                    ino,
                },
            );
        } else {
            if s.contains(ino, pt) {
                return Err(err(io::ErrorKind::InvalidInput, "rename into itself"));
            }
            s.dir_op(
                pt,
                DirOp::MoveIn {
                    from_dir: pf,
                    from: from_name,
                    to: to_name,
                    ino,
                },
            );
        }
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        if let Some(k) = s.begin(Op::Remove) {
            return Err(fault_error(k));
        }
        let (parent, name, ino) = s.entry(path)?;
        if matches!(s.nodes[ino], Node::Dir(_)) {
            return Err(err(io::ErrorKind::IsADirectory, "is a directory"));
        }
        s.dir_op(parent, DirOp::Unlink { name });
        Ok(())
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        if let Some(k) = s.begin(Op::RemoveDir) {
            return Err(fault_error(k));
        }
        let (parent, name, ino) = s.entry(path)?;
        if !s.dir(ino)?.live.is_empty() {
            return Err(err(io::ErrorKind::DirectoryNotEmpty, "directory not empty"));
        }
        s.dir_op(parent, DirOp::Unlink { name });
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        let fault = s.begin(Op::SyncDir);
        let ino = s.lookup(dir)?;
        s.dir(ino)?;
        if let Some(k) = fault {
            return Err(fault_error(k));
        }
        if !s.dir_mut(ino).pending.is_empty() {
            s.durable_changes += 1;
        }
        s.commit_moves(ino);
        let d = s.dir_mut(ino);
        d.pending.clear();
        d.durable = d.live.clone();
        Ok(())
    }

    fn boot_id(&self) -> [u8; 16] {
        let mut id = [0xb0; 16];
        id[..8].copy_from_slice(&self.lock().boot.to_le_bytes());
        id
    }

    fn lock_busy(&self, path: &Path) -> bool {
        let (busy, hook) = {
            let mut s = self.lock();
            let faulted = s.begin(Op::LockProbe).is_some();
            (!faulted && s.locks.contains(path), s.probe_hook.take())
        };
        if let Some(mut hook) = hook {
            hook();
            self.lock().probe_hook.get_or_insert(hook);
        }
        busy
    }

    fn try_lock(&self, path: &Path, _holder: &str) -> io::Result<LockAttempt> {
        let hook = self.lock().lock_hook.take();
        if let Some(mut hook) = hook {
            hook(path);
            self.lock().lock_hook.get_or_insert(hook);
        }
        let mut s = self.lock();
        if let Some(k) = s.begin(Op::TryLock) {
            return Err(fault_error(k));
        }
        s.parent(path)?;
        if !s.locks.insert(path.to_path_buf()) {
            return Ok(LockAttempt::Busy(Some("a simulated holder".into())));
        }
        Ok(LockAttempt::Acquired(Box::new(SimLock {
            fs: self.clone(),
            path: path.to_path_buf(),
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn unsynced_create_is_lost_and_synced_one_kept() {
        let fs = SimFs::new();
        fs.create_dir(&p("/d")).unwrap();
        fs.sync_dir(&p("/")).unwrap();
        let f = fs.create_new(&p("/d/a")).unwrap();
        f.write_at(b"hello", 0).unwrap();
        f.sync_data().unwrap();
        let none = fs.with_state(|s| s.image(&vec![Fate::Absent; s.pending().len()]));
        assert!(
            none.read(&p("/d/a")).is_err(),
            "name not durable before sync_dir"
        );
        fs.sync_dir(&p("/d")).unwrap();
        let img = fs.with_state(|s| s.image(&[]));
        assert_eq!((*img.read(&p("/d/a")).unwrap()).as_ref(), b"hello");
    }

    #[test]
    fn directory_modes_are_recorded_and_survive_a_crash() {
        let fs = SimFs::new();
        fs.create_dir(&p("/d")).unwrap();
        assert_eq!(fs.dir_mode(&p("/d")).unwrap(), 0o700);
        fs.set_dir_mode(&p("/d"), 0o750).unwrap();
        assert_eq!(fs.dir_mode(&p("/d")).unwrap(), 0o750);
        fs.mkdir(&p("/a/b"), 0o777);
        assert_eq!(fs.dir_mode(&p("/a")).unwrap(), 0o700);
        assert_eq!(fs.dir_mode(&p("/a/b")).unwrap(), 0o777);
        fs.sync_dir(&p("/")).unwrap();
        let img = fs.crash(&[]);
        assert_eq!(img.dir_mode(&p("/d")).unwrap(), 0o750);
        assert_eq!(img.dir_mode(&p("/a/b")).unwrap(), 0o777);
        assert!(fs.set_dir_mode(&p("/nowhere"), 0o700).is_err());
    }

    #[test]
    fn a_move_between_directories_is_atomic_at_a_crash_and_durable_by_either_sync() {
        let fs = SimFs::new();
        fs.put(&p("/runs/r/seg"), b"x".to_vec());
        fs.mkdir(&p("/archive"), 0o700);
        fs.rename(&p("/runs/r"), &p("/archive/r.1")).unwrap();
        assert_eq!(fs.get(&p("/archive/r.1/seg")), Some(b"x".to_vec()));
        assert_eq!(fs.get(&p("/runs/r/seg")), None);
        // Pending: a crash keeps it in one place, whichever the fate.
        for fate in [Fate::Absent, Fate::Whole] {
            let img = fs.crash(std::slice::from_ref(&fate));
            let (old, new) = (img.get(&p("/runs/r/seg")), img.get(&p("/archive/r.1/seg")));
            assert!(old.is_some() != new.is_some(), "{fate:?}: {old:?} {new:?}");
        }
        // A sync of the source alone commits both sides.
        fs.sync_dir(&p("/runs")).unwrap();
        let img = fs.crash(&[]);
        assert_eq!(img.get(&p("/archive/r.1/seg")), Some(b"x".to_vec()));
        assert_eq!(img.get(&p("/runs/r/seg")), None);
        // A directory never replaces another, nor moves into itself.
        fs.mkdir(&p("/runs/q"), 0o700);
        assert!(fs.rename(&p("/runs/q"), &p("/archive/r.1")).is_err());
        assert!(fs.rename(&p("/archive"), &p("/archive/r.1/a")).is_err());
        // remove_dir: empty directories only.
        assert!(fs.remove_dir(&p("/archive/r.1")).is_err());
        fs.remove(&p("/archive/r.1/seg")).unwrap();
        fs.remove_dir(&p("/archive/r.1")).unwrap();
        assert!(fs.list(&p("/archive")).unwrap().is_empty());
    }

    #[test]
    fn setup_files_are_durable_and_uncounted() {
        let fs = SimFs::new();
        fs.put(&p("/m/s/x"), b"xx".to_vec());
        fs.set_files(
            &p("/m/s"),
            &[("a".into(), b"1".to_vec()), ("b".into(), b"2".to_vec())],
        );
        assert_eq!(fs.ops(), 0);
        assert_eq!(fs.get(&p("/m/s/x")), None, "set_files replaced x");
        assert_eq!(
            fs.files(&p("/m/s")),
            vec![("a".into(), b"1".to_vec()), ("b".into(), b"2".to_vec())]
        );
        let img = fs.crash(&[]);
        assert_eq!(img.get(&p("/m/s/b")), Some(b"2".to_vec()));
        assert!(fs.files(&p("/m")).is_empty(), "directories are not files");
    }

    #[test]
    fn torn_write_keeps_whole_sectors_only() {
        let fs = SimFs::new();
        let f = fs.create_new(&p("/a")).unwrap();
        fs.sync_dir(&p("/")).unwrap();
        f.write_at(&[7u8; 1500], 100).unwrap();
        let torn = Fate::Sectors(vec![
            SectorFate::New,
            SectorFate::Old,
            SectorFate::Old,
            SectorFate::Old,
        ]);
        let img = fs.crash(&[torn]);
        let b = img.read(&p("/a")).unwrap();
        let b: &[u8] = (*b).as_ref();
        assert_eq!(b.len(), 512);
        assert!(b[..100].iter().all(|&x| x == 0) && b[100..].iter().all(|&x| x == 7));
    }

    #[test]
    fn failed_fsync_drops_pages_but_reads_still_see_them() {
        let fs = SimFs::new();
        let f = fs.create_new(&p("/a")).unwrap();
        fs.sync_dir(&p("/")).unwrap();
        f.write_at(b"abc", 0).unwrap();
        let at = fs.ops();
        fs.inject(Some(Fault {
            at,
            kind: FaultKind::Eio,
            persistent: false,
        }));
        assert!(f.sync_data().is_err());
        assert!(f.sync_data().is_ok());
        assert_eq!((*fs.read(&p("/a")).unwrap()).as_ref(), b"abc");
        assert_eq!(
            fs.crash(&[])
                .read(&p("/a"))
                .unwrap()
                .as_ref()
                .as_ref()
                .len(),
            0
        );
    }

    #[test]
    fn ordered_model_only_allows_prefixes() {
        let fs = SimFs::new();
        let a = fs.create_new(&p("/a")).unwrap();
        let b = fs.create_new(&p("/b")).unwrap();
        a.write_at(b"1", 0).unwrap();
        b.write_at(b"2", 0).unwrap();
        a.write_at(b"3", 1).unwrap();
        fs.with_state(|s| {
            // links a, b; writes a1, b2, a3
            use Fate::*;
            assert!(!s.allowed(Persistence::Ordered, &[Absent, Whole, Whole, Whole, Whole]));
            assert!(!s.allowed(Persistence::Ordered, &[Whole, Whole, Absent, Whole, Whole]));
            assert!(s.allowed(
                Persistence::Ordered,
                &[Whole, Absent, Whole, Absent, Absent]
            ));
            assert!(s.allowed(Persistence::Weak, &[Absent, Whole, Absent, Whole, Whole]));
            for o in s.outcomes(Persistence::Ordered, 1000, 1) {
                assert!(s.allowed(Persistence::Ordered, &o));
            }
        });
    }
}
