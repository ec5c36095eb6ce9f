//! The fault shim (tests/faultshim/faultshim.c; its model is written at its
//! top) from a test: compiled once per test process with `cc`, a trial's runs
//! root and shim state, `runlog` commands run under it with at most one fault
//! plan each, the faults that fired, and the power-loss image built from the
//! shim's shadows of what successful fsyncs made durable.
//!
//! The compiler is `cc`, or `RUNLOG_FAULTSHIM_CC` (not `CC`, which would
//! rebuild cargo's C dependencies). No C compiler: [`shim`] prints a visible
//! `SKIPPED` line and returns `None`,
//! or fails the test when `RUNLOG_REQUIRE_CC=1` (scripts/test sets it when
//! `cc` is there). A shim that does not compile is a failure, never a skip.
#![allow(dead_code)]

use crate::cli_support;
use crate::skip_support;
use std::collections::BTreeMap;
use std::fmt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The variable that makes a missing C compiler a failure.
pub const REQUIRE_CC: &str = "RUNLOG_REQUIRE_CC";

static LIB: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// The compiled shim (`libfaultshim.so`), or `None` after a visible skip.
pub fn shim(test: &str) -> Option<PathBuf> {
    match LIB.get_or_init(compile) {
        Ok(lib) => Some(lib.clone()),
        Err(why) => {
            skip_support::skip(test, REQUIRE_CC, why);
            None
        }
    }
}

/// Compiles the shim into this test process's own directory under
/// `CARGO_TARGET_TMPDIR`. `Err` only for what makes it impossible here (no
/// compiler, no `/proc`); a compile error panics.
fn compile() -> Result<PathBuf, String> {
    if !Path::new("/proc/self/fd").is_dir() {
        return Err(
            "no /proc/self/fd (the shim finds a descriptor's file there; Linux only)".into(),
        );
    }
    let cc = std::env::var_os("RUNLOG_FAULTSHIM_CC")
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "cc".into());
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/faultshim/faultshim.c");
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("faultshim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("libfaultshim.so");
    let out = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o"])
        .arg(&lib)
        .arg(&src)
        .args(["-ldl", "-lpthread"])
        .output();
    match out {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
            "no C compiler ({} not found; apt-get install gcc) to build the fault shim",
            Path::new(&cc).display()
        )),
        Err(e) => panic!("running {}: {e}", Path::new(&cc).display()),
        Ok(o) if !o.status.success() => panic!(
            "{} failed to compile {}:\n{}",
            Path::new(&cc).display(),
            src.display(),
            cli_support::text(&o)
        ),
        Ok(_) => Ok(lib),
    }
}

/// A fault the shim injects (FAULTSHIM_PLAN's kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// The sync fails with EIO and the file's unsynced pages are dropped.
    EioDrop,
    /// The sync fails with EIO and the unsynced pages are marked clean.
    EioClean,
    /// The sync fails with EIO; nothing is lost.
    Eio,
    /// A write to a segment fails with ENOSPC.
    EnospcWrite,
    /// A write to a segment writes half its bytes.
    ShortWrite,
    /// SIGKILL just before a segment's sync.
    KillBeforeSync,
    /// SIGKILL just after a segment's sync succeeded.
    KillAfterSync,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::EioDrop,
        Kind::EioClean,
        Kind::Eio,
        Kind::EnospcWrite,
        Kind::ShortWrite,
        Kind::KillBeforeSync,
        Kind::KillAfterSync,
    ];

    /// Its name in FAULTSHIM_PLAN and in the shim's `fired` lines.
    pub fn name(self) -> &'static str {
        match self {
            Kind::EioDrop => "eio_drop",
            Kind::EioClean => "eio_clean",
            Kind::Eio => "eio",
            Kind::EnospcWrite => "enospc_write",
            Kind::ShortWrite => "short_write",
            Kind::KillBeforeSync => "kill_before_sync",
            Kind::KillAfterSync => "kill_after_sync",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Whether the process with this plan may die of SIGKILL.
    pub fn kills(self) -> bool {
        matches!(self, Kind::KillBeforeSync | Kind::KillAfterSync)
    }

    /// Whether it loses pages (the fsyncgate faults).
    pub fn loses_pages(self) -> bool {
        matches!(self, Kind::EioDrop | Kind::EioClean)
    }
}

