//! Proves the docs are true to the binary: every command in the shell and
//! console blocks of README.md, docs/GUIDE.md, docs/TOUR.md and docs/CLI.md is
//! run with bash, and wherever a doc shows output, the output is compared, so
//! a changed message fails the build.
//!
//! The convention (docs/CLI.md, "Commands in these docs", says it for the
//! docs' writers):
//!
//! * A ```` ```sh ````, ```` ```bash ```` or ```` ```shell ```` block is commands
//!   only (a trailing `\` continues a line, `#` lines are comments); each must
//!   exit 0. Its output is not compared.
//! * A ```` ```console ```` block is a session: a line starting `$ ` is a
//!   command (continued by a trailing `\`), the lines after it up to the next
//!   `$ ` are exactly what it prints, stdout and stderr together. No lines
//!   means it prints nothing. Each command must exit 0, unless the next command
//!   is an `echo` of `$?`, whose shown output then says the status.
//! * In shown output, `…` alone on a line stands for any number of lines
//!   (none included), `[..]` for any text within one line, and a timestamp as
//!   runlog prints one (`2026-11-29T09:42:14.887Z`) matches any such timestamp.
//!   Trailing spaces are ignored.
//! * `<!-- docs-test: skip: REASON -->` on the line before a block's fence
//!   (GitHub does not render it) leaves the block out; the test prints each
//!   skipped block and its reason on the terminal, past the harness's capture.
//!   A block that must not run in a test (see [`NOT_IN_A_TEST`]: a `cargo
//!   install` or `build`, a `pip install`, an `s3://` URL, `runlog ui`, which
//!   serves until stopped, `scripts/test`) and is not marked fails the test,
//!   unrun.
//! * `<!-- docs-test: shrink: FROM => TO -->` there (one per line, beside a
//!   skip or each other) runs the block's commands with FROM replaced by TO:
//!   a smaller size for a command that takes too long at the doc's (the guide's
//!   `runlog demo --units 2000 … --lose-host`, 47 s, runs at 200 units). A
//!   FROM the block does not contain is an error.
//!
//! How they run: each document in one bash process (`bash -c`, so a message
//! of the shell's own reads `bash: …`) in a fresh temporary directory, every
//! block in order, so state carries across blocks as for a reader following
//! along (the runs, exported variables, `$?`, `$!`). PATH starts with the
//! directory of the `runlog` that `cargo test` built; stdin is `/dev/null`;
//! `RUNLOG_DIR`, `RUNLOG_KEY_FILE` and the remote variables are cleared, and
//! `TMPDIR` is the temporary directory. The docs write commands as run from
//! the repository root, so the directory holds a link `examples` to the
//! repository's. Two substitutions keep a test run to itself: `/tmp/` in a
//! command or its shown output names the temporary directory's `tmp/`, and
//! `cargo run -q --example NAME --` is the example's executable as
//! `cargo test` built it (`cli_support::example_binary`). Each command gets
//! [`COMMAND_TIMEOUT`]. Not run: the skipped blocks, and blocks in any other
//! language (Rust: `docs_front_pages.rs` and the doctests; Python: README's are
//! run by `python/tests/test_readme.py` and `test_drive_example.py`; `text`
//! and `json` show shapes, not commands). A document that runs `python3` is
//! skipped, saying so, when python3 is absent, unless `RUNLOG_REQUIRE_PYTHON=1`.
use crate::cli_support::{BIN, example_binary};
use std::fmt::Write as _;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long one command may take before the document fails naming it.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// What the lines before a fence may say to the test.
const DIRECTIVE: &str = "<!-- docs-test:";

/// Commands a test must not run: a block holding one must be marked skipped.
const NOT_IN_A_TEST: [(&str, &str); 7] = [
    ("cargo install", "installs into ~/.cargo"),
    ("cargo build", "a nested build"),
    ("pip install", "installs from the network"),
    ("s3://", "needs an S3 endpoint"),
    ("runlog ui", "serves until stopped"),
    ("scripts/test", "runs every test, this one included"),
    ("cargo run --release", "a release build"),
];

