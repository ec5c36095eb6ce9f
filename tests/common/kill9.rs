//! The kill -9 harness of tests/crash/kill9_*.rs: the parent re-executes this
//! test binary to run one ignored child test on a store directory, kills it
//! with SIGKILL after a delay, and reads what the child printed before it died.
//! The child prints, each line ending with " ." when its write completed,
//! `opened SEQ .` once recovered, `ack SEQ VALUE .` after each `append`
//! returned, and `compacting .` / `compacted .` around each compaction.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// The store directory the child opens.
pub const CHILD_DIR: &str = "RUNLOG_KILL9_DIR";
/// The iteration the child runs (its values and options depend on it).
pub const CHILD_ITER: &str = "RUNLOG_KILL9_ITER";

/// The child's side: the directory and iteration its parent gave it, or
/// `None` when the child test runs on its own (then it does nothing).
pub fn child_args() -> Option<(String, u64)> {
    let dir = std::env::var(CHILD_DIR).ok()?;
    let iter = std::env::var(CHILD_ITER).unwrap().parse().unwrap();
    Some((dir, iter))
}

/// The soak's seed: `RUNLOG_KILL9_SEED`, else from the clock (printed by the
/// soak, so a failure can be replayed).
pub fn seed() -> u64 {
    super::env_u64(
        "RUNLOG_KILL9_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1,
    )
}

/// xorshift64*: enough randomness for timings, reproducible from the printed seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// One kill: how to start the child and when to kill it.
pub struct Kill<'a> {
    /// `module_path!()` of the module holding the child test.
    pub module: &'a str,
    /// The child test's function name.
    pub child: &'a str,
    pub dir: &'a Path,
    pub iter: u64,
    /// Count the delay from the child's `opened` line (waiting at most this
    /// long for it), or, when `None`, from the spawn.
    pub after_open: Option<Duration>,
    pub delay: Duration,
    /// Where the child's stderr goes (shown if it exits by itself).
    pub stderr: &'a Path,
    /// The iteration's description for failure messages.
    pub what: &'a str,
}

/// What a killed child printed in whole lines.
#[derive(Debug, Default)]
pub struct Killed {
    /// (seq, value) of every acknowledged append.
    pub acked: Vec<(u64, u64)>,
    /// It printed `opened`: recovery had finished.
    pub opened: bool,
    /// It was killed between `compacting` and `compacted`.
    pub compacting: bool,
    /// Compactions it finished.
    pub compactions: u64,
}

impl Kill<'_> {
    /// Spawns the child, kills it with SIGKILL after the delay and returns what
    /// it printed; fails if the child ended by itself before the kill.
    pub fn run(&self) -> Killed {
        let mut child = super::child_test(self.module, self.child)
            .env(CHILD_DIR, self.dir)
            .env(CHILD_ITER, self.iter.to_string())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(self.stderr).unwrap())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (opened_tx, opened_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut lines = vec![];
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if l.starts_with("opened ") {
                    let _ = opened_tx.send(());
                }
                lines.push(l);
            }
            lines
        });
        if let Some(wait) = self.after_open {
            let _ = opened_rx.recv_timeout(wait);
        }
        std::thread::sleep(self.delay);
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        let lines = reader.join().unwrap();
        // Whole lines only: a line ends with " ." when its write completed.
        let mut k = Killed::default();
        for l in &lines {
            match l.split(' ').collect::<Vec<_>>().as_slice() {
                ["ack", seq, v, "."] => k.acked.push((seq.parse().unwrap(), v.parse().unwrap())),
                ["opened", _, "."] => k.opened = true,
                ["compacting", "."] => k.compacting = true,
                ["compacted", "."] => {
                    k.compacting = false;
                    k.compactions += 1;
                }
                _ => {}
            }
        }
        assert!(
            status.code().is_none(),
            "{}: child exited by itself: {status}: {}",
            self.what,
            std::fs::read_to_string(self.stderr).unwrap_or_default()
        );
        k
    }
}
