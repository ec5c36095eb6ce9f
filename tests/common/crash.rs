//! The crash-test harness: workloads run against the simulated filesystem, crash
//! images taken at operation boundaries, and THE INVARIANT checked on each.
//!
//! H is the transitions issued (in seq order), A those acknowledged. After any
//! crash and recovery the recovered history is H[0..k] with max(A) <= k <= |H|,
//! the state equals the in-memory model's for that prefix, read-only recovery
//! agrees, verify reports no corruption, and recovering again (also after a crash
//! during recovery) gives the same state.
#![allow(dead_code)]

use super::*;
use runlog::engine::format::SHARED_FILE;
use runlog::engine::sim::{Fate, Op, Persistence, SimFs, SimRng, SimState};
use runlog::engine::{self, Codec, Integrity, Options, Store, SyncPolicy};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub const DIR: &str = "/s";
/// Pads whose records straddle sector and page boundaries in different ways.
pub const PADS: [usize; 6] = [1, 511, 512, 4095, 4097, 64 << 10];

/// What the harness runs: a machine taking [`Entry`] transitions, how to read
/// its recovered state as plain data, and the model of a history.
pub trait Subject: 'static {
    type M: engine::Machine<Transition = Entry>;
    /// The state as plain data, compared with the model's.
    type Obs: PartialEq + std::fmt::Debug + Send + 'static;
    /// Reads a recovered state (a damaged read is an error).
    fn observe(s: &<Self::M as engine::Machine>::State) -> Result<Self::Obs, String>;
    /// The model's state after the accepted transitions `h`.
    fn model(h: &[(u64, usize)]) -> Self::Obs;
    /// How many transitions a state has applied.
    fn applied(o: &Self::Obs) -> usize;
}

impl Subject for Ledger {
    type M = Ledger;
    type Obs = LedgerState;
    fn observe(s: &LedgerState) -> Result<LedgerState, String> {
        Ok(s.clone())
    }
    fn model(h: &[(u64, usize)]) -> LedgerState {
        model_of(h)
    }
    fn applied(o: &LedgerState) -> usize {
        o.values.len()
    }
}

/// The keyed machine (format v2, table snapshots) under the same harness.
pub struct KeyedTab;

impl Subject for KeyedTab {
    type M = engine::Keyed<keyed::Tab>;
    type Obs = keyed::TabModel;
    fn observe(s: &engine::KeyedState<keyed::Tab>) -> Result<keyed::TabModel, String> {
        keyed::tab_observe(s)
    }
    fn model(h: &[(u64, usize)]) -> keyed::TabModel {
        keyed::tab_model(h)
    }
    fn applied(o: &keyed::TabModel) -> usize {
        o.header.applied as usize
    }
}

pub fn dir() -> PathBuf {
    PathBuf::from(DIR)
}

/// One step of a workload.
#[derive(Debug, Clone)]
pub enum Step {
    /// One append with this pad.
    Append(usize),
    /// One append_batch; a `None` is a transition `apply` refuses.
    Batch(Vec<Option<usize>>),
    /// Concurrent appends, one thread per pad.
    Threads(Vec<usize>),
    /// A manual compaction (snapshot and log trim).
    Compact,
    /// A delta flush of the tail (`Store::flush`, FORMAT.md §14; a full
    /// snapshot for a whole-state machine or before the first table).
    Flush,
    /// Close and open again.
    Reopen,
    /// Close, then one one-shot writer (FORMAT.md §5.8) appends one record
    /// with this pad and exits (leaving a tail cache, §15, when its open
    /// applied enough records), then open again.
    OneShot(usize),
}

pub fn sim_opts(fs: &SimFs, codec: Codec) -> Options {
    let mut o = opts(codec);
    o.vfs = Arc::new(fs.clone());
    o.segment_bytes = 4096;
    o
}

