//! Shared test fixtures: a small state machine and helpers.
#![allow(dead_code)]

use runlog::engine::{Codec, CompactionPolicy, Machine, Options, SyncPolicy};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A log of values: the state is every value appended, in order.
pub struct Ledger;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerState {
    pub values: Vec<u64>,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub value: u64,
    pub pad: String,
}

#[derive(Debug)]
pub struct Rejected(pub u64);
impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "value {} is refused (multiples of 1000 are)", self.0)
    }
}
impl std::error::Error for Rejected {}

impl Machine for Ledger {
    type State = LedgerState;
    type Transition = Entry;
    type Error = Rejected;
    fn apply(s: &mut LedgerState, t: &Entry) -> Result<(), Rejected> {
        if t.value.is_multiple_of(1000) {
            return Err(Rejected(t.value));
        }
        s.values.push(t.value);
        s.bytes += t.pad.len() as u64;
        Ok(())
    }
}

pub fn entry(value: u64, pad: usize) -> Entry {
    Entry {
        value,
        pad: "x".repeat(pad),
    }
}

/// The state a plain in-memory model reaches after `values`.
pub fn model(values: &[u64], pad: usize) -> LedgerState {
    let mut s = LedgerState::default();
    for v in values {
        Ledger::apply(&mut s, &entry(*v, pad)).unwrap();
    }
    s
}

pub fn opts(codec: Codec) -> Options {
    Options {
        create: true,
        codec,
        sync: SyncPolicy::Always,
        compaction: CompactionPolicy::Manual,
        // A short wait, not a plain try: the lock belongs to an open file
        // description, and a child another test of this binary forks (to exec
        // the CLI or re-run this binary) shares the LOCK's descriptor until its
        // exec closes it. A store dropped and reopened in that instant found
        // the lock held (CI: `torn_header_of_the_only_segment_recovers_as_empty`,
        // Locked by this very pid). Tests of a held lock still see `Locked`,
        // after this wait.
        lock_wait: Some(std::time::Duration::from_secs(2)),
        ..Options::default()
    }
}

pub fn codecs() -> [Codec; 2] {
    [Codec::Binary, Codec::Jsonl]
}

/// How many thread schedules each shuttle test explores (`RUNLOG_SCHEDULES`;
/// 1500 at the full depth, 750 at the quick one: tests/depth): the group
/// commit's and the many writers' models. A failing schedule is printed by
/// shuttle, to be replayed.
pub fn schedules() -> usize {
    crate::depth::scaled("RUNLOG_SCHEDULES", 750, 1500) as usize
}

/// Every file in a directory with its bytes, for "nothing was modified" checks.
pub fn dir_bytes(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect();
    v.sort();
    v
}
pub mod crash;
pub mod hooked;
pub mod keyed;
pub mod kill9;

pub mod sum;

/// The in-memory filesystem of every in-memory test: the library's simulator.
pub use runlog::engine::sim::SimFs;

/// A fresh simulated filesystem holding the directory `/mem` (mode 0700), where
/// in-memory stores live ([`MEM_DIR`]).
pub fn mem_fs() -> SimFs {
    let fs = SimFs::new();
    fs.mkdir(Path::new("/mem"), 0o700);
    fs
}

/// Where in-memory stores live.
pub const MEM_DIR: &str = "/mem/store";

/// `opts(codec)` on an in-memory filesystem.
pub fn mem_opts(codec: Codec, fs: &SimFs) -> Options {
    Options {
        vfs: std::sync::Arc::new(fs.clone()),
        ..opts(codec)
    }
}

/// The values appended by [`build_log`]: 1, 2, ... skipping refused multiples of 1000.
pub fn value(i: u64) -> u64 {
    i + i / 999 + 1
}

/// The pad length [`build_log`] gives a value, so records differ in size.
pub fn pad_of(v: u64) -> usize {
    (v * 7 % 41) as usize
}

/// The state after the first `n` records of [`build_log`].
pub fn log_model(n: usize) -> LedgerState {
    let mut s = LedgerState::default();
    for i in 0..n as u64 {
        let v = value(i);
        Ledger::apply(&mut s, &entry(v, pad_of(v))).unwrap();
    }
    s
}

/// Builds a store of one segment of at least `min_bytes` in `fs` at `MEM_DIR`.
/// Returns the number of records.
pub fn build_log(fs: &SimFs, codec: Codec, min_bytes: u64) -> usize {
    let dir = Path::new(MEM_DIR);
    // Every append acknowledged (fsynced) before the next is written, as a store
    // written by one thread under the default policy is: each record's `synced`
    // watermark then covers its predecessor, so damage to any record but the last
    // is provably damage to durable data. (The in-memory fsync costs nothing.)
    let mut o = mem_opts(codec, fs);
    o.sync = SyncPolicy::Always;
    o.segment_bytes = u64::MAX;
    // The sweeps are about the records; the preallocated tail has its own sweeps
    // (tests/engine/preallocated_segments.rs).
    o.preallocate = 0;
    let s = runlog::engine::Store::<Ledger>::open(dir, o).unwrap();
    let mut n = 0u64;
    loop {
        let seg = fs.get(&dir.join("seg-00000000000000000001.log")).unwrap();
        if seg.len() as u64 >= min_bytes {
            break;
        }
        for i in n..n + 64 {
            s.append(&entry(value(i), pad_of(value(i)))).unwrap();
        }
        n += 64;
    }
    n as usize
}