#[derive(Debug, PartialEq)]
enum Kind {
    /// `sh`/`bash`/`shell`: commands, status checked.
    Commands,
    /// `console`: commands and their output.
    Session,
}

#[derive(Debug)]
struct Block {
    kind: Kind,
    /// 1-based line of the opening fence.
    line: usize,
    skip: Option<String>,
    /// `(FROM, TO)` replacements the test makes in the commands.
    shrink: Vec<(String, String)>,
    commands: Vec<Cmd>,
}

#[derive(Debug)]
struct Cmd {
    /// 1-based line where the command starts.
    line: usize,
    text: String,
    /// The shown output with each line's number (`Session` only).
    expected: Option<Vec<(usize, String)>>,
    /// Whether a nonzero status is shown by the next command (`echo $?`).
    status_shown_next: bool,
}

/// What a `<!-- docs-test: … -->` line before a fence says.
#[derive(Debug, PartialEq)]
enum Directive {
    /// `skip: REASON`: the block is not run.
    Skip(String),
    /// `shrink: FROM => TO`: the test runs the block's commands with FROM
    /// replaced by TO (a smaller size, where the doc's own takes too long).
    Shrink(String, String),
}

/// Splits `doc` into its shell and console blocks, with the directives
/// before them. Errors name the line.
fn parse(doc: &str) -> Result<Vec<Block>, String> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut blocks = vec![];
    let mut pending: Vec<Directive> = vec![];
    let mut i = 0;
    while i < lines.len() {
        let open = lines[i].trim_start();
        let Some(info) = open.strip_prefix("```") else {
            if let Some(d) = directive(lines[i], i + 1)? {
                pending.push(d);
                let next = lines.get(i + 1).map_or("", |l| l.trim_start());
                if !next.starts_with("```") && !next.starts_with(DIRECTIVE) {
                    return Err(format!(
                        "line {}: a docs-test marker must be right before a block's fence",
                        i + 1
                    ));
                }
            }
            i += 1;
            continue;
        };
        let fence_line = i + 1;
        let body_start = i + 1;
        let mut end = body_start;
        while end < lines.len() && !lines[end].trim_start().starts_with("```") {
            end += 1;
        }
        if end == lines.len() {
            return Err(format!("line {fence_line}: a block that never closes"));
        }
        let kind = match info.trim() {
            "sh" | "bash" | "shell" => Some(Kind::Commands),
            "console" => Some(Kind::Session),
            _ => None,
        };
        let directives = std::mem::take(&mut pending);
        match kind {
            None if !directives.is_empty() => {
                return Err(format!(
                    "line {fence_line}: a docs-test marker before a block that is never run (`{}`)",
                    info.trim()
                ));
            }
            None => {}
            Some(kind) => {
                let body = &lines[body_start..end];
                let commands = match kind {
                    Kind::Commands => commands(body, body_start + 1),
                    Kind::Session => session(body, body_start + 1)?,
                };
                let mut skip = None;
                let mut shrink = vec![];
                for d in directives {
                    match d {
                        Directive::Skip(why) => skip = Some(why),
                        Directive::Shrink(from, to) => {
                            if !commands.iter().any(|c| c.text.contains(&from)) {
                                return Err(format!(
                                    "line {fence_line}: `shrink: {from} => {to}` before a block \
                                     with no `{from}` in it"
                                ));
                            }
                            shrink.push((from, to));
                        }
                    }
                }
                blocks.push(Block {
                    kind,
                    line: fence_line,
                    skip,
                    shrink,
                    commands,
                });
            }
        }
        i = end + 1;
    }
    Ok(blocks)
}