/// What the workload did, shared with the crash observer.
#[derive(Default)]
pub struct Tally {
    /// Issued transitions by seq (seq - 1 indexes it).
    pub issued: Mutex<BTreeMap<u64, (u64, usize)>>,
    /// Highest acknowledged seq (acks are prefix-closed: an ack of s covers all below).
    pub acked: AtomicU64,
    pub next_value: AtomicU64,
}

impl Tally {
    fn value(&self) -> u64 {
        loop {
            let v = self.next_value.fetch_add(1, Ordering::Relaxed) + 1;
            if !v.is_multiple_of(1000) {
                return v;
            }
        }
    }
    fn ack(&self, seq: u64) {
        self.acked.fetch_max(seq, Ordering::SeqCst);
    }
    pub fn history(&self) -> Vec<(u64, usize)> {
        let h = self.issued.lock().unwrap();
        for (i, s) in h.keys().enumerate() {
            assert_eq!(*s, i as u64 + 1, "seqs handed out are contiguous from 1");
        }
        h.values().copied().collect()
    }
}

/// Runs `steps` on `fs`. Every append must succeed (no faults here).
pub fn run_workload(fs: &SimFs, x: &Explore, steps: &[Step], tally: &Arc<Tally>) {
    run_workload_as::<Ledger>(fs, x, steps, tally)
}

/// [`run_workload`] for any [`Subject`].
pub fn run_workload_as<S: Subject>(fs: &SimFs, x: &Explore, steps: &[Step], tally: &Arc<Tally>) {
    let mut o = sim_opts(fs, x.codec);
    o.sync = x.sync;
    let mut store = Some(Store::<S::M>::open(dir(), o.clone()).expect("open"));
    for step in steps {
        if x.open_after_ack {
            opens_after_ack::<S>(fs, x.codec, tally.acked.load(Ordering::SeqCst));
        }
        let s = store.as_ref().unwrap();
        match step {
            Step::Append(pad) => {
                let v = tally.value();
                let seq = s.append(&entry(v, *pad)).expect("append");
                tally.issued.lock().unwrap().insert(seq, (v, *pad));
                tally.ack(seq);
            }
            Step::Batch(items) => {
                let ts: Vec<(Entry, Option<usize>)> = items
                    .iter()
                    .map(|p| match p {
                        Some(pad) => (entry(tally.value(), *pad), Some(*pad)),
                        None => (entry(7000, 0), None),
                    })
                    .collect();
                let batch: Vec<Entry> = ts.iter().map(|t| t.0.clone()).collect();
                let rs = s.append_batch(&batch);
                let mut max = 0;
                for ((t, pad), r) in ts.iter().zip(rs) {
                    match (pad, r) {
                        (Some(pad), Ok(seq)) => {
                            tally.issued.lock().unwrap().insert(seq, (t.value, *pad));
                            max = max.max(seq);
                        }
                        (None, Err(e)) => assert!(e.is_refused(), "{e}"),
                        (_, r) => panic!("unexpected batch result {r:?}"),
                    }
                }
                tally.ack(max);
            }
            Step::Threads(pads) => std::thread::scope(|sc| {
                for pad in pads {
                    let tally = tally.clone();
                    sc.spawn(move || {
                        let v = tally.value();
                        let e = entry(v, *pad);
                        // Record before the ack is visible, so H always holds every acked seq.
                        let seq = s.append(&e).expect("threaded append");
                        tally.issued.lock().unwrap().insert(seq, (v, *pad));
                        tally.ack(seq);
                    });
                }
            }),
            Step::Compact => {
                s.compact().expect("compact");
            }
            Step::Flush => {
                s.flush().expect("flush");
            }
            Step::Reopen => {
                drop(store.take());
                store = Some(Store::<S::M>::open(dir(), o.clone()).expect("reopen"));
            }
            Step::OneShot(pad) => {
                drop(store.take());
                let one = Options {
                    one_shot: true,
                    ..o.clone()
                };
                let w = Store::<S::M>::open(dir(), one).expect("one-shot open");
                let v = tally.value();
                let seq = w.append(&entry(v, *pad)).expect("one-shot append");
                tally.issued.lock().unwrap().insert(seq, (v, *pad));
                tally.ack(seq);
                drop(w);
                store = Some(Store::<S::M>::open(dir(), o.clone()).expect("reopen"));
            }
        }
    }
    if x.open_after_ack {
        opens_after_ack::<S>(fs, x.codec, tally.acked.load(Ordering::SeqCst));
    }
    drop(store);
}

