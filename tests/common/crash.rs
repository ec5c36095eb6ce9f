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
use runlog::engine::sim::{Persistence, SimFs, SimRng, SimState};
use runlog::engine::{self, Codec, Integrity, Options, Store, SyncPolicy};
use std::collections::{BTreeMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub const DIR: &str = "/s";
/// Pads whose records straddle sector and page boundaries in different ways.
pub const PADS: [usize; 6] = [1, 511, 512, 4095, 4097, 64 << 10];

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
    /// Close and open again.
    Reopen,
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
    let mut o = sim_opts(fs, x.codec);
    o.sync = x.sync;
    let mut store = Some(Store::<Ledger>::open(dir(), o.clone()).expect("open"));
    for step in steps {
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
            Step::Reopen => {
                drop(store.take());
                store = Some(Store::<Ledger>::open(dir(), o.clone()).expect("reopen"));
            }
        }
    }
    drop(store);
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

fn fingerprint(fs: &SimFs) -> u64 {
    let mut h = DefaultHasher::new();
    fs.with_state(|s| s.durable_files()).hash(&mut h);
    h.finish()
}

/// Recovers `img` with the writer, checks read-only recovery and verify agree,
/// and returns the recovered state. `during` collects crash images taken during
/// this recovery (empty to skip).
pub fn recover(
    img: &SimFs,
    codec: Codec,
    during: Option<(Persistence, usize, u64)>,
) -> Result<(LedgerState, Vec<SimFs>), String> {
    // Read-only first: it must not modify anything and must agree with the writer.
    let ro = match engine::read_state::<Ledger>(img, &dir()) {
        Ok((s, _)) => Some(s),
        Err(engine::Error::NotFound { .. }) => None,
        Err(e) => return Err(format!("read_state failed on a crash state: {e}")),
    };
    match engine::verify(img, &dir()) {
        Ok(r) if matches!(r.integrity, Integrity::Corrupt { .. }) => {
            return Err(format!("verify reports corruption: {:?}", r.integrity));
        }
        Ok(_) | Err(engine::Error::NotFound { .. }) => {}
        Err(e) => return Err(format!("verify failed: {e}")),
    }
    let images = Arc::new(Mutex::new(Vec::new()));
    if let Some((model, cap, seed)) = during {
        let images = images.clone();
        let mut rng = SimRng::new(seed);
        let mut seen = 0u64;
        img.observe(Some(Box::new(move |s: &SimState, _n, _op| {
            // Skip boundaries where nothing could differ from the last one taken.
            let key = s.durable_changes() * 1_000_003 + s.pending().len() as u64;
            if key == seen {
                return;
            }
            seen = key;
            for o in s.outcomes(model, cap, rng.next_u64()) {
                images.lock().unwrap().push(s.image(&o));
            }
        })));
    }
    let opened = Store::<Ledger>::open(dir(), sim_opts(img, codec));
    img.observe(None);
    let store = opened.map_err(|e| format!("recovery failed on a crash state: {e}"))?;
    let st = store.read(|s| s.clone());
    drop(store);
    if let Some(ro) = ro
        && ro != st
    {
        return Err(format!(
            "read-only recovery saw {} values, the writer {}",
            ro.values.len(),
            st.values.len()
        ));
    }
    let images = std::mem::take(&mut *images.lock().unwrap());
    Ok((st, images))
}