/// Start offsets of every record of a segment, and its file length last.
pub fn record_bounds(seg: &[u8]) -> Vec<u64> {
    let mut offs = vec![];
    let scan = runlog::engine::scan::scan_segment::<()>(seg, |_, _, off| {
        offs.push(off);
        Ok(())
    })
    .unwrap();
    assert_eq!(scan.end, runlog::engine::scan::ScanEnd::Clean);
    offs.push(scan.file_len);
    offs
}

/// The name of the only segment [`build_log`] writes.
pub const ONLY_SEGMENT: &str = "seg-00000000000000000001.log";

/// A log built by [`build_log`] on its own in-memory filesystem, as bytes.
pub struct BuiltLog {
    /// The codec it was written with.
    pub codec: Codec,
    /// Every file of the store directory.
    pub files: Vec<(String, Vec<u8>)>,
    /// The bytes of its only segment.
    pub seg: Vec<u8>,
    /// Record start offsets, then the file length.
    pub bounds: Vec<u64>,
}

/// The durability mark's file name (FORMAT.md §5.7).
pub const MARK_FILE: &str = "DURABLE";

impl BuiltLog {
    /// Its files, with the durability mark its writer left (`true`), or without
    /// it, as a crash that lost the mark's write leaves them (`false`).
    pub fn files_marked(&self, marked: bool) -> Vec<(String, Vec<u8>)> {
        let files = self.files.clone();
        assert!(
            files.iter().any(|f| f.0 == MARK_FILE),
            "the writer left a durability mark"
        );
        if marked {
            files
        } else {
            files.into_iter().filter(|f| f.0 != MARK_FILE).collect()
        }
    }
}

/// Builds a one-segment log of at least `min_bytes` and returns its bytes.
pub fn built_log(codec: Codec, min_bytes: u64) -> BuiltLog {
    let fs = mem_fs();
    build_log(&fs, codec, min_bytes);
    let files = fs.files(Path::new(MEM_DIR));
    let seg = files
        .iter()
        .find(|f| f.0 == ONLY_SEGMENT)
        .unwrap()
        .1
        .clone();
    let bounds = record_bounds(&seg);
    BuiltLog {
        codec,
        files,
        seg,
        bounds,
    }
}

/// Prints one progress line of a long sweep on stderr, whatever libtest
/// captures: `eprintln!` shows only under `--nocapture`, but a write to the
/// stderr handle itself always reaches the log, so `cargo test` says what a
/// minutes-long test is doing.
pub fn progress(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The name libtest gives test `f` of the module at `module` (pass
/// `module_path!()`): the module path without the crate's name. A test that
/// re-executes this binary to run one child test passes it with `--exact`, so
/// the child runs that test and nothing else, in whatever group binary it is.
pub fn test_name(module: &str, f: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{f}"),
        None => f.to_string(),
    }
}

/// A command that re-executes this test binary to run the ignored child test
/// `f` of the module at `module` (pass `module_path!()`) and nothing else, on one
/// thread, its prints not captured: the harness of every test whose other side
/// is a process (a umask, a lock holder, a writer killed with SIGKILL).
pub fn child_test(module: &str, f: &str) -> std::process::Command {
    let mut c = std::process::Command::new(std::env::current_exe().unwrap());
    c.args([
        "--ignored",
        "--exact",
        test_name(module, f).as_str(),
        "--nocapture",
        "--test-threads=1",
    ]);
    c
}

/// `name` from the environment as a number, else `default`: the scale of a
/// sweep (`RUNLOG_CRASH_*`, `RUNLOG_KILL9_*`).
/// The child side of another test, run bare (`--ignored` without the
/// variable its parent sets): it fails, since passing would claim a test that
/// tested nothing.
pub fn child_run_bare(test: &str, var: &str) -> ! {
    panic!("{test} is the child side of another test, which sets ${var}; run bare it tests nothing")
}

pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The spec of run `id` in the run-model tests: task "t", units `u0` to
/// `u{units - 1}` without dependencies, fingerprint `size=1`.
pub fn run_spec(id: &str, units: usize) -> runlog::run::InitSpec {
    runlog::run::InitSpec {
        id: id.into(),
        task: "t".into(),
        units: (0..units).map(|i| format!("u{i}")).collect(),
        fingerprint: runlog::run::InitSpec::parse_fingerprint("size=1").unwrap(),
        ..runlog::run::InitSpec::default()
    }
}

/// The change that marks `unit` done.
pub fn unit_done(unit: &str) -> runlog::run::Change {
    runlog::run::Change::Unit {
        unit: unit.into(),
        status: runlog::run::UnitStatus::Done,
        note: None,
        deps: None,
    }
}