/// The live files of `fs` (what a process crash leaves), opened by a writer,
/// must hold every transition acknowledged so far.
fn opens_after_ack<S: Subject>(fs: &SimFs, codec: Codec, acked: u64) {
    let files = fs.with_state(|s| s.live_files());
    if files.is_empty() || acked == 0 {
        return;
    }
    let (st, _) = recover_as::<S>(&fs_of(&files), codec, None, true)
        .unwrap_or_else(|e| panic!("open after acknowledging seq {acked}: {e}"));
    assert!(
        S::applied(&st) as u64 >= acked,
        "open after acknowledging seq {acked} read back {} transitions",
        S::applied(&st)
    );
}

/// The state the model reaches after `h`.
pub fn model_of(h: &[(u64, usize)]) -> LedgerState {
    let mut s = LedgerState::default();
    for (v, pad) in h {
        s.values.push(*v);
        s.bytes += *pad as u64;
    }
    s
}

/// A fast 64-bit hash of a file set (FNV-style over 8-byte words with a
/// final avalanche); only used to skip crash images already checked.
pub fn fingerprint(files: &BTreeMap<PathBuf, Vec<u8>>) -> u64 {
    hash_files(files, false)
}

/// [`fingerprint`] of a crash image that starts a new boot (`SimState::image`),
/// leaving `SHARED`'s bytes out: every slot it holds was written in the boot
/// the crash ended, and an open keeps only slots of its own boot (FORMAT.md
/// §5.8, "Read"; `decode_shared`), so such images that differ only there
/// recover alike. `SHARED` is never fsynced, so its writes pile up as pending
/// writes whose subsets multiplied a workload's crash states without one more
/// state of the log; the first image of each log state is still recovered,
/// with whatever `SHARED` it had (`shared_decode` fuzzes the bytes). Images
/// of the same boot ([`fs_of`], where `SHARED`'s slots count) hash apart.
pub fn fingerprint_next_boot(files: &BTreeMap<PathBuf, Vec<u8>>) -> u64 {
    hash_files(files, true)
}