/// Checks a recovered state against H and the acknowledged watermark; returns k.
pub fn check_prefix(h: &[(u64, usize)], acked: u64, got: &LedgerState) -> Result<u64, String> {
    let k = got.values.len();
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
    if *got != model_of(&h[..k]) {
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
}

impl std::ops::AddAssign for Figures {
    fn add_assign(&mut self, o: Figures) {
        self.boundaries += o.boundaries;
        self.capped += o.capped;
        self.crash_states += o.crash_states;
        self.recovery_crash_states += o.recovery_crash_states;
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
    pub seed: u64,
}

struct Taken {
    img: SimFs,
    acked: u64,
    at: u64,
}

/// Runs the workload, crashing at boundaries, and checks every crash state.
pub fn explore(steps: &[Step], x: Explore) -> Result<Figures, String> {
    let fs = SimFs::new();
    let tally = Arc::new(Tally::default());
    let taken = Arc::new(Mutex::new(Vec::<Taken>::new()));
    let mut figures = Figures::default();
    let boundaries = Arc::new(AtomicU64::new(0));
    let capped = Arc::new(AtomicU64::new(0));
    {
        let capped = capped.clone();
        let taken = taken.clone();
        let tally = tally.clone();
        let boundaries = boundaries.clone();
        let mut rng = SimRng::new(x.seed);
        let mut seen = HashSet::new();
        fs.observe(Some(Box::new(move |s: &SimState, n, _op| {
            if x.every > 1 && !rng.one_in(x.every) {
                return;
            }
            boundaries.fetch_add(1, Ordering::Relaxed);
            let acked = tally.acked.load(Ordering::SeqCst);
            if std::env::var("RUNLOG_CRASH_TRACE").is_ok() {
                eprintln!("boundary {n} {_op:?} pending {:?}", s.pending());
            }
            let outcomes = s.outcomes(x.model, x.outcomes, rng.next_u64());
            if outcomes.len() >= x.outcomes {
                capped.fetch_add(1, Ordering::Relaxed);
            }
            for o in outcomes {
                let img = s.image(&o);
                // An identical image with the same watermark checks nothing new.
                if seen.insert((fingerprint(&img), acked)) {
                    taken.lock().unwrap().push(Taken { img, acked, at: n });
                }
            }
        })));
    }
    run_workload(&fs, &x, steps, &tally);
    fs.observe(None);
    // The end of the run is a boundary too (a crash after the last call).
    let acked = tally.acked.load(Ordering::SeqCst);
    let end = fs.with_state(|s| {
        let mut rng = SimRng::new(x.seed ^ 0xe2d);
        s.outcomes(x.model, x.outcomes, rng.next_u64())
            .iter()
            .map(|o| s.image(o))
            .collect::<Vec<_>>()
    });
    let at = fs.ops();
    let mut taken = std::mem::take(&mut *taken.lock().unwrap());
    taken.extend(end.into_iter().map(|img| Taken { img, acked, at }));
    figures.boundaries = boundaries.load(Ordering::Relaxed) + 1;
    figures.capped = capped.load(Ordering::Relaxed);
    let h = tally.history();
    // A clean run recovers everything.
    let (full, _) =
        recover(&fs.crash(&[]), x.codec, None).map_err(|e| format!("after a clean close: {e}"))?;
    if full.values.len() != h.len() {
        let k = check_prefix(&h, h.len() as u64, &full)?;
        return Err(format!("clean close recovered {k} of {}", h.len()));
    }
    let mut rng = SimRng::new(x.seed ^ 0x5eed);
    for t in taken {
        figures.crash_states += 1;
        let during = (x.recovery_outcomes > 0 && rng.one_in(x.recovery_one_in))
            .then(|| (x.model, x.recovery_outcomes, rng.next_u64()));
        let listing: Vec<(PathBuf, usize)> = t
            .img
            .with_state(|s| s.durable_files())
            .into_iter()
            .map(|(p, b)| (p, b.len()))
            .collect();
        let ctx = |e: String| format!("crash before op {}: {e}\nimage: {listing:?}", t.at);
        let (st, again) = recover(&t.img, x.codec, during).map_err(ctx)?;
        let k = check_prefix(&h, t.acked, &st).map_err(ctx)?;
        // Recovering again: a clean reopen of what recovery left, and each crash during it.
        let (st2, _) = recover(&t.img.crash(&[]), x.codec, None).map_err(ctx)?;
        if st2 != st {
            return Err(ctx(format!(
                "second recovery differs from the first (k={k})"
            )));
        }
        for img in again {
            figures.recovery_crash_states += 1;
            let (st3, _) = recover(&img, x.codec, None)
                .map_err(|e| ctx(format!("after a crash during recovery: {e}")))?;
            if st3 != st {
                return Err(ctx(format!(
                    "recovery after a crash during recovery gives {} transitions, first recovery {k}",
                    st3.values.len()
                )));
            }
        }
    }
    Ok(figures)
}

/// The workload `w` of the exhaustive enumeration: `w` in base 4, `len` digits,
/// over append / batch / compact / reopen; pads and batch sizes vary with `w`.
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
                2 => Step::Compact,
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
            PADS[r.below(3) as usize]
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
            78..90 => Step::Compact,
            _ => Step::Reopen,
        })
        .collect()
}