/// The directive on a `<!-- docs-test: skip: REASON -->` or
/// `<!-- docs-test: shrink: FROM => TO -->` line; any other use of the marker
/// is an error, so a typo cannot silently run or skip a block.
fn directive(line: &str, n: usize) -> Result<Option<Directive>, String> {
    let Some(rest) = line.trim().strip_prefix(DIRECTIVE) else {
        return Ok(None);
    };
    let body = rest.strip_suffix("-->").map(str::trim);
    let found = match body {
        Some(b) if b.starts_with("skip:") => {
            Some(Directive::Skip(b["skip:".len()..].trim().to_string()))
                .filter(|d| *d != Directive::Skip(String::new()))
        }
        Some(b) if b.starts_with("shrink:") => b["shrink:".len()..]
            .split_once(" => ")
            .map(|(f, t)| Directive::Shrink(f.trim().to_string(), t.trim().to_string()))
            .filter(|d| matches!(d, Directive::Shrink(f, _) if !f.is_empty())),
        _ => None,
    };
    match found {
        Some(d) => Ok(Some(d)),
        None => Err(format!(
            "line {n}: a docs-test marker reads `<!-- docs-test: skip: REASON -->` or \
             `<!-- docs-test: shrink: FROM => TO -->`, not `{}`",
            line.trim()
        )),
    }
}

/// A trailing `\` joins the next line; returns the joined command and the
/// index after it.
fn joined(body: &[&str], mut j: usize, first: &str) -> (String, usize) {
    let mut text = first.to_string();
    while text.ends_with('\\') && j < body.len() {
        text.push('\n');
        text.push_str(body[j]);
        j += 1;
    }
    (text, j)
}

fn commands(body: &[&str], first_line: usize) -> Vec<Cmd> {
    let mut out = vec![];
    let mut j = 0;
    while j < body.len() {
        let line = body[j];
        let start = j;
        let (text, next) = joined(body, j + 1, line);
        j = next;
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        out.push(Cmd {
            line: first_line + start,
            text,
            expected: None,
            status_shown_next: false,
        });
    }
    out
}

fn session(body: &[&str], first_line: usize) -> Result<Vec<Cmd>, String> {
    let mut out: Vec<Cmd> = vec![];
    let mut j = 0;
    while j < body.len() {
        let line = body[j];
        if let Some(first) = line.strip_prefix("$ ") {
            let start = j;
            let (text, next) = joined(body, j + 1, first);
            j = next;
            out.push(Cmd {
                line: first_line + start,
                text,
                expected: Some(vec![]),
                status_shown_next: false,
            });
            continue;
        }
        let Some(cmd) = out.last_mut() else {
            return Err(format!(
                "line {}: a console block's first line must be a `$ ` command",
                first_line + j
            ));
        };
        cmd.expected
            .as_mut()
            .unwrap()
            .push((first_line + j, line.to_string()));
        j += 1;
    }
    for k in 1..out.len() {
        let next = out[k].text.trim_start();
        out[k - 1].status_shown_next = next.starts_with("echo") && next.contains("$?");
    }
    Ok(out)
}

/// One piece of a shown output line.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Text(&'a str),
    /// `[..]`: any text within the line.
    Any,
    /// `2026-11-29T09:42:14.887Z`: any timestamp of that shape.
    Stamp,
}

const STAMP_LEN: usize = "2026-11-29T09:42:14.887Z".len();

/// Whether `s` starts with a timestamp as runlog prints one.
fn is_stamp(s: &[u8]) -> bool {
    const SHAPE: &[u8] = b"dddd-dd-ddTdd:dd:dd.dddZ";
    s.len() >= STAMP_LEN
        && SHAPE.iter().zip(s).all(|(&p, &c)| match p {
            b'd' => c.is_ascii_digit(),
            _ => c == p,
        })
}

