//! Proves run ids are ones a shell and a filesystem can use: a leading `-`
//! or `.`, `..`, a trailing `.` and shell metacharacters are refused (exit 2,
//! nothing created), and a plain id is used everywhere without quoting.
use crate::cli_support;
use cli_support::*;

#[test]
fn ids_a_shell_or_filesystem_trips_on_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    for bad in [
        "-x", "--x", ".hidden", "x..", "a..b", "x.", "_x", "a b", "a/b", "a;b", "a*", "~a",
    ] {
        let id = format!("--id={bad}");
        let o = runlog(root, &["init", &id, "--task", "t"]);
        assert_eq!(o.status.code(), Some(2), "{bad:?} accepted");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("run id"), "{bad:?}: {e}");
        let o = runlog(root, &["start", &id]);
        assert_eq!(o.status.code(), Some(2), "start {bad:?} accepted");
        assert!(!root.join("runs").join(bad).exists(), "{bad:?} created");
    }
    ok(root, &["init", "--id", "job-1.v2_x", "--task", "t"]);
    assert_eq!(ok_json(root, &["get", "job-1.v2_x"])["id"], "job-1.v2_x");
    let help =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/CLI.md")).unwrap();
    assert!(
        help.contains("must start with a letter or a digit"),
        "docs/CLI.md states the rule"
    );
}
