//! `runlog serve RUN` (docs/CLI.md, "serve"): one-shot writers hand their
//! change to the server over the run's `SERVE` socket and print its answer,
//! the same as applying the change themselves; a dead server's socket sends
//! them back to the run; a server killed at random never leaves an
//! acknowledgement that is not durable. `RUNLOG_SERVE_KILL9_UNITS` sets the
//! soak's units (default 1000; two calls each).
use crate::cli_support::*;
use runlog::engine::sim::SimRng;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const RUN: &str = "r";

/// Starts `serve RUN` with `extra` arguments; returns once it said it serves.
fn serve(root: &Path, extra: &[&str]) -> (Child, String) {
    let mut child = cmd(root)
        .args(["serve", RUN])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn runlog serve");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("serving run r at"), "serve said {line:?}");
    (child, line)
}

/// SIGTERM, then the exit status and stderr.
fn stop(mut child: Child) -> (Option<i32>, String) {
    // SAFETY: `kill` of our own child's pid with a valid signal number.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM)
    };
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    (status.code(), err)
}

/// (exit code, stdout, stderr) of one call.
fn call(root: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o = runlog(root, args);
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn changes_handed_to_a_server_print_what_applying_them_directly_prints() {
    let served_dir = tempfile::tempdir().unwrap();
    let direct_dir = tempfile::tempdir().unwrap();
    let units: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    init_run(served_dir.path(), RUN, &units);
    init_run(direct_dir.path(), RUN, &units);
    let (server, _) = serve(served_dir.path(), &[]);
    assert!(served_dir.path().join("runs/r/SERVE").exists());
    // The calls every change command makes: accepted, refused, with --json.
    // `--lock-timeout 0` on the served side: the server holds the writer
    // lock, so a call that tried to open the run itself would fail at once.
    let calls: &[&[&str]] = &[
        &["unit", RUN, "a", "in_progress"],
        &["unit", RUN, "a", "done"],
        &["unit", RUN, "a", "in_progress"],
        &["--json", "unit", RUN, "b", "done"],
        &["unit", RUN, "z", "done", "--deps", "nope"],
        &["phase", RUN, "load", "running"],
        &["budget", RUN, "usd", "--owner", "ops", "--limit", "5"],
        // An item's ids and a spend's budget come back in the server's ack.
        &["item", RUN, r#"[{"a":1},{"b":2}]"#],
        &["--json", "item", RUN, r#"{"c":3}"#],
        &["spend", RUN, "usd", "3"],
        &["spend", RUN, "usd", "2.5"],
        &["--json", "spend", RUN, "usd", "0.5"],
        &["spend", RUN, "nope", "1"],
        &["resolve", RUN, "item-2"],
        &["resolve", RUN, "item-9"],
        &["--json", "finalize", RUN, "done"],
        &["unit", RUN, "c", "done"],
        &["finalize", RUN, "done", "--result", "all green"],
        &["unit", RUN, "c", "in_progress"],
    ];
    let mut accepted = 0;
    for args in calls {
        let mut served_args = vec!["--lock-timeout", "0"];
        served_args.extend_from_slice(args);
        let served = call(served_dir.path(), &served_args);
        let direct = call(direct_dir.path(), args);
        assert_eq!(served, direct, "{args:?}: served, then direct");
        accepted += usize::from(direct.0 == Some(0));
    }
    assert!(
        accepted >= 12,
        "{accepted} accepted: the calls test too few changes"
    );
    let (code, err) = stop(server);
    assert_eq!(code, Some(0), "serve: {err}");
    // Every call reached the server, the refused ones too; one at a time,
    // each accepted change had an fdatasync of its own, a refused one none.
    let summary = format!(
        "{accepted} changes acknowledged over {} connections in {accepted} fdatasyncs; stopped: SIGTERM",
        calls.len()
    );
    assert!(
        err.contains(&summary),
        "serve's summary: {err}, not {summary}"
    );
    assert!(!served_dir.path().join("runs/r/SERVE").exists());
    let doc = |root: &Path| {
        let mut v = ok_json(root, &["get", RUN]);
        for k in ["createdAt", "updatedAt", "finishedAt"] {
            v[k] = serde_json::Value::Null;
        }
        for u in v["units"].as_object_mut().unwrap().values_mut() {
            for k in ["createdAt", "updatedAt", "startedAt", "finishedAt"] {
                u[k] = serde_json::Value::Null;
            }
        }
        for p in v["phases"]
            .as_object_mut()
            .into_iter()
            .flat_map(|m| m.values_mut())
        {
            for k in ["startedAt", "finishedAt", "updatedAt"] {
                p[k] = serde_json::Value::Null;
            }
        }
        for list in ["openItems", "resolvedItems"] {
            for i in v[list].as_array_mut().into_iter().flatten() {
                i["at"] = serde_json::Value::Null;
                i["resolvedAt"] = serde_json::Value::Null;
            }
        }
        for b in v["budgets"]
            .as_object_mut()
            .into_iter()
            .flat_map(|m| m.values_mut())
        {
            b["exhaustedAt"] = serde_json::Value::Null;
        }
        v
    };
    assert_eq!(doc(served_dir.path()), doc(direct_dir.path()));
}

#[test]
fn a_dead_servers_socket_sends_writers_back_to_the_run() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    init_run(root, RUN, &["a".into(), "b".into()]);
    let (mut server, _) = serve(root, &[]);
    assert_eq!(
        ok(root, &["--lock-timeout", "0", "unit", RUN, "a", "done"]),
        "seq 2\n"
    );
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(
        root.join("runs/r/SERVE").exists(),
        "kill -9 leaves the socket"
    );
    // No server answers: the call applies its change itself.
    assert_eq!(
        ok(
            root,
            &["--lock-timeout", "0", "unit", RUN, "b", "in_progress"]
        ),
        "seq 3\n"
    );
    // A new server replaces the dead one's socket.
    let (server, _) = serve(root, &[]);
    assert_eq!(
        ok(root, &["--lock-timeout", "0", "unit", RUN, "b", "done"]),
        "seq 4\n"
    );
    let (code, err) = stop(server);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("1 changes acknowledged over 1 connections in 1 fdatasyncs"),
        "{err}"
    );
}

#[test]
fn an_idle_server_stops_and_a_tagged_run_is_not_served() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    init_run(root, RUN, &["a".into()]);
    let (mut server, _) = serve(root, &["--idle", "0.3"]);
    let status = server.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(server.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.contains("stopped: idle for 0.3 s"), "{err}");
    assert!(!root.join("runs/r/SERVE").exists());
    let (code, _, err) = call(root, &["serve", RUN, "--idle=-1"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--idle -1 is not a number of seconds ≥ 0"),
        "{err}"
    );
    for bad in ["-0.001", "0.2", "NaN", "inf"] {
        let flag = format!("--commit-delay={bad}");
        let (code, _, err) = call(root, &["serve", RUN, &flag]);
        assert_eq!(code, Some(2), "--commit-delay {bad}: {err}");
        assert!(
            err.contains("is not a number of seconds in 0..=0.1"),
            "--commit-delay {bad}: {err}"
        );
    }
    assert!(!root.join("runs/r/SERVE").exists());

    let key = key_file(&root.join("key"), "ab", 0o600);
    ok(root, &with_key(&key, &["init", "--id", "t", "--task", "x"]));
    let o = runlog(root, &with_key(&key, &["serve", "t"]));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("a tagged run is not served"),
        "{}",
        text(&o)
    );
    assert!(!root.join("runs/t/SERVE").exists());
}