fn pieces(expected: &str) -> Vec<Piece<'_>> {
    let mut out = vec![];
    let bytes = expected.as_bytes();
    let (mut from, mut i) = (0, 0);
    while i < bytes.len() {
        let (piece, len) = if bytes[i..].starts_with(b"[..]") {
            (Piece::Any, 4)
        } else if is_stamp(&bytes[i..]) {
            (Piece::Stamp, STAMP_LEN)
        } else {
            i += 1;
            continue;
        };
        if from < i {
            out.push(Piece::Text(&expected[from..i]));
        }
        out.push(piece);
        i += len;
        from = i;
    }
    if from < bytes.len() {
        out.push(Piece::Text(&expected[from..]));
    }
    out
}

/// Whether one actual line matches one shown line.
fn line_matches(expected: &str, actual: &str) -> bool {
    fn go(p: &[Piece], a: &str) -> bool {
        match p.split_first() {
            None => a.is_empty(),
            Some((Piece::Text(t), rest)) => a.strip_prefix(t).is_some_and(|a| go(rest, a)),
            Some((Piece::Stamp, rest)) => is_stamp(a.as_bytes()) && go(rest, &a[STAMP_LEN..]),
            Some((Piece::Any, rest)) => a
                .char_indices()
                .map(|(i, _)| i)
                .chain([a.len()])
                .any(|i| go(rest, &a[i..])),
        }
    }
    go(&pieces(expected.trim_end()), actual.trim_end())
}

/// Whether the actual lines match the shown ones, `…` lines standing for any
/// number of lines.
fn output_matches(expected: &[&str], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((e, rest)) if e.trim() == "…" => {
            (0..=actual.len()).any(|k| output_matches(rest, &actual[k..]))
        }
        Some((e, rest)) => actual
            .split_first()
            .is_some_and(|(a, more)| line_matches(e, a) && output_matches(rest, more)),
    }
}

/// A listing of the shown output (with the doc's line numbers) against what
/// the command printed, marking the first line where a left-to-right reading
/// parts from it.
fn listing(expected: &[(usize, String)], actual: &[&str]) -> String {
    let mut first_bad = None;
    let mut a = 0;
    for (k, (_, e)) in expected.iter().enumerate() {
        if e.trim() == "…" {
            // Resume at the first actual line the next shown line matches.
            let next = expected[k + 1..].iter().find(|(_, l)| l.trim() != "…");
            match next {
                Some((_, n)) => match actual[a..].iter().position(|l| line_matches(n, l)) {
                    Some(p) => a += p,
                    None => {
                        first_bad = Some(k + 1);
                        break;
                    }
                },
                None => a = actual.len(),
            }
            continue;
        }
        if a < actual.len() && line_matches(e, actual[a]) {
            a += 1;
        } else {
            first_bad = Some(k);
            break;
        }
    }
    // The printed line the reading stopped at, or the first one beyond all
    // that was shown.
    let bad_actual = (first_bad.is_some() || a < actual.len()).then_some(a);
    let mut s = String::from("  shown in the doc:\n");
    for (k, (n, e)) in expected.iter().enumerate() {
        let mark = if first_bad == Some(k) { ">" } else { " " };
        let _ = writeln!(s, "  {mark} {n:>4} | {e}");
    }
    if expected.is_empty() {
        s.push_str("         (nothing)\n");
    }
    s.push_str("  printed:\n");
    for (k, l) in actual.iter().enumerate() {
        let mark = if bad_actual == Some(k) { ">" } else { " " };
        let _ = writeln!(s, "  {mark} {:>4} | {l}", k + 1);
    }
    if actual.is_empty() {
        s.push_str("         (nothing)\n");
    }
    s
}

