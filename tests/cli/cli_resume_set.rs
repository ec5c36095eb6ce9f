//! Proves the resume set on a dependency graph with chains: done skips, an
//! interrupted unit is eligible again with its attempts counted, and held-back
//! units point at the not-done roots of their chains (unknown deps and cycles too).
use crate::cli_support;
use cli_support::*;
use serde_json::json;

#[test]
fn resume_set_on_chains_with_an_interrupted_unit() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    // a → b → c → d ; e → b ; f independent ; g → ghost ; x ↔ y
    ok(
        root,
        &[
            "init", "--id", "graph", "--task", "chains", "--units", "a,f", "--deps", "b=a+e",
            "--deps", "c=b", "--deps", "d=c", "--deps", "g=ghost", "--deps", "x=y", "--deps",
            "y=x",
        ],
    );
    ok(root, &["unit", "graph", "a", "in_progress"]);
    ok(root, &["unit", "graph", "a", "done"]);
    ok(root, &["unit", "graph", "e", "in_progress"]);
    // The process working on `e` dies here; a resumed worker starts it again.
    let r = ok_json(root, &["resume", "gr"]); // a unique prefix will do for readers
    assert_eq!(r["skip"], json!(["a"]));
    assert_eq!(r["eligible"], json!(["e", "f", "ghost"]));
    assert_eq!(r["dep_blocked"]["b"], json!(["e"]));
    assert_eq!(r["dep_blocked"]["c"], json!(["e"]));
    assert_eq!(r["dep_blocked"]["d"], json!(["e"]));
    assert_eq!(r["dep_blocked"]["g"], json!(["ghost"]));
    assert_eq!(r["dep_blocked"]["x"], json!(["x", "y"]));

    ok(root, &["unit", "graph", "e", "in_progress"]);
    let doc = ok_json(root, &["get", "graph"]);
    assert_eq!(
        doc["units"]["e"]["attempts"], 2,
        "the interrupted attempt shows"
    );
    assert_eq!(doc["units"]["e"]["status"], "in_progress");

    // Starting `c` before its chain is done is held back, naming the root.
    let o = runlog(root, &["unit", "graph", "c", "in_progress"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("blocked on e"));

    ok(root, &["unit", "graph", "e", "done"]);
    let r = ok_json(root, &["resume", "graph"]);
    assert_eq!(r["skip"], json!(["a", "e"]));
    assert_eq!(r["eligible"], json!(["b", "f", "ghost"]));
    assert_eq!(r["dep_blocked"]["d"], json!(["b"]));
    // A dep_blocked status does not stop a unit being eligible once its deps land.
    ok(root, &["unit", "graph", "b", "dep_blocked"]);
    let r = ok_json(root, &["resume", "graph"]);
    assert!(r["eligible"].as_array().unwrap().contains(&json!("b")));
}