#[test]
fn with_a_commit_delay_a_change_waits_for_company_and_shares_its_fdatasync() {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    init_run(root, RUN, &["a".into(), "b".into()]);
    let (server, _) = serve(root, &["--commit-delay", "0.1"]);
    let path = root.join("runs/r/SERVE");
    let greeted = || {
        let s = UnixStream::connect(&path).unwrap();
        let mut greeting = Vec::new();
        let mut byte = [0u8];
        while greeting.last() != Some(&b'\n') {
            (&s).read_exact(&mut byte).unwrap();
            greeting.push(byte[0]);
        }
        assert!(String::from_utf8_lossy(&greeting).contains(r#""serve":"r""#));
        s
    };
    let (first, second) = (greeted(), greeted());
    (&first)
        .write_all(b"{\"op\":\"unit\",\"unit\":\"a\",\"status\":\"done\"}\n")
        .unwrap();
    // The leader of the fdatasync waits 0.1 s before it takes what is
    // written, so no ack can come within 30 ms: a server without the delay
    // would have synced and acked `a` alone by then.
    first
        .set_read_timeout(Some(Duration::from_millis(30)))
        .unwrap();
    let mut early = [0u8; 64];
    match (&first).read(&mut early) {
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) => {}
        other => panic!("an answer within 30 ms of a 0.1 s commit delay: {other:?}"),
    }
    (&second)
        .write_all(b"{\"op\":\"unit\",\"unit\":\"b\",\"status\":\"done\"}\n")
        .unwrap();
    let mut acks = Vec::new();
    for s in [&first, &second] {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut ack = String::new();
        (&*s).read_to_string(&mut ack).unwrap();
        acks.push(ack.trim().to_string());
    }
    assert_eq!(acks, [r#"{"seq":2}"#, r#"{"seq":3}"#]);
    let (code, err) = stop(server);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("2 changes acknowledged over 2 connections in 1 fdatasyncs"),
        "the second change did not share the first's fdatasync: {err}"
    );
    let doc = ok_json(root, &["get", RUN]);
    assert_eq!(doc["units"]["a"]["status"], "done");
    assert_eq!(doc["units"]["b"]["status"], "done");
}

#[test]
fn a_runs_root_too_long_for_a_socket_path_is_served_through_its_directory() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("r".repeat(110));
    std::fs::create_dir(&root).unwrap();
    init_run(&root, RUN, &["a".into()]);
    let (server, line) = serve(&root, &[]);
    assert!(line.len() > 120, "{line}");
    assert_eq!(
        ok(&root, &["--lock-timeout", "0", "unit", RUN, "a", "done"]),
        "seq 2\n"
    );
    let (code, err) = stop(server);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("1 changes acknowledged"), "{err}");
}

