//! Child processes measured from outside: wall clock taken by the parent around
//! spawn and reap, peak RSS from the rusage `wait4` returns (the kernel's own
//! high-water mark of the child, nothing sampled), and the fsyncs of one call
//! counted by `strace -c` when strace is installed.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// Most bytes of a child's stdout kept for parsing (the rest is counted, not kept).
pub const MAX_KEPT_STDOUT: usize = 64 << 10;
/// Most bytes of a child's stderr kept for an error message.
pub const MAX_KEPT_STDERR: usize = 4 << 10;

/// How one child process ended and what it cost.
#[derive(Debug)]
pub struct Finished {
    /// From just before spawn to the reap.
    pub secs: f64,
    /// Peak resident set of the child, KiB (`ru_maxrss`).
    pub maxrss_kib: u64,
    /// Exit code, or `None` when killed by a signal.
    pub code: Option<i32>,
    /// The signal that ended it, if any.
    pub signal: Option<i32>,
    /// The first [`MAX_KEPT_STDOUT`] bytes of stdout.
    pub stdout: Vec<u8>,
    /// How many bytes it wrote to stdout in all.
    pub stdout_bytes: u64,
    /// The first [`MAX_KEPT_STDERR`] bytes of stderr, lossy UTF-8.
    pub stderr: String,
}

impl Finished {
    /// `Ok(self)` when the child exited 0, else an error naming what it was and why.
    pub fn ok(self, what: &str) -> Result<Finished, String> {
        if self.code == Some(0) {
            return Ok(self);
        }
        let how = match (self.code, self.signal) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(s)) => format!("signal {s}"),
            (None, None) => "unknown status".into(),
        };
        Err(format!("{what}: {how}: {}", self.stderr.trim()))
    }

    /// Peak RSS in MiB.
    pub fn rss_mib(&self) -> f64 {
        self.maxrss_kib as f64 / 1024.0
    }
}

/// Reads `r` to its end, keeping at most `keep` bytes; returns (kept, total).
pub fn drain_capped(mut r: impl Read, keep: usize) -> (Vec<u8>, u64) {
    let mut kept = Vec::new();
    let mut total = 0u64;
    let mut buf = [0u8; 64 << 10];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                total += n as u64;
                let room = keep.saturating_sub(kept.len()).min(n);
                kept.extend_from_slice(&buf[..room]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    (kept, total)
}

/// Reaps `pid` with `wait4`: (exit code, signal, peak RSS KiB).
#[allow(unsafe_code)]
fn wait4(pid: u32) -> Result<(Option<i32>, Option<i32>, u64), String> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| format!("pid {pid} out of range"))?;
    let mut status: libc::c_int = 0;
    // SAFETY: `rusage` is a plain C struct of integers, for which all-zero bytes
    // is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers are to live, writable locals of the types wait4
        // expects; `pid` is our own unreaped child, so no other pid is reaped.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("wait4 on child {pid}: {e}"));
        }
    }
    let maxrss = u64::try_from(ru.ru_maxrss).unwrap_or(0);
    if libc::WIFEXITED(status) {
        Ok((Some(libc::WEXITSTATUS(status)), None, maxrss))
    } else if libc::WIFSIGNALED(status) {
        Ok((None, Some(libc::WTERMSIG(status)), maxrss))
    } else {
        Ok((None, None, maxrss))
    }
}

/// Reads the child's stderr on a thread (so a chatty child never blocks on a
/// full pipe while the parent reads stdout).
fn stderr_reader(child: &mut Child) -> std::thread::JoinHandle<String> {
    let err = child.stderr.take();
    std::thread::spawn(move || match err {
        Some(e) => String::from_utf8_lossy(&drain_capped(e, MAX_KEPT_STDERR).0).into_owned(),
        None => String::new(),
    })
}

fn reap(
    child: Child,
    started: Instant,
    stdout: (Vec<u8>, u64),
    err: std::thread::JoinHandle<String>,
) -> Result<Finished, String> {
    let (code, signal, maxrss_kib) = wait4(child.id())?;
    let secs = started.elapsed().as_secs_f64();
    Ok(Finished {
        secs,
        maxrss_kib,
        code,
        signal,
        stdout: stdout.0,
        stdout_bytes: stdout.1,
        stderr: err.join().unwrap_or_default(),
    })
}

