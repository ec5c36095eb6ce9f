//! Proves errors print once: each `Display` says its own layer's part and
//! `source()` carries the cause, so the chain (`ErrorChain`, the CLI's stderr)
//! holds every cause exactly once; the poison after a failed fsync says once
//! what failed, where and what to do; a refusal keeps its type at both layers;
//! an I/O failure the CLI meets before any store (the working directory)
//! exits 1, not 2, while a key file that is missing or of a bad mode is
//! refused (2).
use crate::cli_support;
use crate::common;
use cli_support::*;
use common::crash::{dir, sim_opts};
use common::*;
use runlog::engine::sim::{Fault, FaultKind, Op, SimFs};
use runlog::engine::{Codec, Error, ErrorChain, Store};
use runlog::run::{InitSpec, RuleError, RunError, RunStatus, Runs, UnitStatus};
use std::error::Error as _;

/// How many times `needle` occurs in `hay`.
fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// The index of the first fsync an append issues on a fresh store: found by a
/// dry run, the simulator being deterministic.
fn first_append_fsync(codec: Codec) -> (u64, u64) {
    let fs = SimFs::new();
    let s = Store::<Ledger>::open(dir(), sim_opts(&fs, codec)).unwrap();
    let opened = fs.ops();
    s.append(&entry(1, 8)).unwrap();
    let log = fs.op_log();
    assert_eq!(log.len() as u64, fs.ops(), "the op log counts every call");
    let at = (opened as usize..log.len())
        .find(|&i| log[i] == Op::Fsync)
        .expect("an acknowledged append fsyncs") as u64;
    (opened, at)
}

#[test]
fn the_poison_after_a_failed_fsync_names_the_failure_once() {
    for codec in codecs() {
        let (opened, at) = first_append_fsync(codec);
        let fs = SimFs::new();
        fs.inject(Some(Fault {
            at,
            kind: FaultKind::Eio,
            persistent: false,
        }));
        let s = Store::<Ledger>::open(dir(), sim_opts(&fs, codec)).unwrap();
        assert_eq!(fs.ops(), opened, "{codec:?}: the same open");
        let first = s.append(&entry(1, 8)).unwrap_err();
        assert_eq!(fs.faults_fired(), 1, "{codec:?}");
        // The failing call, a later call and a sync all report the same poison.
        let later = s.append(&entry(2, 8)).unwrap_err();
        let sync = s.sync().unwrap_err();
        for e in [&first, &later, &sync] {
            assert!(matches!(e, Error::Poisoned { .. }), "{codec:?}: {e:?}");
            let text = ErrorChain(e).to_string();
            assert_eq!(count(&text, "fsync"), 1, "{codec:?}: {text}");
            assert_eq!(count(&text, "os error 5"), 1, "{codec:?}: {text}");
            assert_eq!(count(&text, "reopen"), 1, "{codec:?}: {text}");
            assert_eq!(count(&text, "poison"), 0, "{codec:?}: {text}");
            assert_eq!(count(&text, "earlier failure"), 0, "{codec:?}: {text}");
            assert!(text.contains(&dir().display().to_string()), "{text}");
        }
    }
}

#[test]
fn an_io_error_prints_its_cause_once_through_the_chain() {
    let e = Error::Io {
        op: "fsync segment",
        path: "/s/seg".into(),
        source: std::io::Error::from_raw_os_error(5),
    };
    let os = std::io::Error::from_raw_os_error(5).to_string();
    assert_eq!(
        e.to_string(),
        "fsync segment /s/seg",
        "Display is this layer only"
    );
    assert_eq!(e.source().unwrap().to_string(), os);
    let chain = ErrorChain(&e).to_string();
    assert_eq!(chain, format!("fsync segment /s/seg: {os}"));
    // A run-layer error over it: still once.
    let runs_dir = tempfile::tempdir().unwrap();
    let r = RunError::Io {
        op: "list runs",
        path: runs_dir.path().into(),
        source: std::io::Error::from_raw_os_error(5),
    };
    assert_eq!(count(&ErrorChain(&r).to_string(), &os), 1);
}