/// How one call of the soak ended.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    /// `seq N`, exit 0: durable at N.
    Acked(u64),
    /// Exit 1: the server died after the change was sent.
    Unknown,
}

#[test]
fn a_server_killed_at_random_loses_no_acknowledged_change() {
    let units: usize = std::env::var("RUNLOG_SERVE_KILL9_UNITS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    const WRITERS: usize = 8;
    let d = tempfile::tempdir().unwrap();
    let root: PathBuf = d.path().to_path_buf();
    let names: Vec<String> = (0..units).map(|i| format!("u{i}")).collect();
    init_run(&root, RUN, &names);
    let server: Arc<Mutex<Option<Child>>> = Arc::new(Mutex::new(Some(serve(&root, &[]).0)));
    let done = Arc::new(AtomicBool::new(false));
    let kills = Arc::new(AtomicU64::new(0));
    // Kills the server at random moments and starts a new one.
    let killer = {
        let (root, server, done, kills) =
            (root.clone(), server.clone(), done.clone(), kills.clone());
        std::thread::spawn(move || {
            let mut rng = SimRng::new(0x0053_4552_5645);
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20 + rng.next_u64() % 200));
                let mut s = server.lock().unwrap();
                if let Some(mut c) = s.take() {
                    c.kill().unwrap();
                    c.wait().unwrap();
                    kills.fetch_add(1, Ordering::SeqCst);
                }
                if !done.load(Ordering::SeqCst) {
                    // Every other server holds its batches (up to 2 ms), so
                    // that kills land in a held batch too.
                    let delay = ["0", "0.002"][kills.load(Ordering::SeqCst) as usize % 2];
                    let args = ["--lock-timeout", "60", "--commit-delay", delay];
                    *s = Some(serve(&root, &args).0);
                }
            }
        })
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let root = root.clone();
            std::thread::spawn(move || {
                let mut calls = vec![];
                for i in (w..units).step_by(WRITERS) {
                    for status in ["in_progress", "done"] {
                        let unit = format!("u{i}");
                        let (code, out, err) =
                            call(&root, &["--lock-timeout", "60", "unit", RUN, &unit, status]);
                        let outcome = match code {
                            Some(0) => Outcome::Acked(
                                out.trim()
                                    .strip_prefix("seq ")
                                    .and_then(|n| n.parse().ok())
                                    .unwrap_or_else(|| panic!("exit 0 printed {out:?}")),
                            ),
                            Some(1) if err.contains("which may have applied it") => {
                                Outcome::Unknown
                            }
                            _ => panic!("unit {unit} {status}: exit {code:?}: {out}{err}"),
                        };
                        calls.push((unit, status, outcome));
                    }
                }
                calls
            })
        })
        .collect();
    let calls: Vec<(String, &str, Outcome)> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    done.store(true, Ordering::SeqCst);
    killer.join().unwrap();
    let last = server.lock().unwrap().take();
    let served_at_end = last.map(|c| stop(c).1).unwrap_or_default();
    let unknown = calls.iter().filter(|c| c.2 == Outcome::Unknown).count();
    eprintln!(
        "cli_serve soak: {} calls, {} acknowledged, {unknown} unknown (the server died \
         holding them), {} servers killed; the last server: {}",
        calls.len(),
        calls.len() - unknown,
        kills.load(Ordering::SeqCst),
        served_at_end.trim()
    );
    assert!(kills.load(Ordering::SeqCst) > 0, "no server was killed");

    // Every acknowledged change is the log's record at its seq, and no seq
    // was acknowledged twice.
    let o = runlog(&root, &["verify", RUN, "--json"]);
    assert_eq!(o.status.code(), Some(0), "verify: {}", text(&o));
    // (A server compacts as any long-lived writer: records older than the
    // log's first are in a snapshot, and the document checks them below.)
    let mut dump: BTreeMap<u64, Option<(String, String)>> = BTreeMap::new();
    for line in ok(&root, &["dump", RUN]).lines() {
        let rec: serde_json::Value = serde_json::from_str(line).unwrap();
        let u = &rec["t"]["change"]["unit"];
        let change = u["unit"]
            .as_str()
            .map(|n| (n.to_string(), u["status"].as_str().unwrap().to_string()));
        dump.insert(rec["seq"].as_u64().unwrap(), change);
    }
    let first = *dump.keys().next().expect("an empty log");
    let mut seen = BTreeMap::new();
    let mut in_log = 0;
    for (unit, status, outcome) in &calls {
        if let Outcome::Acked(seq) = outcome {
            assert!(
                seen.insert(*seq, unit).is_none(),
                "seq {seq} acknowledged twice"
            );
            if *seq < first {
                continue;
            }
            in_log += 1;
            assert_eq!(
                dump.get(seq),
                Some(&Some((unit.clone(), status.to_string()))),
                "acknowledged {unit} {status} is not the record at seq {seq}"
            );
        }
    }
    eprintln!(
        "cli_serve soak: {in_log} acknowledged calls checked against the log (from seq {first})"
    );
    // And the document agrees with what was acknowledged, unit by unit.
    let doc = ok_json(&root, &["get", RUN]);
    for name in &names {
        let acked = |s: &str| {
            calls
                .iter()
                .any(|c| &c.0 == name && c.1 == s && matches!(c.2, Outcome::Acked(_)))
        };
        let st = doc["units"][name]["status"].as_str().unwrap_or_default();
        let allowed: &[&str] = if acked("done") {
            &["done"]
        } else if acked("in_progress") {
            &["in_progress", "done"]
        } else {
            &["pending", "in_progress", "done"]
        };
        assert!(allowed.contains(&st), "{name} is {st}, allowed {allowed:?}");
    }
}