/// One process's fault: `kind` at its `n`th segment sync (or write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub kind: Kind,
    pub n: u32,
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.name(), self.n)
    }
}

/// A fault that fired: a line of the shim's `fired` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    pub kind: Kind,
    pub n: u32,
    pub pid: u32,
    pub file: String,
}

impl Fired {
    /// `KIND:N pid=PID file=NAME`.
    fn parse(l: &str) -> Option<Fired> {
        let mut words = l.split(' ');
        let (kind, n) = words.next()?.split_once(':')?;
        let pid = words.next()?.strip_prefix("pid=")?.parse().ok()?;
        let file = words.next()?.strip_prefix("file=")?;
        Some(Fired {
            kind: Kind::parse(kind)?,
            n: n.parse().ok()?,
            pid,
            file: file.to_string(),
        })
    }
}

/// What the power-loss image keeps of the files that are never fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hints {
    /// `DURABLE` and `TAIL` left out (their pages never reached the disk).
    Lost,
    /// `DURABLE` and `TAIL` with the bytes the live run has (written back
    /// by the kernel before the power went).
    WrittenBack,
}

/// A fresh runs root, its shim state, and the shim.
pub struct Trial {
    /// The runs root (canonical: the shim compares it with readlink's paths).
    pub root: PathBuf,
    /// The shim's state directory (not under the root).
    pub state: PathBuf,
    lib: PathBuf,
    /// Extra FAULTSHIM_* variables for every command (jitter).
    extra: Vec<(String, String)>,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

/// A temporary directory on tmpfs (`/dev/shm`) when there is one, else in
/// the default place: a real fsync there costs nothing, and the shim's
/// shadow, not the device, is what these tests take as the disk.
pub fn scratch_dir(prefix: &str) -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(d) = tempfile::Builder::new().prefix(prefix).tempdir_in(shm)
    {
        return d;
    }
    tempfile::Builder::new().prefix(prefix).tempdir().unwrap()
}

impl Trial {
    pub fn new(lib: &Path) -> Trial {
        let root_dir = scratch_dir("runlog-fault-root-");
        let state_dir = scratch_dir("runlog-fault-state-");
        Trial {
            root: root_dir.path().canonicalize().unwrap(),
            state: state_dir.path().canonicalize().unwrap(),
            lib: lib.to_path_buf(),
            extra: vec![],
            _dirs: (root_dir, state_dir),
        }
    }

    /// Adds `FAULTSHIM_<name>=value` to every command of the trial.
    pub fn set(&mut self, name: &str, value: &str) {
        self.extra
            .push((format!("FAULTSHIM_{name}"), value.to_string()));
    }

    /// The binary on this trial's root under the shim, with `plan` (none:
    /// no fault in this process).
    pub fn cmd(&self, plan: Option<Plan>) -> Command {
        self.under_shim(cli_support::cmd(&self.root), plan)
    }

    /// Any command under the shim, with `plan`.
    pub fn under_shim(&self, mut c: Command, plan: Option<Plan>) -> Command {
        c.env("LD_PRELOAD", &self.lib)
            .env("FAULTSHIM_ROOT", &self.root)
            .env("FAULTSHIM_STATE", &self.state)
            .env(
                "FAULTSHIM_PLAN",
                plan.map(|p| p.to_string()).unwrap_or_default(),
            )
            .env_remove("FAULTSHIM_HOLD")
            .env_remove("FAULTSHIM_SYNC_DELAY_US")
            .env_remove("FAULTSHIM_JITTER_US");
        for (k, v) in &self.extra {
            c.env(k, v);
        }
        c
    }