#[test]
fn refusals_keep_their_type_and_print_once() {
    // Engine: the machine's own error comes back typed.
    let d = tempfile::tempdir().unwrap();
    let s = Store::<Ledger>::open(d.path(), opts(Codec::Binary)).unwrap();
    let e = s.append(&entry(1000, 1)).unwrap_err();
    assert!(e.is_refused());
    assert_eq!(e.refusal::<Rejected>().map(|r| r.0), Some(1000));
    assert_eq!(e.to_string(), "refused");
    let why = Rejected(1000).to_string();
    assert_eq!(ErrorChain(&e).to_string(), format!("refused: {why}"));

    // Run layer: the rules' refusal is a `RuleError`, not a boxed error.
    let root = tempfile::tempdir().unwrap();
    let runs = Runs::new(root.path());
    let run = runs
        .init(InitSpec {
            id: "r".into(),
            task: "t".into(),
            units: vec!["a".into()],
            ..Default::default()
        })
        .unwrap();
    run.finalize(RunStatus::Aborted, None).unwrap();
    let e = run.set_unit("a", UnitStatus::Done, None, None).unwrap_err();
    assert!(e.is_refused() && e.exit_code() == 2, "{e}");
    assert!(matches!(e.rule(), Some(RuleError::Closed { .. })), "{e:?}");
    let rule = e.rule().unwrap().to_string();
    assert_eq!(e.to_string(), "run r: refused");
    assert_eq!(
        ErrorChain(&e).to_string(),
        format!("run r: refused: {rule}")
    );
}

#[test]
fn the_cli_prints_each_cause_once_and_adds_the_command() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(root, &["init", "--id", "r1", "--task", "t", "--units", "a"]);
    let o = runlog(root, &["spend", "r1", "nobudget", "1"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(count(&stderr, "no budget \"nobudget\""), 1, "{stderr}");
    assert_eq!(count(&stderr, "refused"), 1, "{stderr}");
    assert_eq!(
        count(&stderr, "`runlog budget r1 nobudget --owner WHO"),
        1,
        "the CLI adds the command: {stderr}"
    );
}

#[test]
fn a_missing_key_file_is_refused_naming_it_once() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("no-such-key");
    let o = cmd(d.path())
        .arg("--key-file")
        .arg(&missing)
        .args(["status", "--list"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    // An argument naming nothing: refused (2), as a key file of a bad mode is.
    assert_eq!(o.status.code(), Some(2), "refused: {stderr}");
    assert_eq!(
        count(&stderr, &missing.display().to_string()),
        1,
        "{stderr}"
    );
    assert_eq!(count(&stderr, "does not exist"), 1, "{stderr}");

    // A key file that is readable but not safe to use is refused (2).
    let loose = d.path().join("loose-key");
    std::fs::write(&loose, "00".repeat(32)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = cmd(d.path())
        .arg("--key-file")
        .arg(&loose)
        .args(["status", "--list"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert_eq!(count(&stderr, &loose.display().to_string()), 1, "{stderr}");
}

#[test]
fn a_working_directory_that_is_gone_exits_1() {
    let d = tempfile::tempdir().unwrap();
    let gone = d.path().join("gone");
    std::fs::create_dir(&gone).unwrap();
    // The shell enters the directory, removes it, then runs the binary there.
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"cd "$1" && rmdir "$1" && exec "$0" --dir "$2" status --list"#)
        .arg(BIN)
        .arg(&gone)
        .arg(d.path().join("root"))
        .env_remove("RUNLOG_DIR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "an I/O failure: {stderr}");
    assert_eq!(count(&stderr, "working directory"), 1, "{stderr}");
    assert_eq!(count(&stderr, "os error 2"), 1, "{stderr}");
}