/// The command as the test runs it: `/tmp/` moved into the temporary
/// directory, `cargo run -q --example NAME --` replaced by the example.
fn substitute(text: &str, tmp: &str) -> String {
    let mut s = text.replace("/tmp/", tmp);
    const RUN: &str = "cargo run -q --example ";
    while let Some(at) = s.find(RUN) {
        let rest = &s[at + RUN.len()..];
        let name_len = rest.find(' ').unwrap_or(rest.len());
        let name = rest[..name_len].to_string();
        let mut end = at + RUN.len() + name_len;
        if s[end..].starts_with(" --") {
            end += 3;
        }
        let exe = example_binary(&name);
        s.replace_range(at..end, exe.to_str().unwrap());
    }
    s
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// What one command printed and its exit status.
struct Ran {
    output: String,
    status: i32,
}

/// Runs `commands` (text already substituted) in one bash process in `dir`,
/// in order; returns each one's output and status, and why it stopped early
/// (a timeout) at the command after the last returned.
fn run_all(dir: &Path, commands: &[String]) -> (Vec<Ran>, Option<String>) {
    let token = format!("docs-test-{}", std::process::id());
    let mut script = String::from("__ret() { return \"$1\"; }\n__rc=0\n");
    for (k, c) in commands.iter().enumerate() {
        // `__ret` gives the command the previous one's `$?`; `eval` keeps a
        // syntax error to its command; the marker after it carries its status.
        let quoted = c.replace('\'', "'\\''");
        let _ = write!(
            script,
            "__ret \"$__rc\"; eval '{quoted}'\n__rc=$?; printf '\\036{token} {k} %d\\036' \"$__rc\"\n"
        );
    }
    let (mut reader, writer) = std::io::pipe().expect("pipe");
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = match std::env::var_os("PATH") {
        Some(p) => format!("{}:{}", bin_dir.display(), p.to_string_lossy()),
        None => bin_dir.display().to_string(),
    };
    let mut child = {
        let mut c = Command::new("bash");
        c.arg("-c").arg(&script).arg("bash").current_dir(dir);
        for v in [
            "RUNLOG_DIR",
            "RUNLOG_KEY_FILE",
            "RUNLOG_REMOTE_ROOT",
            "RUNLOG_REMOTE_POLICY",
            "RUNLOG_REMOTE_ROUNDS_IN_FLIGHT",
            "RUNLOG_NOW",
            "BASH_ENV",
            "ENV",
        ] {
            c.env_remove(v);
        }
        c.env("PATH", path)
            .env("TMPDIR", dir.join("tmp"))
            .stdin(Stdio::null())
            .stdout(writer.try_clone().expect("pipe"))
            .stderr(writer)
            .process_group(0);
        c.spawn().expect("spawn bash")
    };
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    // Not joined: a process a command left behind outside the group could
    // hold the pipe open; the thread ends with the test binary at worst.
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut ran = vec![];
    let mut buf: Vec<u8> = vec![];
    let mut deadline = Instant::now() + COMMAND_TIMEOUT;
    let mut stopped = None;
    'commands: for k in 0..commands.len() {
        let marker = format!("\x1e{token} {k} ");
        loop {
            if let Some(at) = find(&buf, marker.as_bytes()) {
                let rest = &buf[at + marker.len()..];
                if let Some(close) = rest.iter().position(|&b| b == 0x1e) {
                    let status = String::from_utf8_lossy(&rest[..close])
                        .parse()
                        .expect("status");
                    ran.push(Ran {
                        output: String::from_utf8_lossy(&buf[..at]).into_owned(),
                        status,
                    });
                    buf.drain(..at + marker.len() + close + 1);
                    deadline = Instant::now() + COMMAND_TIMEOUT;
                    continue 'commands;
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(chunk) => buf.extend_from_slice(&chunk),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let text = String::from_utf8_lossy(&buf);
                    stopped = Some(format!(
                        "no end after {COMMAND_TIMEOUT:?}; printed:\n{text}"
                    ));
                    break 'commands;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let text = String::from_utf8_lossy(&buf);
                    stopped = Some(format!("bash ended before it; printed:\n{text}"));
                    break 'commands;
                }
            }
        }
    }
    // Background jobs a doc started and left, and a command that timed out,
    // go with bash. SAFETY: kill(2) of the process group this test started.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
    (ran, stopped)
}

