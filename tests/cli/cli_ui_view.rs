//! Proves `runlog ui`, the real binary over real HTTP: the runs page, a run's
//! summary, its lists and one unit by lookup are served as JSON; a crafted
//! name and a note with HTML come back as data with the strict
//! Content-Security-Policy on every response; the token is refused when
//! missing or wrong and accepted when right, on pages, API and event stream;
//! a foreign Host is refused; run ids that could leave the runs root are
//! refused; a non-loopback address without a token is refused (exit 2); the
//! event stream pushes a new summary when the run advances; the lists follow
//! the log's tail without a rescan, and stay right when the run is compacted
//! under them; a unit done by the cluster driver shows its output reference;
//! the runs page shows a rate (the average since the start) on first paint;
//! and the view writes nothing into the runs root; `demo --ui` serves its
//! run while it runs.
use crate::cli_support::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "view-test-token-abcdefghijkl";
const CRAFTED: &str = "<script>alert(1)</script>";
const NOTE: &str = "<img src=x onerror=alert(1)> & \"quoted\"";

struct Server {
    child: Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(root: &Path, args: &[&str]) -> Server {
    let mut child = cmd(root)
        .arg("ui")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no URL printed: {line:?}"))
        .to_string();
    Server { child, addr }
}

struct Reply {
    status: u16,
    headers: String,
    body: String,
}

impl Reply {
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
    fn header(&self, name: &str) -> Option<String> {
        self.headers.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }
}

/// One GET with HTTP/1.0 semantics (the server closes after the reply).
fn get(addr: &str, path: &str, host: Option<&str>, extra: &[&str]) -> Reply {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
    req.push_str(&format!("Host: {}\r\n", host.unwrap_or(addr)));
    for h in extra {
        req.push_str(&format!("{h}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Reply {
        status,
        headers: head.to_string(),
        body: body.to_string(),
    }
}

fn bearer() -> String {
    format!("Authorization: Bearer {TOKEN}")
}

fn setup(root: &Path) {
    ok(
        root,
        &[
            "init",
            "--id",
            "r1",
            "--task",
            "task <b>bold</b>",
            "--units",
            "a,b,c,d",
        ],
    );
    ok(root, &["unit", "r1", CRAFTED, "pending", "--note", NOTE]);
    ok(root, &["unit", "r1", "a", "in_progress"]);
    ok(root, &["unit", "r1", "a", "blocked", "--note", "disk full"]);
    ok(root, &["unit", "r1", "b", "in_progress"]);
    ok(root, &["unit", "r1", "b", "pending"]);
    ok(root, &["unit", "r1", "b", "in_progress"]);
    ok(root, &["unit", "r1", "c", "done"]);
}

/// Every path under the root with its length and mtime.
fn listing(dir: &Path) -> Vec<(std::path::PathBuf, u64, std::time::SystemTime)> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            out.push((e.path(), m.len(), m.modified().unwrap()));
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn ui_serves_a_run_as_data_and_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    setup(root);
    let before = listing(root);
    let bytes_before = tree_bytes(root);
    let srv = serve(root, &[]);
    let a = srv.addr.as_str();

    let page = get(a, "/", None, &[]);
    assert_eq!(page.status, 200);
    let csp = page
        .header("content-security-policy")
        .expect("a CSP header");
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert_eq!(
        page.header("x-content-type-options").as_deref(),
        Some("nosniff")
    );
    assert!(
        !page.body.contains("<script>alert"),
        "the page carries no run data"
    );
    assert_eq!(get(a, "/assets/app.js", None, &[]).status, 200);

    let runs = get(a, "/api/runs", None, &[]);
    assert_eq!(runs.status, 200);
    let v = runs.json();
    let row = &v["live"][0];
    assert_eq!(row["id"], "r1");
    assert_eq!(
        row["task"], "task <b>bold</b>",
        "the task is data, as given"
    );
    assert_eq!(row["done"], 1);
    assert_eq!(row["total"], 5);

    let s = get(a, "/api/runs/r1", None, &[]);
    assert_eq!(s.status, 200);
    assert!(
        s.header("content-type")
            .unwrap()
            .starts_with("application/json")
    );
    assert!(s.header("content-security-policy").is_some());
    let s = s.json();
    assert_eq!(s["counts"]["blocked"], 1);
    assert_eq!(s["counts"]["inProgress"], 1);
    assert_eq!(s["status"], "running");

    // The lists come from the background scan: wait for it.
    let t0 = Instant::now();
    let blocked = loop {
        let l = get(a, "/api/runs/r1/lists/blocked", None, &[]).json();
        if l["entries"].as_array().is_some_and(|e| !e.is_empty()) {
            break l;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "no lists: {l}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(blocked["entries"][0]["name"], "a");
    assert_eq!(blocked["entries"][0]["note"], "disk full");
    let retried = get(a, "/api/runs/r1/lists/retried", None, &[]).json();
    assert_eq!(retried["entries"][0]["name"], "b");
    assert_eq!(retried["entries"][0]["attempts"], 2);
    let pending = get(a, "/api/runs/r1/lists/pending", None, &[]);
    let pj = pending.json();
    let names: Vec<&str> = pj["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&CRAFTED), "{names:?}");
    assert!(
        pending.body.contains("\\u003c") || pending.body.contains("<script>alert(1)</script>"),
        "the name is a JSON string"
    );
    assert_eq!(
        pending.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(get(a, "/api/runs/r1/lists/nope", None, &[]).status, 404);
    assert_eq!(
        get(a, "/api/runs/r1/lists/pending?page=x", None, &[]).status,
        400
    );

    let enc = "%3Cscript%3Ealert%281%29%3C%2Fscript%3E";
    let u = get(a, &format!("/api/runs/r1/unit?name={enc}"), None, &[]).json();
    assert_eq!(u["found"], true);
    assert_eq!(u["name"], CRAFTED);
    assert_eq!(u["unit"]["note"], NOTE);
    let u = get(a, "/api/runs/r1/unit?name=b", None, &[]).json();
    assert_eq!(u["unit"]["attempts"], 2);
    assert!(u["unit"]["startedAt"].is_string());
    assert_eq!(
        get(a, "/api/runs/r1/unit?name=zz", None, &[]).json()["found"],
        false
    );
    assert_eq!(get(a, "/api/runs/r1/unit", None, &[]).status, 400);

    // Run ids are checked: nothing leaves the runs root.
    for bad in ["..", "..%2F..%2Fetc", "%2Fetc", ".hidden", "a%00b"] {
        let r = get(a, &format!("/api/runs/{bad}"), None, &[]);
        assert!(matches!(r.status, 400 | 404), "{bad}: {}", r.status);
        assert!(!r.body.contains("root:"), "{bad}");
    }
    assert_eq!(get(a, "/run/..", None, &[]).status, 400);
    assert_eq!(get(a, "/api/runs/nosuch", None, &[]).status, 404);

    // DNS rebinding: a foreign Host is refused on loopback.
    let r = get(a, "/api/runs", Some("evil.example:80"), &[]);
    assert_eq!(r.status, 421);
    assert!(r.header("content-security-policy").is_some());

    drop(srv);
    assert_eq!(
        listing(root),
        before,
        "the view changed the root's listing or mtimes"
    );
    assert!(
        tree_bytes(root) == bytes_before,
        "the view changed bytes in the root"
    );
}

#[test]
fn ui_token_is_required_on_every_request_and_stream() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    setup(root);
    let srv = serve(root, &["--token", TOKEN]);
    let a = srv.addr.as_str();
    let wrong = "Authorization: Bearer view-test-token-abcdefghijkX";
    for path in [
        "/",
        "/run/r1",
        "/assets/app.js",
        "/api/runs",
        "/api/runs/r1",
        "/api/runs/r1/events",
    ] {
        assert_eq!(
            get(a, path, None, &[]).status,
            401,
            "{path} without a token"
        );
        assert_eq!(
            get(a, path, None, &[wrong]).status,
            401,
            "{path} with a wrong token"
        );
        assert_eq!(
            get(a, &format!("{path}?token=nope-nope-nope-nope"), None, &[]).status,
            401,
            "{path} with a wrong query token"
        );
    }
    for path in [
        "/",
        "/run/r1",
        "/assets/app.js",
        "/api/runs",
        "/api/runs/r1",
    ] {
        assert_eq!(
            get(a, path, None, &[&bearer()]).status,
            200,
            "{path} with the token"
        );
    }
    // The query token sets the cookie the browser's later requests carry.
    let r = get(a, &format!("/?token={TOKEN}"), None, &[]);
    assert_eq!(r.status, 200);
    let cookie = r.header("set-cookie").expect("a cookie");
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap();
    assert_eq!(
        get(a, "/api/runs", None, &[&format!("Cookie: {pair}")]).status,
        200
    );

    // The event stream, with the token: its first event arrives.
    let mut s = TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /api/runs/r1/events HTTP/1.1\r\nHost: {a}\r\n{}\r\n\r\n",
        bearer()
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let mut first = String::new();
    r.read_line(&mut first).unwrap();
    assert!(first.contains("200"), "{first}");
    let ev = next_event(&mut r);
    assert_eq!(ev["id"], "r1");
}

/// The next `data:` line of an event stream, parsed.
fn next_event(r: &mut impl BufRead) -> serde_json::Value {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0, "the stream ended");
        if let Some(d) = line
            .trim_end()
            .strip_prefix("data: ")
            .or_else(|| line.trim_end().strip_prefix("data:"))
        {
            return serde_json::from_str(d).unwrap();
        }
    }
}

#[test]
fn ui_stream_pushes_when_the_run_advances() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    setup(root);
    let srv = serve(root, &[]);
    let a = srv.addr.as_str();
    let mut s = TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET /api/runs/r1/events HTTP/1.1\r\nHost: {a}\r\n\r\n").unwrap();
    let mut r = BufReader::new(s);
    let first = next_event(&mut r);
    let seq = first["seq"].as_u64().unwrap();
    assert_eq!(first["counts"]["done"], 1);
    ok(root, &["unit", "r1", "d", "done"]);
    let t0 = Instant::now();
    loop {
        let ev = next_event(&mut r);
        if ev["seq"].as_u64().unwrap() > seq {
            assert_eq!(ev["counts"]["done"], 2);
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(8),
            "no event for the new seq"
        );
    }
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "the push took {:?}",
        t0.elapsed()
    );
}

#[test]
fn ui_refuses_non_loopback_without_a_token() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let o = runlog(root, &["ui", "--listen", "0.0.0.0:0"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("needs a token"), "{}", text(&o));
    let o = runlog(root, &["ui", "--token", "short"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = runlog(root, &["ui", "--token-file", "/nonexistent/token"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = runlog(root, &["ui", "../x"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!root.join("runs").exists(), "a refused ui wrote the layout");
}

#[test]
fn ui_demo_serves_its_run_while_it_runs() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let mut child = cmd(root)
        .args([
            "demo",
            "--ui",
            "--units",
            "4000",
            "--work-us",
            "5000",
            "--kills",
            "1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut url = None;
    let mut line = String::new();
    while err.read_line(&mut line).unwrap() > 0 {
        if let Some(u) = line.split_whitespace().find(|w| w.starts_with("http://")) {
            url = Some(u.to_string());
            break;
        }
        line.clear();
    }
    let url = url.expect("demo --ui printed no URL");
    assert!(url.ends_with("/run/demo"), "{url}");
    let addr = url
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .unwrap()
        .to_string();
    let s = get(&addr, "/api/runs/demo", None, &[]);
    assert_eq!(s.status, 200, "{}", s.body);
    assert_eq!(s.json()["id"], "demo");
    // The demo finishes as usual with its view beside it (and the view ends with it).
    let rest = std::thread::spawn(move || {
        let mut t = String::new();
        let _ = err.read_to_string(&mut t);
        t
    });
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "demo --ui: {status}: {}",
        rest.join().unwrap()
    );
}

/// The names of one list's first page, once `want` holds of them (the
/// generous deadline is a wait, not a speed claim).
fn list_until(a: &str, list: &str, want: impl Fn(&[String]) -> bool) -> serde_json::Value {
    let t0 = Instant::now();
    loop {
        let l = get(a, &format!("/api/runs/r1/lists/{list}"), None, &[]).json();
        let names: Vec<String> = l["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["name"].as_str().map(String::from))
            .collect();
        if l["total"].is_u64() && want(&names) {
            return l;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{list}: {l}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn ui_lists_follow_the_tail_without_a_rescan_and_survive_a_compaction() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    setup(root);
    let srv = serve(root, &[]);
    let a = srv.addr.as_str();
    list_until(a, "blocked", |n| n == ["a"]);
    let s = get(a, "/api/runs/r1", None, &[]).json();
    let scans = s["tail"]["scans"].clone();
    assert_eq!(scans, 1, "{s}");

    // After the page opened: a unit blocked, the blocked one done, a retry.
    ok(root, &["unit", "r1", "d", "in_progress"]);
    ok(
        root,
        &["unit", "r1", "d", "blocked", "--note", "from the tail"],
    );
    ok(root, &["unit", "r1", "a", "done"]);
    ok(root, &["unit", "r1", "d", "in_progress"]);
    ok(root, &["unit", "r1", "d", "blocked", "--note", "again"]);
    let b = list_until(a, "blocked", |n| n == ["d"]);
    assert_eq!(b["total"], 1);
    assert_eq!(b["entries"][0]["note"], "again");
    let r = list_until(a, "retried", |n| n.contains(&"d".to_string()));
    assert_eq!(r["total"], 2, "{r}");
    let s = get(a, "/api/runs/r1", None, &[]).json();
    assert_eq!(s["tail"]["scans"], 1, "no rescan: {s}");
    assert_eq!(s["tail"]["lost"], 0, "{s}");
    assert!(s["tail"]["steps"].as_u64().unwrap() >= 1, "{s}");
    assert_eq!(s["lists"]["totals"]["blocked"], 1, "{s}");

    // Compacted under the follower (twice: the second deletes old segments):
    // followed or rescanned, the lists come out right.
    ok(root, &["unit", "r1", "b", "blocked", "--note", "b stuck"]);
    ok(root, &["compact", "r1"]);
    ok(root, &["unit", "r1", "d", "done"]);
    ok(root, &["compact", "r1"]);
    ok(root, &["unit", "r1", "e", "blocked"]);
    let b = list_until(a, "blocked", |n| n == ["b", "e"]);
    assert_eq!(b["total"], 2, "{b}");
    let p = list_until(a, "pending", |n| n == [CRAFTED]);
    assert_eq!(p["total"], 1, "{p}");
    let s = get(a, "/api/runs/r1", None, &[]).json();
    assert_eq!(s["counts"]["blocked"], 2, "{s}");
    assert_eq!(s["lists"]["totals"]["blocked"], 2, "{s}");
}

#[test]
fn ui_unit_page_shows_the_output_reference_drive_recorded() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    setup(root);
    // The note drive.py writes for a result that went to an output store.
    let note = r#"{"output":{"store":"file:///tmp/outs","name":"r1/d/1-c9","len":42,"digest":"af13","kind":"bytes"},"claim":"c9","attempt":1}"#;
    ok(root, &["unit", "r1", "d", "done", "--note", note]);
    let srv = serve(root, &[]);
    let a = srv.addr.as_str();
    let u = get(a, "/api/runs/r1/unit?name=d", None, &[]).json();
    let o = &u["outputRef"];
    assert_eq!(o["store"], "file:///tmp/outs", "{u}");
    assert_eq!(o["name"], "r1/d/1-c9");
    assert_eq!(o["len"], 42);
    assert_eq!(o["digest"], "af13");
    assert_eq!(o["attempt"], 1);
    // A unit with no reference says so.
    let u = get(a, "/api/runs/r1/unit?name=c", None, &[]).json();
    assert!(u["outputRef"].is_null(), "{u}");
}

#[test]
fn ui_runs_page_shows_the_average_rate_on_its_first_paint() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    setup(root);
    // The run is at least a second old: its average since it started exists.
    std::thread::sleep(Duration::from_millis(1100));
    let srv = serve(root, &[]);
    let a = srv.addr.as_str();
    let v = get(a, "/api/runs", None, &[]).json();
    let row = &v["live"][0];
    assert_eq!(row["rateFrom"], "sinceStart", "{row}");
    assert!(row["rate"].as_f64().is_some_and(|r| r > 0.0), "{row}");
    assert!(row["etaSecs"].as_f64().is_some(), "{row}");
    let s = get(a, "/api/runs/r1", None, &[]).json();
    assert_eq!(s["rateFrom"], "sinceStart", "{s}");
    assert!(s["rate"].as_f64().is_some_and(|r| r > 0.0), "{s}");
}

/// The time an hour ago, as `$RUNLOG_NOW` takes it: what runs write with it
/// has been quiet that long.
fn an_hour_ago() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    runlog::run::clock::format_rfc3339(now - 3_600_000)
}

/// `ok`, with the run's clock at `at`.
fn ok_at(root: &Path, at: &str, args: &[&str]) {
    let o = cmd(root).env("RUNLOG_NOW", at).args(args).output().unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A long-lived writer: `runlog apply RUN`, holding the lock while its stdin is open.
struct Writer(Child);
impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn ui_runs_page_lists_trouble_first_and_gives_a_stalled_run_no_eta() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let old = an_hour_ago();
    // Stalled an hour ago with a unit blocked, no writer: needs attention.
    ok_at(
        root,
        &old,
        &["init", "--id", "stalled", "--task", "t", "--units", "a,b,c"],
    );
    ok_at(root, &old, &["unit", "stalled", "a", "done"]);
    ok_at(
        root,
        &old,
        &["unit", "stalled", "b", "blocked", "--note", "disk full"],
    );
    // Quiet for an hour, nothing blocked, no writer: idle.
    ok_at(
        root,
        &old,
        &["init", "--id", "idle", "--task", "t", "--units", "a,b"],
    );
    ok_at(root, &old, &["unit", "idle", "a", "done"]);
    // Quiet for an hour, but a writer holds it (a long unit): running.
    ok_at(
        root,
        &old,
        &["init", "--id", "held", "--task", "t", "--units", "a,b"],
    );
    let mut w = cmd(root)
        .env("RUNLOG_NOW", &old)
        .args(["apply", "held"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(
        w.stdin.as_mut().unwrap(),
        r#"{{"op":"unit","unit":"a","status":"done"}}"#
    )
    .unwrap();
    let mut ack = String::new();
    BufReader::new(w.stdout.take().unwrap())
        .read_line(&mut ack)
        .unwrap();
    assert!(ack.contains("\"seq\""), "{ack}");
    let _writer = Writer(w);
    // Changed just now, with a phase blocked (runlog.drive's mark of a drive
    // that returned with units blocked): needs attention at once.
    ok(
        root,
        &["init", "--id", "driven", "--task", "t", "--units", "a,b"],
    );
    ok(root, &["unit", "driven", "a", "done"]);
    ok(root, &["phase", "driven", "runlog.drive", "blocked"]);
    // Changed just now: running, with an ETA.
    ok(
        root,
        &["init", "--id", "fresh", "--task", "t", "--units", "a,b,c"],
    );
    ok(root, &["unit", "fresh", "a", "done"]);
    // Finished: done, and aborted (failed).
    ok(
        root,
        &["init", "--id", "fine", "--task", "t", "--units", "a"],
    );
    ok(root, &["unit", "fine", "a", "done"]);
    ok(root, &["finalize", "fine", "done"]);
    ok(
        root,
        &["init", "--id", "dropped", "--task", "t", "--units", "a"],
    );
    ok(root, &["finalize", "dropped", "aborted"]);
    // fresh is a second old: its average since it started exists.
    std::thread::sleep(Duration::from_millis(1100));

    let srv = serve(root, &[]);
    let a = srv.addr.as_str();
    let v = get(a, "/api/runs", None, &[]).json();
    let ids = |k: &str| -> Vec<String> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    // Trouble first (needs attention, newest change first; then idle), then running.
    assert_eq!(
        ids("live"),
        ["driven", "stalled", "idle", "fresh", "held"],
        "{v}"
    );
    assert_eq!(ids("finished"), ["dropped", "fine"], "{v}");
    let row = |id: &str| {
        ["live", "finished"]
            .iter()
            .flat_map(|k| v[*k].as_array().unwrap().iter())
            .find(|r| r["id"] == id)
            .unwrap()
            .clone()
    };
    let health = |id: &str| row(id)["health"]["health"].as_str().unwrap().to_string();
    assert_eq!(health("driven"), "needs_attention");
    assert_eq!(health("stalled"), "needs_attention");
    assert_eq!(health("idle"), "idle");
    assert_eq!(health("held"), "running");
    assert_eq!(health("fresh"), "running");
    assert_eq!(health("dropped"), "failed");
    assert_eq!(health("fine"), "done");
    let why = |id: &str| row(id)["health"]["why"].as_str().unwrap().to_string();
    assert_eq!(why("driven"), "phase runlog.drive blocked");
    assert!(
        why("stalled").starts_with("1 unit(s) blocked; no writer, no change for 1h"),
        "{}",
        why("stalled")
    );
    assert!(why("idle").contains("no writer"), "{}", why("idle"));
    assert!(
        why("held").starts_with("a writer holds it"),
        "{}",
        why("held")
    );
    assert_eq!(row("held")["health"]["writer"], true);
    // No ETA for a stalled or idle run: nothing was done in the last minute.
    for id in ["stalled", "idle", "driven", "held"] {
        assert!(row(id)["etaSecs"].is_null(), "{id}: {}", row(id));
    }
    for id in ["stalled", "idle", "held"] {
        assert_eq!(row(id)["rate"], 0.0, "{id}: {}", row(id));
        assert_eq!(row(id)["rateFrom"], "lastMinute", "{id}: {}", row(id));
    }
    assert!(
        row("fresh")["etaSecs"].as_f64().is_some(),
        "{}",
        row("fresh")
    );

    // A stalled run's own page: its health, no ETA, no rate from its past.
    let s = get(a, "/api/runs/stalled", None, &[]).json();
    assert_eq!(s["health"]["health"], "needs_attention", "{s}");
    assert!(s["etaSecs"].is_null(), "{s}");
    assert_eq!(s["rate"], 0.0, "{s}");
    assert_eq!(s["rateFrom"], "lastMinute", "{s}");
    let s = get(a, "/api/runs/fresh", None, &[]).json();
    assert_eq!(s["health"]["health"], "running", "{s}");
    assert!(s["etaSecs"].as_f64().is_some(), "{s}");
}
