//! Proves `examples/scale` builds and measures a run end to end at a tiny size
//! (200 units, one call each), so the instrument cannot rot: every measurement
//! succeeds, the child processes see all 200 units, the 8-writer row lands every
//! spawn, and the record counts it reports are the ones it wrote.
use crate::cli_support;
use cli_support::*;
use std::process::Command;

const UNITS: u64 = 200;

#[test]
fn scale_measures_a_tiny_run_with_no_error() {
    let bin = example_binary("scale");
    let d = tempfile::tempdir().unwrap();
    let out_path = d.path().join("scale.json");
    let o = Command::new(&bin)
        .args([
            "--units",
            &UNITS.to_string(),
            "--reps",
            "1",
            "--json",
            "--atomic",
        ])
        .args(["--spawns", "16", "--tail", "100", "--bin", BIN, "--out"])
        .arg(&out_path)
        .env("TMPDIR", d.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap();
    assert_eq!(v, written, "--out must hold what --json printed");
    // The binary measured is named, and a test build's is said to be one.
    let b = &v["binary"];
    assert_eq!(b["path"], BIN);
    assert_eq!(b["release"], BIN.contains("/release/"), "{b:#}");

    let sizes = v["sizes"].as_array().unwrap();
    assert_eq!(sizes.len(), 1);
    let s = &sizes[0];
    assert_eq!(s["units"], UNITS);
    assert!(!s.to_string().contains("\"error\":\""), "an error: {s:#}");
    // init + 200 pending units + a 100-record tail.
    assert_eq!(s["build"]["records"], 1 + UNITS + 100);
    for key in ["open", "oneshot", "status", "apply_first_ack", "resume"] {
        assert_eq!(s[key]["ok"], 1, "{key}: {:#}", s[key]);
        assert_eq!(s[key]["failed"], 0, "{key}");
        assert!(s[key]["secs"].as_f64().unwrap() > 0.0, "{key}");
        assert!(s[key]["rss_mib"].as_f64().unwrap() > 0.0, "{key}");
    }
    assert!(s["resume"]["stdout_bytes"].as_u64().unwrap() > 0);
    assert!(s["compaction"]["secs"].as_f64().unwrap() > 0.0);
    assert!(s["snapshot_bytes"].as_u64().unwrap() > 0);
    assert!(s["atomic_rewrite"]["document_bytes"].as_u64().unwrap() > 0);
    let c = &s["concurrent"];
    assert_eq!(c["spawns"], 16);
    assert_eq!(c["ok"], 16, "{c:#}");
    assert_eq!(c["version_ok"], 16, "{c:#}");
    if let Some(k) = s["oneshot"]["fsyncs"].as_u64() {
        assert!(k > 0, "a durable one-shot write made no fsync");
    }
}