/// Runs `cmd` to its end with stdin closed, draining its output.
pub fn run(cmd: &mut Command) -> Result<Finished, String> {
    run_fed(cmd, None)
}

/// Spawns `cmd` (a `runlog apply`), writes `line`, and times spawn to the first
/// ack line read back. Returns (seconds to first ack, the ack, the finished child).
pub fn first_ack(cmd: &mut Command, line: &str) -> Result<(f64, String, Finished), String> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("spawn apply: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("apply: no stdin pipe")?;
    let stdout = child.stdout.take().ok_or("apply: no stdout pipe")?;
    let err = stderr_reader(&mut child);
    let wrote = stdin.write_all(format!("{line}\n").as_bytes());
    let mut reader = BufReader::new(stdout.take(MAX_KEPT_STDOUT as u64));
    let mut ack = String::new();
    let read = reader.read_line(&mut ack);
    let secs = started.elapsed().as_secs_f64();
    // Closing stdin ends `apply`; reap it whatever happened above.
    drop(stdin);
    let rest = drain_capped(reader, MAX_KEPT_STDOUT);
    let done = reap(child, started, rest, err)?;
    wrote.map_err(|e| format!("apply: write to stdin: {e}"))?;
    read.map_err(|e| format!("apply: read ack: {e}"))?;
    Ok((secs, ack.trim().to_string(), done))
}

/// Whether `strace` can be run here.
pub fn strace_present() -> bool {
    Command::new("strace")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `program args` under `strace -f -c -e trace=fsync,fdatasync` and
/// returns how many fsync and fdatasync calls it made (its own exit must be 0).
pub fn count_fsyncs(program: &Path, args: &[&str], tmp: &Path) -> Result<u64, String> {
    let report = tmp.join("strace.txt");
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-c", "-e", "trace=fsync,fdatasync", "-o"])
        .arg(&report)
        .arg(program)
        .args(args);
    run(&mut cmd)?.ok("strace")?;
    let text = std::fs::read_to_string(&report)
        .map_err(|e| format!("read strace report {}: {e}", report.display()))?;
    parse_strace_counts(&text)
}

/// Sums the `calls` column of the fsync and fdatasync rows of an `strace -c`
/// summary. No row means no call.
pub fn parse_strace_counts(text: &str) -> Result<u64, String> {
    let mut total = 0u64;
    for line in text.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if let [_, _, _, calls, .., name] = cols.as_slice()
            && matches!(*name, "fsync" | "fdatasync")
        {
            total += calls
                .parse::<u64>()
                .map_err(|e| format!("strace row {line:?}: calls {calls:?}: {e}"))?;
        }
    }
    Ok(total)
}

/// Runs `cmd` to its end with `input` written to its stdin (on a thread, so a
/// child that answers as it reads never blocks on a full stdout pipe), then
/// closed.
pub fn run_with_input(cmd: &mut Command, input: Vec<u8>) -> Result<Finished, String> {
    run_fed(cmd, Some(input))
}

/// Runs `cmd` to its end, its stdin fed `input` then closed (closed at once
/// without), draining its output.
fn run_fed(cmd: &mut Command, input: Option<Vec<u8>>) -> Result<Finished, String> {
    let stdin = if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    cmd.stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("spawn {:?}: {e}", cmd.get_program()))?;
    let writer = match input {
        Some(bytes) => {
            let mut stdin = child.stdin.take().ok_or("no stdin pipe")?;
            Some(std::thread::spawn(move || stdin.write_all(&bytes)))
        }
        None => None,
    };
    let err = stderr_reader(&mut child);
    let out = match child.stdout.take() {
        Some(o) => drain_capped(o, MAX_KEPT_STDOUT),
        None => (Vec::new(), 0),
    };
    let done = reap(child, started, out, err)?;
    match writer.map(|w| w.join()) {
        None | Some(Ok(Ok(()))) => Ok(done),
        Some(Ok(Err(e))) => Err(format!(
            "write to the child's stdin: {e}: {}",
            done.stderr.trim()
        )),
        Some(Err(_)) => Err("the stdin writer thread panicked".into()),
    }
}