fn hash_files(files: &BTreeMap<PathBuf, Vec<u8>>, next_boot: bool) -> u64 {
    fn mix(h: u64, w: u64) -> u64 {
        (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
    }
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    if next_boot {
        h = mix(h, 0x6e65_7874_626f_6f74);
    }
    for (p, b) in files {
        for c in p.as_os_str().as_encoded_bytes().chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            h = mix(h, u64::from_le_bytes(w));
        }
        if next_boot && p.file_name() == Some(std::ffi::OsStr::new(SHARED_FILE)) {
            continue;
        }
        h = mix(h, 0xff ^ b.len() as u64);
        let mut chunks = b.chunks_exact(8);
        for c in &mut chunks {
            h = mix(h, u64::from_le_bytes(c.try_into().unwrap()));
        }
        let mut w = [0u8; 8];
        w[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        h = mix(h, u64::from_le_bytes(w));
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// A fresh simulated filesystem holding exactly `files`, all durable (the
/// crash image with that durable content, without the dead inodes the
/// original filesystem still carries). `files` must be non-empty: an empty
/// set does not say which directories exist.
pub fn fs_of(files: &BTreeMap<PathBuf, Vec<u8>>) -> SimFs {
    use runlog::engine::vfs::Vfs;
    assert!(!files.is_empty(), "directories are implied by files");
    let fs = SimFs::new();
    let mut dirs = BTreeSet::new();
    for p in files.keys() {
        let mut d = PathBuf::from("/");
        let parent = p.parent().expect("a file has a parent");
        for c in parent.components().skip(1) {
            d.push(c);
            if dirs.insert(d.clone()) {
                fs.create_dir(&d).expect("sim mkdir");
            }
        }
    }
    for (p, b) in files {
        let f = fs.create_new(p).expect("sim create");
        if !b.is_empty() {
            f.write_at(b, 0).expect("sim write");
        }
        f.sync_data().expect("sim fsync");
    }
    fs.sync_dir(Path::new("/")).expect("sim dir fsync");
    for d in &dirs {
        fs.sync_dir(d).expect("sim dir fsync");
    }
    fs
}

/// Recovers `img` with the writer, checks read-only recovery and verify agree,
/// and returns the recovered state. `during` collects crash images taken during
/// this recovery (empty to skip).
pub fn recover(
    img: &SimFs,
    codec: Codec,
    during: Option<(Persistence, usize, u64)>,
) -> Result<(LedgerState, Vec<SimFs>), String> {
    recover_with(img, codec, during, true)
}

/// [`recover`], with the read-only recovery and verify checks only if `read_only`.
pub fn recover_with(
    img: &SimFs,
    codec: Codec,
    during: Option<(Persistence, usize, u64)>,
    read_only: bool,
) -> Result<(LedgerState, Vec<SimFs>), String> {
    recover_as::<Ledger>(img, codec, during, read_only)
}

/// [`recover_with`] for any [`Subject`].
pub fn recover_as<S: Subject>(
    img: &SimFs,
    codec: Codec,
    during: Option<(Persistence, usize, u64)>,
    read_only: bool,
) -> Result<(S::Obs, Vec<SimFs>), String> {
    // Read-only first: it must not modify anything and must agree with the writer.
    let ro = if read_only {
        match engine::Reader::new(img, &dir()).state::<S::M>() {
            Ok((s, _)) => Some(S::observe(&s).map_err(|e| format!("read_state: {e}"))?),
            Err(engine::Error::NotFound { .. }) => None,
            Err(e) => return Err(format!("read_state failed on a crash state: {e}")),
        }
    } else {
        None
    };
    match read_only.then(|| engine::Reader::new(img, &dir()).verify()) {
        Some(Ok(r))
            if matches!(
                r.integrity,
                Integrity::Damaged(engine::Error::Corrupt { .. })
            ) =>
        {
            return Err(format!("verify reports corruption: {:?}", r.integrity));
        }
        None | Some(Ok(_)) | Some(Err(engine::Error::NotFound { .. })) => {}
        Some(Err(e)) => return Err(format!("verify failed: {e}")),
    }
    let images = Arc::new(Mutex::new(Vec::new()));
    if let Some((model, cap, seed)) = during {
        let images = images.clone();
        let mut rng = SimRng::new(seed);
        let mut seen = 0u64;
        let mut distinct = std::collections::HashSet::new();
        img.observe(Some(Box::new(move |s: &SimState, _n, _op| {
            // Skip boundaries where nothing could differ from the last one taken.
            let key = s.durable_changes() * 1_000_003 + s.pending().len() as u64;
            if key == seen {
                return;
            }
            seen = key;
            for o in s.outcomes(model, cap, rng.next_u64()) {
                // Each distinct image once (recovery is deterministic).
                let image = s.image(&o);
                if distinct.insert(image.with_state(|i| fingerprint_next_boot(&i.durable_files())))
                {
                    images.lock().unwrap().push(image);
                }
            }
        })));
    }
    let opened = Store::<S::M>::open(dir(), sim_opts(img, codec));
    img.observe(None);
    let store = opened.map_err(|e| format!("recovery failed on a crash state: {e}"))?;
    let st = store
        .read(|s| S::observe(s))
        .map_err(|e| format!("reading the recovered state: {e}"))?;
    drop(store);
    if let Some(ro) = ro
        && ro != st
    {
        return Err(format!(
            "read-only recovery saw {} transitions, the writer {}",
            S::applied(&ro),
            S::applied(&st)
        ));
    }
    let images = std::mem::take(&mut *images.lock().unwrap());
    Ok((st, images))
}

/// Checks a recovered state against H and the acknowledged watermark; returns k.
pub fn check_prefix(h: &[(u64, usize)], acked: u64, got: &LedgerState) -> Result<u64, String> {
    check_prefix_as::<Ledger>(h, acked, got)
}

/// [`check_prefix`] for any [`Subject`].
pub fn check_prefix_as<S: Subject>(
    h: &[(u64, usize)],
    acked: u64,
    got: &S::Obs,
) -> Result<u64, String> {
    let k = S::applied(got);
    if k > h.len() {
        return Err(format!(
            "recovered {k} transitions, only {} issued",
            h.len()
        ));
    }
    if (k as u64) < acked {
        return Err(format!(
            "lost acknowledged transitions: recovered {k}, acknowledged up to {acked}"
        ));
    }
    if *got != S::model(&h[..k]) {
        return Err(format!("recovered state is not the model's for H[0..{k}]"));
    }
    Ok(k as u64)
}

/// Figures of one exploration.
#[derive(Debug, Default, Clone, Copy)]
pub struct Figures {
    pub boundaries: u64,
    /// Boundaries whose allowed outcomes exceeded the cap (sampled, not enumerated).
    pub capped: u64,
    pub crash_states: u64,
    pub recovery_crash_states: u64,
    /// Crash states holding a table snapshot's temp file (a table write cut short).
    pub table_temps: u64,
    /// Crash states holding a table snapshot (format v2) under its own name.
    pub tables: u64,
    /// Workloads a quick sweep left out of its sample (tests/depth).
    pub sampled_out: u64,
}

impl std::ops::AddAssign for Figures {
    fn add_assign(&mut self, o: Figures) {
        self.boundaries += o.boundaries;
        self.capped += o.capped;
        self.crash_states += o.crash_states;
        self.recovery_crash_states += o.recovery_crash_states;
        self.table_temps += o.table_temps;
        self.tables += o.tables;
        self.sampled_out += o.sampled_out;
    }
}

/// How hard to explore.
#[derive(Debug, Clone, Copy)]
pub struct Explore {
    pub model: Persistence,
    pub codec: Codec,
    pub sync: SyncPolicy,
    /// Crash outcomes per boundary (exhaustive up to this many).
    pub outcomes: usize,
    /// Take a boundary with probability 1/`every` (1: every boundary).
    pub every: u64,
    /// Crash outcomes per boundary during recovery (0: no crash during recovery).
    pub recovery_outcomes: usize,
    /// Crash during the recovery of 1 in this many crash states.
    pub recovery_one_in: u64,
    /// Also check read-only recovery and `verify` for 1 in this many crash states.
    pub read_only_one_in: u64,
    pub seed: u64,
    /// Also check that the shortcut images (durable files, live files) equal
    /// the simulator's own crash images (costly: for short workloads).
    pub paranoid: bool,
    /// After every acknowledged step, open a copy of the live files (no crash)
    /// with the writer and check it reads back every acknowledged transition:
    /// no writer may acknowledge what the next open cannot read (issue 11).
    pub open_after_ack: bool,
}

/// One distinct crash image, recovered as soon as it was taken.
struct Checked<O> {
    /// The highest acknowledged watermark of any boundary that left this image.
    acked: u64,
    /// The first boundary (operation index) that left it.
    at: u64,
    /// What recovery gave (checked against H once the workload has ended).
    st: O,
    /// Its files and sizes, for the failure message.
    listing: Vec<(PathBuf, usize)>,
}

/// What the boundary observer accumulates.
struct Explored<S: Subject> {
    boundaries: u64,
    capped: u64,
    recovery_crash_states: u64,
    table_temps: u64,
    tables: u64,
    /// Fingerprint of each distinct image taken -> its index in `checked`.
    seen: HashMap<u64, usize>,
    checked: Vec<Checked<S::Obs>>,
    /// The first failure; nothing more is checked after it.
    failed: Option<String>,
    /// `durable_changes` and fingerprint of the last all-absent image.
    durable: Option<(u64, u64)>,
    /// Fingerprint of the last all-persisted image, reset by every call that
    /// may change a live file.
    live: Option<u64>,
    rng_during: Option<SimRng>,
}

impl<S: Subject> Default for Explored<S> {
    fn default() -> Self {
        Explored {
            boundaries: 0,
            capped: 0,
            recovery_crash_states: 0,
            table_temps: 0,
            tables: 0,
            seen: HashMap::new(),
            checked: Vec::new(),
            failed: None,
            durable: None,
            live: None,
            rng_during: None,
        }
    }
}

fn all(choice: &[Fate], f: Fate) -> bool {
    choice.iter().all(|c| *c == f)
}

impl<S: Subject> Explored<S> {
    /// Takes the crash images of one boundary and recovers each distinct one.
    fn boundary(&mut self, s: &SimState, at: u64, acked: u64, x: &Explore, rng: &mut SimRng) {
        self.boundaries += 1;
        let outcomes = s.outcomes(x.model, x.outcomes, rng.next_u64());
        if outcomes.len() >= x.outcomes {
            self.capped += 1;
        }
        for o in outcomes {
            if self.failed.is_some() {
                return;
            }
            // The two extreme outcomes are the durable files and the live ones:
            // read those maps instead of imaging every inode the run ever made
            // (dead segments included), and fingerprint each only when it can
            // have changed (durable files on a sync that made something durable,
            // live files on any call but a sync).
            let (fp, img) = if all(&o, Fate::Absent) {
                match &self.durable {
                    Some((dc, fp)) if *dc == s.durable_changes() => (*fp, None),
                    _ => {
                        let files = s.durable_files();
                        let fp = fingerprint(&files);
                        let img = if files.is_empty() {
                            s.image(&[])
                        } else {
                            fs_of(&files)
                        };
                        self.durable = Some((s.durable_changes(), fp));
                        (fp, Some(img))
                    }
                }
            } else if all(&o, Fate::Whole) {
                match &self.live {
                    Some(fp) => (*fp, None),
                    None => {
                        let files = s.live_files();
                        if x.paranoid {
                            assert_eq!(
                                s.image(&o).with_state(|i| i.durable_files()),
                                files,
                                "everything persisted leaves the live files"
                            );
                        }
                        let fp = fingerprint(&files);
                        let img = if files.is_empty() {
                            s.image(&o)
                        } else {
                            fs_of(&files)
                        };
                        self.live = Some(fp);
                        (fp, Some(img))
                    }
                }
            } else {
                let img = s.image(&o);
                let fp = img.with_state(|i| fingerprint_next_boot(&i.durable_files()));
                (fp, Some(img))
            };
            if let Some(&i) = self.seen.get(&fp) {
                // Recovery is deterministic: the same image recovers the same
                // state, which must hold the highest watermark it was seen with.
                let c = &mut self.checked[i];
                c.acked = c.acked.max(acked);
                continue;
            }
            let img = img.expect("a memoised fingerprint was recorded when computed");
            self.seen.insert(fp, self.checked.len());
            if let Err(e) = self.check(img, at, acked, x) {
                self.failed = Some(e);
            }
        }
    }

    /// Recovers one image (then again, and after crashes during recovery).
    fn check(&mut self, img: SimFs, at: u64, acked: u64, x: &Explore) -> Result<(), String> {
        let files = img.with_state(|s| s.durable_files());
        let table = |p: &PathBuf, b: &Vec<u8>, temp: bool| {
            let name = p.to_string_lossy();
            name.contains(".snap") && name.contains(".tmp-") == temp && b.starts_with(b"RUNLOGtb")
        };
        self.table_temps += u64::from(files.iter().any(|(p, b)| table(p, b, true)));
        self.tables += u64::from(files.iter().any(|(p, b)| table(p, b, false)));
        let listing: Vec<(PathBuf, usize)> = files.into_iter().map(|(p, b)| (p, b.len())).collect();
        let ctx = |e: String| format!("crash before op {at}: {e}\nimage: {listing:?}");
        let rng = self
            .rng_during
            .get_or_insert_with(|| SimRng::new(x.seed ^ 0x5eed));
        let during = (x.recovery_outcomes > 0 && rng.one_in(x.recovery_one_in))
            .then(|| (x.model, x.recovery_outcomes, rng.next_u64()));
        let read_only = rng.one_in(x.read_only_one_in);
        let (st, again) = recover_as::<S>(&img, x.codec, during, read_only).map_err(ctx)?;
        // Recovering again: a clean reopen of what recovery left, and each crash during it.
        let (st2, _) = recover_as::<S>(&img.crash(&[]), x.codec, None, read_only).map_err(ctx)?;
        if st2 != st {
            return Err(ctx(format!(
                "second recovery differs from the first ({} transitions, then {})",
                S::applied(&st),
                S::applied(&st2)
            )));
        }
        for img in again {
            self.recovery_crash_states += 1;
            let (st3, _) = recover_as::<S>(&img, x.codec, None, read_only)
                .map_err(|e| ctx(format!("after a crash during recovery: {e}")))?;
            if st3 != st {
                return Err(ctx(format!(
                    "recovery after a crash during recovery gives {} transitions, first recovery {}",
                    S::applied(&st3),
                    S::applied(&st)
                )));
            }
        }
        self.checked.push(Checked {
            acked,
            at,
            st,
            listing,
        });
        Ok(())
    }
}

/// Runs the workload, crashing at boundaries, and checks every crash state.
///
/// Each crash image is recovered when its boundary is reached (the workload
/// runs once; nothing is replayed), identical images are recovered once (with
/// the highest acknowledged watermark any of their boundaries had), and the
/// recovered states are checked against H when the workload has ended.
pub fn explore(steps: &[Step], x: Explore) -> Result<Figures, String> {
    explore_as::<Ledger>(steps, x)
}

/// [`explore`] for any [`Subject`].
pub fn explore_as<S: Subject>(steps: &[Step], x: Explore) -> Result<Figures, String> {
    let fs = SimFs::new();
    let tally = Arc::new(Tally::default());
    let ex = Arc::new(Mutex::new(Explored::<S>::default()));
    {
        let ex = ex.clone();
        let tally = tally.clone();
        let mut rng = SimRng::new(x.seed);
        let trace = std::env::var("RUNLOG_CRASH_TRACE").is_ok();
        fs.observe(Some(Box::new(move |s: &SimState, n, op| {
            let mut ex = ex.lock().unwrap();
            if x.every > 1 && !rng.one_in(x.every) {
                if !matches!(op, Op::Fsync | Op::SyncDir) {
                    ex.live = None;
                }
                return;
            }
            let acked = tally.acked.load(Ordering::SeqCst);
            if trace {
                eprintln!("boundary {n} {op:?} pending {:?}", s.pending());
            }
            ex.boundary(s, n, acked, &x, &mut rng);
            // A sync changes no live file; every other mutating call may.
            if !matches!(op, Op::Fsync | Op::SyncDir) {
                ex.live = None;
            }
        })));
    }
    run_workload_as::<S>(&fs, &x, steps, &tally);
    fs.observe(None);
    // The end of the run is a boundary too (a crash after the last call).
    let acked = tally.acked.load(Ordering::SeqCst);
    let at = fs.ops();
    let mut ex = std::mem::take(&mut *ex.lock().unwrap());
    fs.with_state(|s| {
        let mut rng = SimRng::new(x.seed ^ 0xe2d);
        ex.boundary(s, at, acked, &x, &mut rng)
    });
    if let Some(e) = ex.failed {
        return Err(e);
    }
    let h = tally.history();
    // A clean run recovers everything.
    let (full, _) = recover_as::<S>(&fs.crash(&[]), x.codec, None, true)
        .map_err(|e| format!("after a clean close: {e}"))?;
    if S::applied(&full) != h.len() {
        let k = check_prefix_as::<S>(&h, h.len() as u64, &full)?;
        return Err(format!("clean close recovered {k} of {}", h.len()));
    }
    for c in &ex.checked {
        check_prefix_as::<S>(&h, c.acked, &c.st)
            .map_err(|e| format!("crash before op {}: {e}\nimage: {:?}", c.at, c.listing))?;
    }
    Ok(Figures {
        boundaries: ex.boundaries,
        capped: ex.capped,
        crash_states: ex.checked.len() as u64,
        recovery_crash_states: ex.recovery_crash_states,
        table_temps: ex.table_temps,
        tables: ex.tables,
        sampled_out: 0,
    })
}

/// The workload `w` of the exhaustive enumeration: `w` in base 4, `len` digits,
/// over append / batch / compact-or-flush / reopen; pads, batch sizes and
/// whether a snapshot step is a full compaction or a delta flush vary with `w`.
pub fn short_workload(w: usize, len: u32) -> Vec<Step> {
    (0..len as usize)
        .map(|i| {
            let d = (w / 4usize.pow(i as u32)) % 4;
            let r = w + i;
            match d {
                0 => Step::Append(PADS[r % PADS.len()]),
                1 => Step::Batch(
                    (0..2 + r % 7)
                        .map(|j| (j != 1 || !r.is_multiple_of(3)).then_some(PADS[(r + j) % 4]))
                        .collect(),
                ),
                2 if r.is_multiple_of(2) => Step::Compact,
                2 => Step::Flush,
                _ => Step::Reopen,
            }
        })
        .collect()
}

/// A random workload of `n` steps drawn from `seed`.
pub fn random_workload(seed: u64, n: usize) -> Vec<Step> {
    let mut r = SimRng::new(seed);
    let pad = |r: &mut SimRng| {
        if r.one_in(25) {
            PADS[5]
        } else if r.one_in(2) {
            // Exactly 1, 511, 512, 4095 or 4097 bytes.
            PADS[r.below(5) as usize]
        } else {
            PADS[r.below(5) as usize] + r.below(40) as usize
        }
    };
    (0..n)
        .map(|_| match r.below(100) {
            0..55 => Step::Append(pad(&mut r)),
            55..70 => Step::Batch(
                (0..2 + r.below(7))
                    .map(|_| (!r.one_in(6)).then(|| pad(&mut r)))
                    .collect(),
            ),
            70..78 => Step::Threads((0..2 + r.below(7)).map(|_| pad(&mut r)).collect()),
            78..84 => Step::Compact,
            84..90 => Step::Flush,
            _ => Step::Reopen,
        })
        .collect()
}

/// Every interleaving of writers that each take two steps, a first (made by
/// `first(w)`) and then `ends[w]`: each writer's first before its end, in
/// every order. With three writers, 90 orders.
pub fn interleavings<S: Copy>(ends: &[S], first: impl Fn(usize) -> S) -> Vec<Vec<S>> {
    fn go<S: Copy>(
        ends: &[S],
        first: &dyn Fn(usize) -> S,
        next: &mut [usize],
        prefix: &mut Vec<S>,
        out: &mut Vec<Vec<S>>,
    ) {
        let mut any = false;
        for w in 0..ends.len() {
            let step = match next[w] {
                0 => first(w),
                1 => ends[w],
                _ => continue,
            };
            any = true;
            next[w] += 1;
            prefix.push(step);
            go(ends, first, next, prefix, out);
            prefix.pop();
            next[w] -= 1;
        }
        if !any {
            out.push(prefix.clone());
        }
    }
    let mut out = vec![];
    go(
        ends,
        &first,
        &mut vec![0; ends.len()],
        &mut vec![],
        &mut out,
    );
    out
}
