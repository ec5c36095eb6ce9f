//! Proves `status --watch` beside a live `apply` writer shows progress advancing,
//! exits by itself once the run is finalized (after printing the final view), and
//! changes no byte of the run directory.
use crate::cli_support;
use cli_support::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

fn spawn_watcher(root: &std::path::Path, json: bool) -> (Child, std::thread::JoinHandle<String>) {
    let mut c = cmd(root);
    if json {
        c.arg("--json");
    }
    let mut child = c
        .args(["status", "live", "--watch", "--interval", "0.2"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).unwrap();
        s
    });
    (child, reader)
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the watcher did not exit within {within:?} of finalize");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn watch_follows_a_live_writer_exits_after_finalize_and_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(
        root,
        &["init", "--id", "live", "--task", "t", "--units", "a,b,c,d"],
    );
    let mut writer = cmd(root)
        .args(["apply", "live"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = writer.stdin.take().unwrap();
    let mut acks = BufReader::new(writer.stdout.take().unwrap());
    let mut send = |line: &str| {
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        let mut ack = String::new();
        acks.read_line(&mut ack).unwrap();
        assert!(ack.starts_with("{\"seq\":"), "{line} → {ack}");
    };
    send(r#"{"op":"unit","unit":"a","status":"in_progress"}"#);

    // The writer is live (holding the lock) and idle: whatever changes now is the watchers'.
    let run_dir = root.join("runs/live");
    let before = tree_bytes(&run_dir);
    let (mut text_watch, text_out) = spawn_watcher(root, false);
    let (mut json_watch, json_out) = spawn_watcher(root, true);
    std::thread::sleep(Duration::from_millis(900));
    assert_eq!(
        tree_bytes(&run_dir),
        before,
        "a watcher changed the run directory"
    );

    for u in ["a", "b", "c", "d"] {
        send(&format!(r#"{{"op":"unit","unit":"{u}","status":"done"}}"#));
        std::thread::sleep(Duration::from_millis(350));
    }
    send(r#"{"op":"finalize","status":"done","result":"all four"}"#);
    drop(stdin);
    assert!(writer.wait().unwrap().success());

    assert!(wait_exit(&mut text_watch, Duration::from_secs(5)).success());
    assert!(wait_exit(&mut json_watch, Duration::from_secs(5)).success());
    let text = text_out.join().unwrap();
    let json = json_out.join().unwrap();

    // Text frames: progress only moves forward, through every step, and the last
    // frame is the final view.
    let progress: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("units ["))
        .map(|l| l.rsplit(' ').next().unwrap())
        .collect();
    assert_eq!(progress.first(), Some(&"0/4"), "{text}");
    assert_eq!(progress.last(), Some(&"4/4"), "{text}");
    let mut distinct = progress.clone();
    distinct.dedup();
    // Each step stays on disk for ~1.75 intervals, so all five are normally seen;
    // demand three, so a heavily loaded machine that skips a frame does not fail.
    assert!(distinct.len() >= 3, "{text}");
    assert!(
        distinct.windows(2).all(|w| w[0] < w[1]),
        "progress went back: {text}"
    );
    let last_frame = &text[text.rfind("run live  [").unwrap()..];
    assert!(last_frame.starts_with("run live  [done]"), "{text}");
    assert!(last_frame.contains("result: all four"), "{text}");
    assert!(
        !text.contains('\x1b'),
        "no screen clearing when not a terminal"
    );
    assert!(
        text.contains("\n\nrun live  ["),
        "frames are separated by a blank line"
    );

    // JSON frames: one document per line, each changed, the last finalized.
    let docs: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(docs.len() >= 5, "{json}");
    assert_eq!(docs.last().unwrap()["status"], "done");
    assert!(docs.windows(2).all(|w| w[0] != w[1]));

    // Once finalized, a watcher prints the final view and exits at once.
    let before = tree_bytes(&run_dir);
    let t = Instant::now();
    let out = ok(root, &["status", "live", "--watch"]);
    assert!(t.elapsed() < Duration::from_secs(1));
    assert!(out.starts_with("run live  [done]"), "{out}");
    assert_eq!(tree_bytes(&run_dir), before);
}

#[test]
fn watch_refuses_bad_intervals_and_list() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(root, &["init", "--id", "r", "--task", "t"]);
    for args in [
        &["status", "r", "--watch", "--interval", "0"][..],
        &["status", "r", "--watch", "--interval", "nan"],
        &["status", "--list", "--watch"],
        &["status", "r", "--interval", "2"],
    ] {
        assert_eq!(runlog(root, args).status.code(), Some(2), "{args:?}");
    }
}

/// `status --watch | head -3` on an idle run: the watcher writes its first
/// frame, then nothing (nothing changes), yet it must end once `head` has
/// gone, killed by SIGPIPE without a word, well within a few intervals.
#[test]
fn watch_piped_on_an_idle_run_ends_when_its_reader_goes() {
    use std::os::unix::process::ExitStatusExt;
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(
        root,
        &["init", "--id", "idle", "--task", "t", "--units", "a,b"],
    );
    for json in [false, true] {
        let mut c = cmd(root);
        if json {
            c.arg("--json");
        }
        let mut child = c
            .args(["status", "idle", "--watch", "--interval", "0.1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // As `head -1` does: read the first line, then close the pipe.
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty(), "the first frame");
        let closed = Instant::now();
        let deadline = closed + Duration::from_secs(10);
        let st = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("json={json}: the idle watcher outlived its reader by 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(st.signal(), Some(libc::SIGPIPE), "json={json}: {st:?}");
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!(err, "", "json={json}: quiet");
    }
    // And through a shell pipeline, as docs/GUIDE.md ("The CLI") says it ends quietly.
    let script = "\"$0\" --dir \"$1\" status idle --watch --interval 0.1 | head -3 >/dev/null; echo \"status=${PIPESTATUS[0]}\"";
    let t = Instant::now();
    let o = std::process::Command::new("timeout")
        .args(["20", "bash", "-c", script, BIN])
        .arg(root)
        .env_remove("RUNLOG_DIR")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("status=141"), "{stdout} {:?}", o.status);
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
}