/// Runs every block of the document at `rel` (from the repository root) and
/// fails listing each command whose output or status disagrees with the doc.
fn doc_runs_as_shown(rel: &str) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(repo.join(rel)).unwrap();
    let blocks = parse(&doc).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let mut problems = vec![];
    let mut skipped = 0;
    let mut to_run: Vec<(&Block, &Cmd)> = vec![];
    for b in &blocks {
        if let Some(why) = &b.skip {
            skipped += 1;
            crate::skip_support::to_fd2(&format!(
                "SKIPPED docs_commands: {rel}:{} ({} commands): {why}\n",
                b.line,
                b.commands.len()
            ));
            continue;
        }
        for c in &b.commands {
            if let Some((what, why)) = NOT_IN_A_TEST.iter().find(|(w, _)| c.text.contains(w)) {
                problems.push(format!(
                    "{rel}:{}: `{}` cannot run in a test ({what}: {why}); make the block runnable \
                     or put `<!-- docs-test: skip: REASON -->` right before its fence (line {})",
                    c.line, c.text, b.line
                ));
            }
            to_run.push((b, c));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let needs_python = to_run.iter().any(|(_, c)| c.text.contains("python3 "));
    if needs_python && Command::new("python3").arg("--version").output().is_err() {
        crate::skip_support::skip(
            &format!("docs_commands {rel}"),
            "RUNLOG_REQUIRE_PYTHON",
            "python3 not found on PATH, which the document runs",
        );
        return;
    }

    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("tmp")).unwrap();
    std::os::unix::fs::symlink(repo.join("examples"), dir.path().join("examples")).unwrap();
    let tmp = format!("{}/", dir.path().join("tmp").display());
    let texts: Vec<String> = to_run
        .iter()
        .map(|(b, c)| {
            let shrunk = b
                .shrink
                .iter()
                .fold(c.text.clone(), |t, (from, to)| t.replace(from, to));
            substitute(&shrunk, &tmp)
        })
        .collect();
    let started = Instant::now();
    let (ran, stopped) = run_all(dir.path(), &texts);
    for (k, ((block, cmd), r)) in to_run.iter().zip(&ran).enumerate() {
        let actual: Vec<&str> = r.output.lines().collect();
        let mut said = vec![];
        if r.status != 0 && !cmd.status_shown_next {
            said.push(format!(
                "  exit status {} (a command exits 0 unless the next one is `echo $?`)",
                r.status
            ));
        }
        if let Some(expected) = &cmd.expected {
            let shown: Vec<String> = expected
                .iter()
                .map(|(_, l)| l.replace("/tmp/", &tmp))
                .collect();
            let shown_refs: Vec<&str> = shown.iter().map(String::as_str).collect();
            if !output_matches(&shown_refs, &actual) {
                let numbered: Vec<(usize, String)> =
                    expected.iter().map(|(n, _)| *n).zip(shown).collect();
                said.push(listing(&numbered, &actual));
            }
        } else if r.status != 0 {
            said.push(format!("  printed:\n{}", r.output));
        }
        if !said.is_empty() {
            let run_as = if texts[k] == cmd.text {
                String::new()
            } else {
                format!("  (run as: {})\n", texts[k])
            };
            problems.push(format!(
                "{rel}:{} (block at line {}):\n  $ {}\n{run_as}{}",
                cmd.line,
                block.line,
                cmd.text,
                said.join("\n")
            ));
        }
    }
    if let Some(why) = stopped {
        let (_, cmd) = to_run[ran.len()];
        problems.push(format!("{rel}:{}: `{}`: {why}", cmd.line, cmd.text));
    }
    eprintln!(
        "{rel}: {} commands in {} blocks run, {skipped} blocks skipped, in {:.1?}",
        to_run.len(),
        blocks.len() - skipped,
        started.elapsed()
    );
    assert!(
        problems.is_empty(),
        "{rel} disagrees with the binary ({} of {} commands; the temporary directory \
         `{}` stands for `/tmp/` in the doc):\n\n{}",
        problems.len(),
        to_run.len(),
        dir.path().display(),
        problems.join("\n\n")
    );
}