    fn state_file(&self, name: &str) -> String {
        match std::fs::read_to_string(self.state.join(name)) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => panic!("reading the shim's {name}: {e}"),
        }
    }

    /// Every fault that fired so far, in order.
    pub fn fired(&self) -> Vec<Fired> {
        self.state_file("fired")
            .lines()
            .map(|l| Fired::parse(l).unwrap_or_else(|| panic!("the shim's fired line {l:?}")))
            .collect()
    }

    /// What the shim saw and does not model (empty when all is well).
    pub fn bugs(&self) -> String {
        self.state_file("bugs")
    }

    /// The hold points reached: (lock file name, pid).
    pub fn held(&self) -> Vec<(String, u32)> {
        self.state_file("held")
            .lines()
            .filter_map(|l| {
                let mut w = l.strip_prefix("before_flock ")?.split(' ');
                Some((w.next()?.to_string(), w.next()?.parse().ok()?))
            })
            .collect()
    }

    /// Waits (at most a minute) until process `pid` is held before its
    /// first exclusive flock of `name` (FAULTSHIM_HOLD=before_flock:NAME:PATH).
    pub fn wait_held(&self, name: &str, pid: u32) {
        let t0 = std::time::Instant::now();
        while !self.held().iter().any(|(n, p)| n == name && *p == pid) {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(60),
                "pid {pid} never reached its hold point before the flock of {name}"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// The durable bytes of the file at `path` (its shadow), `None` when no
    /// sync of it ever succeeded.
    pub fn shadow_of(&self, path: &Path) -> Option<Vec<u8>> {
        self.shadow(&std::fs::symlink_metadata(path).unwrap())
    }

    fn shadow(&self, meta: &std::fs::Metadata) -> Option<Vec<u8>> {
        let p = self
            .state
            .join(format!("i-{:x}-{:x}.shadow", meta.dev(), meta.ino()));
        match std::fs::read(&p) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => panic!("reading {}: {e}", p.display()),
        }
    }

    /// The runs root as a power failure now would leave it: every directory
    /// and name (directory operations are taken as durable), each file with
    /// its shadow's bytes (empty when never synced). Left out: `SHARED`
    /// (a hint of this boot only; after a power loss its boot id is another
    /// boot's, so it would count as absent anyway), `LOCK` and `SYNC` (lock
    /// files, never read but for error messages), `SERVE` (a socket); and,
    /// with [`Hints::Lost`], `DURABLE` and `TAIL`, which are never fsynced.
    /// To be called while no process of the trial runs.
    pub fn power_loss_image(&self, hints: Hints) -> tempfile::TempDir {
        let img = scratch_dir("runlog-fault-image-");
        self.copy_durable(&self.root, img.path(), hints);
        img
    }

    fn copy_durable(&self, from: &Path, to: &Path, hints: Hints) {
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            let dest = to.join(&name);
            if meta.is_dir() {
                std::fs::DirBuilder::new()
                    .mode(0o700)
                    .create(&dest)
                    .unwrap();
                self.copy_durable(&e.path(), &dest, hints);
                continue;
            }
            if !meta.is_file() || matches!(name.as_str(), "SHARED" | "LOCK" | "SYNC") {
                continue;
            }
            let bytes = match name.as_str() {
                "DURABLE" | "TAIL" if hints == Hints::Lost => continue,
                "DURABLE" | "TAIL" => std::fs::read(e.path()).unwrap(),
                _ => self.shadow(&meta).unwrap_or_default(),
            };
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&dest)
                .unwrap();
            std::io::Write::write_all(&mut f, &bytes).unwrap();
        }
    }
}

/// Counts per fault kind, in `Kind` order, for summaries.
pub fn by_kind(fired: &[Fired]) -> BTreeMap<Kind, usize> {
    let mut m = BTreeMap::new();
    for f in fired {
        *m.entry(f.kind).or_insert(0) += 1;
    }
    m
}

/// `eio_drop 12, eio_clean 9, …` (every kind, zeros included).
pub fn kinds_line(counts: &BTreeMap<Kind, usize>) -> String {
    Kind::ALL
        .iter()
        .map(|k| format!("{} {}", k.name(), counts.get(k).copied().unwrap_or(0)))
        .collect::<Vec<_>>()
        .join(", ")
}