/// Where a server stops following the protocol, from a client's view:
/// each point at which one can die or misbehave (FORMAT.md §5.9).
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Accepts, then closes without a greeting.
    CloseBeforeGreeting,
    /// Accepts and says nothing (hung).
    SilentAfterAccept,
    /// Greets as the server of another run.
    GreetsAnotherRun,
    /// Greets with another protocol version.
    GreetsAnotherProtocol,
    /// Greets with a line that is not JSON.
    GarbledGreeting,
    /// Greets, then closes before reading the change.
    CloseAfterGreeting,
    /// Reads the change, then closes without an ack.
    CloseAfterChange,
    /// Answers the change with a line that is not an ack.
    GarbledAck,
    /// Answers with a refusal.
    Refuses,
    /// Answers with a seq.
    Acks,
}

/// Plays a server of run `r` on `root`'s socket for one connection, with
/// `fault`; returns the line the client sent, if it read one.
fn faulty_server(root: &Path, fault: Fault) -> std::thread::JoinHandle<Option<String>> {
    use std::io::Write;
    let path = root.join("runs/r/SERVE");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        // The socket goes with the first connection: a client that falls
        // back finds none when it looks again.
        std::fs::remove_file(&path).unwrap();
        let greet = |line: &str| (&s).write_all(format!("{line}\n").as_bytes()).unwrap();
        let good = r#"{"serve":"r","pid":1,"protocol":2}"#;
        let read = || {
            let mut line = String::new();
            BufReader::new(&s).read_line(&mut line).unwrap();
            Some(line.trim_end().to_string())
        };
        match fault {
            Fault::CloseBeforeGreeting => None,
            Fault::SilentAfterAccept => {
                std::thread::sleep(Duration::from_secs(6));
                None
            }
            Fault::GreetsAnotherRun => {
                greet(r#"{"serve":"other","pid":1,"protocol":2}"#);
                None
            }
            Fault::GreetsAnotherProtocol => {
                greet(r#"{"serve":"r","pid":1,"protocol":1}"#);
                None
            }
            Fault::GarbledGreeting => {
                greet("hello");
                None
            }
            Fault::CloseAfterGreeting => {
                greet(good);
                None
            }
            Fault::CloseAfterChange => {
                greet(good);
                read()
            }
            Fault::GarbledAck => {
                greet(good);
                let l = read();
                greet("ok");
                l
            }
            Fault::Refuses => {
                greet(good);
                let l = read();
                greet(r#"{"error":"run r: refused: as the server says","code":2}"#);
                l
            }
            Fault::Acks => {
                greet(good);
                let l = read();
                greet(r#"{"seq":77}"#);
                l
            }
        }
    })
}

#[test]
fn a_client_applies_its_change_only_when_no_server_can_have_read_it() {
    use Fault::*;
    // The change's own serde form, flat beside "op" (`ops::op_line`).
    let sent = r#"{"deps":null,"note":null,"op":"unit","status":"done","unit":"a"}"#;
    // (fault, the exit code, what stdout or stderr says, whether the client
    // applied the change itself, the line the server read)
    let cases = [
        (CloseBeforeGreeting, 0, "seq 2", true, None),
        (SilentAfterAccept, 0, "seq 2", true, None),
        (GreetsAnotherRun, 0, "seq 2", true, None),
        (GreetsAnotherProtocol, 0, "seq 2", true, None),
        (GarbledGreeting, 0, "seq 2", true, None),
        (
            CloseAfterGreeting,
            1,
            "which may have applied it /",
            false,
            None,
        ),
        (
            CloseAfterChange,
            1,
            "before acknowledging the change",
            false,
            Some(sent),
        ),
        (
            GarbledAck,
            1,
            "`runlog get` shows whether it did",
            false,
            Some(sent),
        ),
        (
            Refuses,
            2,
            "runlog: run r: refused: as the server says",
            false,
            Some(sent),
        ),
        (Acks, 0, "seq 77", false, Some(sent)),
    ];
    for (fault, code, says, applied, read) in cases {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        init_run(root, RUN, &["a".into()]);
        let before = tree_bytes_but_locks(root);
        let server = faulty_server(root, fault);
        let (got, out, err) = call(root, &["--lock-timeout", "10", "unit", RUN, "a", "done"]);
        let what = format!("{fault:?}: exit {got:?}, {out}{err}");
        assert_eq!(got, Some(code), "{what}");
        assert!(
            out.contains(says) || err.contains(says),
            "{what}: not {says:?}"
        );
        assert_eq!(server.join().unwrap().as_deref(), read, "{what}");
        let after = tree_bytes_but_locks(root);
        if applied {
            assert_eq!(
                ok_json(root, &["get", RUN])["units"]["a"]["status"],
                "done",
                "{what}"
            );
        } else {
            // Sent to a server: the client wrote nothing of its own.
            assert_eq!(before, after, "{what}: the client changed the run");
        }
    }
}

#[test]
fn a_stopping_server_finishes_a_greeted_connection_and_its_socket_is_the_owners_only() {
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    init_run(root, RUN, &["a".into()]);
    let (server, _) = serve(root, &[]);
    let path = root.join("runs/r/SERVE");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the socket's mode");
    // Greeted, then the server is told to stop before the change is sent.
    let s = std::os::unix::net::UnixStream::connect(&path).unwrap();
    let mut greeting = String::new();
    BufReader::new(&s).read_line(&mut greeting).unwrap();
    assert!(greeting.contains(r#""serve":"r""#), "{greeting}");
    // SAFETY: `kill` of our own child's pid with a valid signal number.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(server.id() as i32, libc::SIGTERM)
    };
    // The server stops listening first: the socket goes, and a call made now
    // is never greeted (it waits for the lock the server still holds).
    let gone = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        !path.exists()
    });
    assert!(gone, "the stopping server kept its socket");
    (&s).write_all(b"{\"op\":\"unit\",\"unit\":\"a\",\"status\":\"done\"}\n")
        .unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut ack = String::new();
    (&s).read_to_string(&mut ack).unwrap();
    assert_eq!(ack.trim(), r#"{"seq":2}"#);
    let (code, err) = stop(server);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("1 changes acknowledged over 1 connections in 1 fdatasyncs; stopped: SIGTERM"),
        "{err}"
    );
    assert_eq!(ok_json(root, &["get", RUN])["units"]["a"]["status"], "done");
}

#[test]
fn a_call_that_finds_the_lock_held_looks_for_a_server_again() {
    use std::io::Write;
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    init_run(root, RUN, &["a".into()]);
    // `apply` holds the writer lock while its stdin is open.
    let mut holder = cmd(root)
        .args(["apply", RUN])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = holder.stdin.take().unwrap();
    writeln!(stdin, r#"{{"op":"phase","phase":"p","status":"running"}}"#).unwrap();
    let mut ack = String::new();
    BufReader::new(holder.stdout.as_mut().unwrap())
        .read_line(&mut ack)
        .unwrap();
    assert_eq!(ack.trim(), r#"{"seq":2}"#, "apply holds the lock");
    let client = cmd(root)
        .args(["--lock-timeout", "20", "unit", RUN, "a", "done"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The call finds no server and the lock held; a server appears.
    std::thread::sleep(Duration::from_millis(300));
    let server = faulty_server(root, Fault::Acks);
    let o = client.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "seq 77\n");
    assert!(
        server.join().unwrap().is_some(),
        "the server read no change"
    );
    drop(stdin);
    assert!(holder.wait().unwrap().success());
}

/// The library's one-shot writer (`Runs::change`, which Python's
/// `Runs.unit` calls) hands its change to a running server as the command
/// line does: with no lock wait at all, since the server holds the lock; a
/// refusal comes back typed, the same rule as applied directly. Opening the
/// run never asks a server. Once the server stops, `change` applies the
/// change itself.
#[test]
fn a_library_writer_hands_its_change_to_the_server_too() {
    use runlog::run::{Change, RuleError, Runs, UnitStatus};
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    init_run(root, RUN, &["a".into(), "b".into()]);
    let (server, _) = serve(root, &[]);
    let runs = Runs::new(root).with_lock_wait(Some(Duration::ZERO));
    let unit = |name: &str, status| Change::Unit {
        unit: name.into(),
        status,
        note: None,
        deps: None,
    };
    assert_eq!(runs.change(RUN, unit("a", UnitStatus::Done)).unwrap(), 2);
    let e = runs
        .change(RUN, unit("a", UnitStatus::InProgress))
        .unwrap_err();
    assert!(
        matches!(e.rule(), Some(RuleError::Demote { unit, .. }) if unit == "a"),
        "{e:?}"
    );
    assert!(
        e.is_refused()
            && runlog::engine::ErrorChain(&e)
                .to_string()
                .contains("never demoted"),
        "{e}"
    );
    let Err(e) = runs.open(RUN) else {
        panic!("opened a served run's writer")
    };
    assert!(e.is_locked(), "{e:?}");
    let (code, err) = stop(server);
    assert_eq!(code, Some(0), "serve: {err}");
    assert!(
        err.contains("1 changes acknowledged over 2 connections in 1 fdatasyncs"),
        "serve's summary: {err}"
    );
    assert_eq!(runs.change(RUN, unit("b", UnitStatus::Done)).unwrap(), 3);
    let doc = ok_json(root, &["get", RUN]);
    assert_eq!(doc["units"]["a"]["status"], "done");
    assert_eq!(doc["units"]["b"]["status"], "done");
}
