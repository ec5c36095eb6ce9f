//! Proves the help answers: exit codes and the docs pointer under `--help`,
//! the `--interval` range, `apply`'s op format; a command's help lists only
//! the flags it uses (no `--lock-timeout` on readers, no key on `demo`), yet
//! scripts may still pass them; completions and the man page are generated;
//! and docs/CLI.md names every command `--help` lists.
use crate::cli_support;
use cli_support::*;

fn help(args: &[&str]) -> String {
    let d = tempfile::tempdir().unwrap();
    ok(d.path(), args)
}

#[test]
fn help_says_exit_codes_ranges_and_formats() {
    let top = help(&["--help"]);
    assert!(
        top.contains("Exit codes: 0 done; 1 failed") && top.contains("docs/CLI.md"),
        "{top}"
    );
    assert!(
        top.contains("archive") && top.contains("completions"),
        "{top}"
    );
    let status = help(&["status", "--help"]);
    assert!(status.contains("0.05 to 3600"), "{status}");
    let apply = help(&["apply", "--help"]);
    for op in [
        "unit",
        "phase",
        "item",
        "resolve",
        "budget",
        "spend",
        "checkpoint",
        "finalize",
    ] {
        assert!(
            apply.contains(&format!("{{\"op\":\"{op}\"")),
            "apply --help lacks {op}"
        );
    }
    let start = help(&["start", "--help"]);
    assert!(
        start.contains("--keep-finished") && start.contains("RUN_FINISHED_STARTED_FRESH"),
        "{start}"
    );
}

#[test]
fn each_command_lists_the_flags_it_uses() {
    for reader in ["get", "resume", "status", "verify", "dump", "gc", "demo"] {
        let h = help(&[reader, "--help"]);
        assert!(
            !h.contains("--lock-timeout"),
            "{reader} --help lists --lock-timeout"
        );
    }
    for writer in [
        "unit", "apply", "start", "init", "compact", "rebuild", "finalize",
    ] {
        let h = help(&[writer, "--help"]);
        assert!(
            h.contains("--lock-timeout"),
            "{writer} --help lacks --lock-timeout"
        );
        assert!(h.contains("--key-file"), "{writer} --help lacks --key-file");
    }
    let demo = help(&["demo", "--help"]);
    assert!(!demo.contains("--key-file"), "{demo}");
    assert!(demo.contains("temporary directory"), "{demo}");
    assert!(
        help(&["get", "--help"]).contains("--key-file"),
        "readers read tagged runs"
    );

    // Still accepted where hidden, before or after the command.
    let d = tempfile::tempdir().unwrap();
    ok(d.path(), &["init", "--id", "r", "--task", "t"]);
    ok(d.path(), &["get", "r", "--lock-timeout", "3"]);
    ok(d.path(), &["--lock-timeout", "3", "get", "r"]);
    ok(
        d.path(),
        &["--lock-timeout", "0.5", "unit", "r", "a", "pending"],
    );
}

/// The commands' arguments are built only for the command being run (clap's
/// `defer`, so `runlog unit` does not pay for every command's flags). What
/// that can shift is pinned here: each command's help opens with its own about
/// (not the doc of a struct or enum built into it), its own flags come before
/// the shared ones, and nested commands stay in the help tree.
#[test]
fn deferred_commands_keep_their_about_flag_order_and_nested_help() {
    for (args, about) in [
        (&["init", "--help"][..], "Create a run"),
        (&["start", "--help"], "Resume the live run"),
        (&["archive", "--help"], "List archived runs"),
        (&["remote", "--help"], "A run's remote"),
        (
            &["help", "archive", "list"],
            "List archived runs, newest first",
        ),
    ] {
        let h = help(args);
        assert!(h.starts_with(about), "{args:?}: {h}");
    }
    for (cmd, own) in [
        ("unit", "--note"),
        ("budget", "--limit"),
        ("gc", "--keep-days"),
    ] {
        let h = help(&[cmd, "--help"]);
        let at = |flag: &str| {
            h.find(&format!("  --{flag}"))
                .unwrap_or_else(|| panic!("{cmd}: no {flag}: {h}"))
        };
        assert!(at(&own[2..]) < at("json"), "{cmd}: {h}");
        if cmd != "gc" {
            assert!(at(&own[2..]) < at("lock-timeout"), "{cmd}: {h}");
        }
    }
    let man = help(&["man"]);
    assert!(
        man.contains("Create a run") && !man.contains("Fields shared"),
        "{man}"
    );
}

#[test]
fn completions_and_man_page_are_generated() {
    let bash = help(&["completions", "bash"]);
    assert!(
        bash.contains("runlog") && bash.contains("archive"),
        "{bash}"
    );
    let o = std::process::Command::new("bash")
        .args(["-n", "-c", &bash])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    for shell in ["zsh", "fish"] {
        assert!(help(&["completions", shell]).contains("runlog"));
    }
    let man = help(&["man"]);
    assert!(
        man.contains(".TH runlog 1") && man.contains("lock\\-timeout"),
        "{man}"
    );
    let d = tempfile::tempdir().unwrap();
    let o = runlog(d.path(), &["completions", "nosuchshell"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn docs_cli_md_names_every_command() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/CLI.md")).unwrap();
    let top = help(&["--help"]);
    let commands: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() > 15, "{top}");
    for c in commands {
        assert!(
            doc.contains(&format!("`{c}")),
            "docs/CLI.md does not describe `{c}`"
        );
    }
}
