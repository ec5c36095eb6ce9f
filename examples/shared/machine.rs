//! The machine description every measuring example's JSON carries
//! (`bench/examples/compare`, `examples/scale`), so their outputs can be compared.

use serde_json::{Value, json};

/// Cores, kernel, CPU and the filesystem holding the temp directory.
pub fn machine() -> Value {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let tmp = std::env::temp_dir()
        .canonicalize()
        .unwrap_or_else(|_| std::env::temp_dir());
    let (mut fs, mut dev, mut best) = ("unknown".to_string(), String::new(), 0usize);
    if let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") {
        for l in mounts.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() >= 3 && tmp.starts_with(f[1]) && f[1].len() >= best {
                best = f[1].len();
                dev = f[0].to_string();
                fs = f[2].to_string();
            }
        }
    }
    json!({
        "cores": cores,
        "kernel": kernel,
        "cpu": cpu,
        "temp_dir": tmp.display().to_string(),
        "temp_fs": fs,
        "temp_device": dev,
    })
}