#[test]
fn readme_commands_run_as_shown() {
    doc_runs_as_shown("README.md");
}

#[test]
fn guide_commands_run_as_shown() {
    doc_runs_as_shown("docs/GUIDE.md");
}

#[test]
fn tour_commands_run_and_print_what_it_shows() {
    doc_runs_as_shown("docs/TOUR.md");
}

#[test]
fn cli_md_commands_run_and_print_what_it_shows() {
    doc_runs_as_shown("docs/CLI.md");
}

/// The convention's wildcards stand for what they say and no more, and a
/// session's statuses and outputs are read from the block as documented.
#[test]
fn docs_wildcards_match_only_what_they_stand_for() {
    assert!(line_matches("took [..] ms", "took 12.5 ms"));
    assert!(!line_matches("took [..] ms", "took 12.5 s"));
    assert!(line_matches(
        "created 2026-11-29T09:42:14.887Z  x",
        "created 2031-01-02T03:04:05.006Z  x  "
    ));
    assert!(!line_matches(
        "created 2026-11-29T09:42:14.887Z",
        "created yesterday"
    ));
    assert!(!line_matches("seq 17", "seq 18"));
    assert!(output_matches(&["a", "…", "d"], &["a", "b", "c", "d"]));
    assert!(output_matches(&["a", "…", "d"], &["a", "d"]));
    assert!(!output_matches(&["a", "…", "d"], &["a", "b", "c"]));
    assert!(!output_matches(&["a"], &["a", "b"]));
    assert!(!output_matches(&[], &["a"]));

    let doc = "x\n<!-- docs-test: skip: needs a cluster -->\n```sh\nrunlog ui\n```\n\n\
               ```console\n$ false\n$ echo $?\n1\n$ printf 'a\\n' \\\n    'b'\na\n```\n";
    let blocks = parse(doc).unwrap();
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0].skip.as_deref(), Some("needs a cluster"));
    let s = &blocks[1];
    assert_eq!(s.kind, Kind::Session);
    assert_eq!(s.commands.len(), 3);
    assert!(s.commands[0].status_shown_next && !s.commands[1].status_shown_next);
    assert_eq!(
        s.commands[1].expected.as_ref().unwrap(),
        &[(10, "1".into())]
    );
    assert_eq!(s.commands[2].text, "printf 'a\\n' \\\n    'b'");
    assert_eq!(s.commands[2].line, 11);
    let shrunk = parse("<!-- docs-test: shrink: --units 2000 => --units 20 -->\n```sh\nrunlog demo --units 2000\n```\n").unwrap();
    assert_eq!(
        shrunk[0].shrink,
        [("--units 2000".into(), "--units 20".into())]
    );
    assert!(
        parse("<!-- docs-test: shrink: --units 9 => --units 1 -->\n```sh\nrunlog demo\n```\n")
            .is_err()
    );
    assert!(parse("<!-- docs-test: skip: x -->\n\n```sh\ntrue\n```\n").is_err());
    assert!(parse("<!-- docs-test: skp: typo -->\n```sh\ntrue\n```\n").is_err());
    assert!(parse("```console\noutput first\n```\n").is_err());
}

/// README stays a front door and PERFORMANCE.md today's figures (issue 49):
/// at most 250 and 400 lines. Investigation goes to git's history, how-to to
/// docs/GUIDE.md.
#[test]
fn readme_and_performance_stay_within_their_lengths() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (doc, max) in [("README.md", 250), ("docs/PERFORMANCE.md", 400)] {
        let n = std::fs::read_to_string(repo.join(doc))
            .unwrap_or_else(|e| panic!("read {doc}: {e}"))
            .lines()
            .count();
        assert!(n <= max, "{doc} has {n} lines, more than its {max}");
    }
}
