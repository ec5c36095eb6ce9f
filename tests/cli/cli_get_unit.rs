//! Proves `runlog get RUN --unit U` prints that unit as in `get RUN`'s `units`
//! map plus its `name` (pretty and `--json`, by id prefix too), and that a unit
//! the run does not have (an unknown dependency included) or an unknown run
//! exits 2 naming them, writing nothing.
use crate::cli_support;
use cli_support::*;
use serde_json::json;

fn setup(root: &std::path::Path) {
    ok(
        root,
        &[
            "init", "--id", "graph", "--task", "t", "--units", "a", "--deps", "b=a",
        ],
    );
    // `init` adds the units named in --deps; `unit --deps` leaves `ghost` unknown.
    ok(root, &["unit", "graph", "c", "pending", "--deps", "ghost"]);
    ok(
        root,
        &["unit", "graph", "a", "in_progress", "--note", "first"],
    );
    ok(root, &["unit", "graph", "a", "done"]);
}

#[test]
fn one_unit_as_in_the_document_plus_its_name() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    setup(root);
    let doc = ok_json(root, &["get", "graph"]);
    for name in ["a", "b", "c"] {
        let mut expected = doc["units"][name].clone();
        expected["name"] = json!(name);
        assert_eq!(ok_json(root, &["get", "graph", "--unit", name]), expected);
        // Pretty by default, a unique prefix will do.
        let pretty = ok(root, &["get", "gr", "--unit", name]);
        assert!(pretty.lines().count() > 1, "pretty output: {pretty}");
        let parsed: serde_json::Value = serde_json::from_str(&pretty).unwrap();
        assert_eq!(parsed, expected);
    }
    let a = ok_json(root, &["get", "graph", "--unit", "a"]);
    assert_eq!(a["status"], "done");
    assert_eq!(a["attempts"], 1);
    assert_eq!(a["note"], "first");
    assert_eq!(
        ok_json(root, &["get", "graph", "--unit", "b"])["dependsOn"],
        json!(["a"])
    );
}

#[test]
fn a_unit_or_run_that_does_not_exist_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    setup(root);
    let before = tree_bytes(root);
    // `ghost` is only named as a dependency: not a unit of the run.
    for unit in ["zz", "ghost"] {
        let o = runlog(root, &["get", "gr", "--unit", unit]);
        assert_eq!(o.status.code(), Some(2));
        assert!(o.stdout.is_empty());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("run graph") && err.contains(&format!("no unit \"{unit}\"")),
            "{err}"
        );
    }
    let o = runlog(root, &["get", "nope", "--unit", "a"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nope"));
    assert_eq!(tree_bytes(root), before, "a reader writes nothing");
}
