//! Proves output is consistent: `compact`/`rebuild` print a line unless
//! `--json`; `gc` says when it removed nothing; `status --list` has a header,
//! aligned columns at any id length, says "no runs" (exit 2) on an empty root,
//! and shows a run it can't read as such (exit 1); `item` prints its ids.
use crate::cli_support;
use cli_support::*;

#[test]
fn compact_rebuild_gc_and_item_print_plain_lines() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(root, &["init", "--id", "r", "--task", "t", "--units", "a"]);
    let out = ok(root, &["compact", "r"]);
    assert!(
        out.starts_with("compacted run r:") && out.lines().count() == 1,
        "{out}"
    );
    assert!(ok_json(root, &["compact", "r"])["snapshotSeq"].is_u64());
    let out = ok(root, &["rebuild", "r"]);
    assert!(
        out.starts_with("rebuilt run r:") && out.lines().count() == 1,
        "{out}"
    );
    assert!(ok_json(root, &["rebuild", "r"])["lastSeq"].is_u64());
    let out = ok(root, &["gc"]);
    assert!(out.contains("nothing to remove"), "{out}");

    let out = ok(root, &["item", "r", r#"[{"q":1},{"q":2}]"#]);
    assert!(out.starts_with("item-1 item-2 "), "{out}");
    let v = ok_json(root, &["item", "r", r#"{"q":3}"#]);
    assert_eq!(v["ids"], serde_json::json!(["item-3"]));
    ok(root, &["resolve", "r", "item-2"]);
    let doc = ok_json(root, &["get", "r"]);
    let open: Vec<&str> = doc["openItems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(open, ["item-1", "item-3"]);
}

#[test]
fn status_list_has_a_header_aligned_columns_and_honest_rows() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let o = runlog(root, &["status", "--list"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no runs under"));

    let long = "L".repeat(128);
    ok(
        root,
        &["init", "--id", &long, "--task", "long", "--units", "a,b"],
    );
    ok(root, &["init", "--id", "s", "--task", "short"]);
    let out = ok(root, &["status", "--list"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[0].starts_with("ID ") && lines[0].contains("STATUS"),
        "{out}"
    );
    let col = |l: &str| l.find("running").or_else(|| l.find("STATUS")).unwrap();
    assert!(
        lines.iter().all(|l| col(l) == col(lines[0])),
        "columns drift:\n{out}"
    );

    // A tagged run listed without its key, and a damaged run: said, and exit 1.
    let key = key_file(&root.join("key"), "ab", 0o600);
    ok(root, &with_key(&key, &["init", "--id", "k", "--task", "t"]));
    let o = runlog(root, &["status", "--list"]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    let row = out.lines().find(|l| l.starts_with("k ")).unwrap();
    assert!(row.contains("unreadable") && row.contains("key"), "{row}");
    assert!(!row.contains("uninitialized"), "{row}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("run k can't be read"));
    let o = runlog(root, &["--json", "status", "--list"]);
    assert_eq!(o.status.code(), Some(1));
    let v = stdout_json(&o);
    let k = v
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "k")
        .unwrap();
    assert!(k["error"].is_string() && k["status"].is_null(), "{k}");

    // A damaged run (its only record junk) and an empty run directory: the same.
    std::fs::create_dir_all(root.join("runs/junk")).unwrap();
    std::fs::write(
        root.join("runs/junk/seg-00000000000000000001.log"),
        "junk\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.join("runs/empty")).unwrap();
    let o = runlog(root, &["status", "--list"]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    for id in ["junk", "empty"] {
        let row = out
            .lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap();
        assert!(row.contains("unreadable") && !row.contains("0/0"), "{row}");
    }
    // A run whose log is damaged inside an acknowledged record: its row says
    // why, with the file and the offset (it said only "run dmg").
    ok(
        root,
        &["init", "--id", "dmg", "--task", "t", "--units", "a,b"],
    );
    ok(root, &["unit", "dmg", "a", "done"]);
    ok(root, &["unit", "dmg", "b", "done"]);
    let seg = std::fs::read_dir(root.join("runs/dmg"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("seg-"))
        .max()
        .unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x55;
    std::fs::write(&seg, &bytes).unwrap();
    let o = runlog(root, &["status", "--list"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let name = seg.file_name().unwrap().to_string_lossy().into_owned();
    let row = out.lines().find(|l| l.starts_with("dmg ")).unwrap();
    assert!(row.contains("unreadable") && row.contains(&name), "{row}");
    let rows = stdout_json(&runlog(root, &["--json", "status", "--list"]));
    let dmg = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "dmg")
        .unwrap();
    let why = dmg["error"].as_str().unwrap();
    assert!(why.contains(&name) && why.contains("offset"), "{dmg}");
    std::fs::remove_dir_all(root.join("runs/dmg")).unwrap();
    std::fs::remove_dir_all(root.join("runs/junk")).unwrap();
    std::fs::remove_dir_all(root.join("runs/empty")).unwrap();

    // gc does not skip it silently: listed, named on stderr, exit 1.
    let o = runlog(root, &["gc", "--keep-days", "0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("skipped k (can't be read)"));
    assert!(String::from_utf8_lossy(&o.stderr).contains("gc skipped k"));
    assert!(root.join("runs/k").is_dir());
}
