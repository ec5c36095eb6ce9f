//! Proves `runlog item RUN JSON` refused for its JSON (not JSON at all, not an
//! object, an array of non-objects) says what shape is expected and shows an
//! example to copy, and that the example, run as shown, is accepted.
use crate::cli_support::*;

const EXAMPLE: &str = r#"runlog item r1 '{"finding":"flaky test"}'"#;

#[test]
fn item_refusal_shows_the_expected_shape_and_a_working_example() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    ok(root, &["init", "--id", "r1", "--task", "t", "--units", "a"]);
    for (given, why) in [
        ("not json", "invalid JSON"),
        ("\"a string\"", "must be a JSON object"),
        (
            "[1, 2]",
            "every element of an item array must be a JSON object",
        ),
    ] {
        let before = tree_bytes_but_locks(root);
        let o = runlog(root, &["item", "r1", given]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{given:?}: {stderr}");
        assert!(stderr.contains(why), "{given:?}: {stderr}");
        assert!(
            stderr.contains("an item is a JSON object (or an array of objects)"),
            "{given:?}: no shape in {stderr:?}"
        );
        assert!(
            stderr.contains(EXAMPLE),
            "{given:?}: no example in {stderr:?}"
        );
        assert!(o.stdout.is_empty());
        assert_eq!(tree_bytes_but_locks(root), before, "{given:?} wrote");
    }
    // The example works as shown.
    let out = ok(root, &["item", "r1", r#"{"finding":"flaky test"}"#]);
    assert!(out.starts_with("item-1 (seq"), "{out}");
}
