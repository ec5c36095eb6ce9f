//! Proves the Python package builds and passes its tests: builds the abi3 wheel
//! of `python/` once (`pip wheel` through python/backend: maturin's module and
//! the native `runlog` CLI, release at the full depth and dev at the quick
//! one), installs it into the venv named by
//! `$RUNLOG_PYTHON_VENV` (maturin and pytest installed; `.ci/run` creates it),
//! and runs `python/tests` with pytest there, the wheel-in-a-fresh-venv test
//! included. Without that venv it says why it skipped, unless
//! `RUNLOG_REQUIRE_PYTHON=1` (CI) makes that a failure.
#[path = "depth/mod.rs"]
mod depth;
#[path = "skip_support/mod.rs"]
mod skip_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const ENV_VENV: &str = "RUNLOG_PYTHON_VENV";
/// Overrides where the wheel is built (default: the test build's target directory).
const ENV_TARGET: &str = "RUNLOG_PYTHON_TARGET_DIR";

/// The venv's python and maturin, or `None` (skip) with the reason printed.
fn venv() -> Option<(PathBuf, PathBuf)> {
    let why = match std::env::var_os(ENV_VENV).filter(|v| !v.is_empty()) {
        None => {
            format!(
                "${ENV_VENV} is not set (a venv with maturin and pytest; scripts/test makes one)"
            )
        }
        Some(v) => {
            let dir = PathBuf::from(v);
            let (py, maturin) = (dir.join("bin/python"), dir.join("bin/maturin"));
            let pytest = Command::new(&py)
                .args(["-c", "import pytest"])
                .output()
                .is_ok_and(|o| o.status.success());
            if maturin.exists() && pytest {
                return Some((py, maturin));
            }
            format!(
                "${ENV_VENV}={} lacks maturin or pytest (pip install maturin pytest)",
                dir.display()
            )
        }
    };
    skip_support::skip(
        "python_package_builds_and_passes_pytest",
        "RUNLOG_REQUIRE_PYTHON",
        &why,
    );
    None
}

/// $PATH with `dir` first.
fn path_with(dir: &Path) -> std::ffi::OsString {
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(&rest)))
        .expect("PATH")
}

fn run(what: &str, cmd: &mut Command) -> String {
    let t = Instant::now();
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{text}",
        out.status
    );
    eprintln!("{what}: {:.1}s", t.elapsed().as_secs_f64());
    text
}

#[test]
fn python_package_builds_and_passes_pytest() {
    let Some((python, _maturin)) = venv() else {
        return;
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    // In the target directory this test was built in (cargo holds no lock
    // while tests run). The full depth builds the wheel as a user's `pip
    // install ./python` does, release (CI builds the release binary first, so
    // most of its dependencies are compiled); the quick one with the dev
    // profile, whose dependencies `cargo test` compiled (about 20 crates are
    // left to compile, not 210 in release).
    let full = depth::full();
    let target = std::env::var_os(ENV_TARGET)
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR"))
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("target"));
    // `dev`, not `test`: `cargo rustc --profile test` would build the module
    // as a test harness. The dev profile is the test profile's (Cargo.toml).
    let profile = if full { "release" } else { "dev" };
    let dist = tempfile::tempdir().expect("temp dir");

    // Through the package's PEP 517 backend, as `pip install ./python` builds
    // it: maturin's wheel plus the native `runlog` CLI (python/backend).
    run(
        "pip wheel ./python (maturin + the runlog CLI)",
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "--no-index",
                "--no-build-isolation",
                "--wheel-dir",
            ])
            .arg(dist.path())
            .arg(repo.join("python"))
            // maturin's backend runs `maturin` from PATH.
            .env("PATH", path_with(python.parent().expect("venv bin")))
            .env("CARGO_TARGET_DIR", &target)
            .env("RUNLOG_WHEEL_PROFILE", profile)
            .env("MATURIN_PEP517_ARGS", format!("--profile {profile}")),
    );
    let wheels: Vec<PathBuf> = std::fs::read_dir(dist.path())
        .expect("read dist")
        .map(|e| e.expect("dist entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    assert_eq!(wheels.len(), 1, "one wheel expected: {wheels:?}");
    let wheel = &wheels[0];
    let name = wheel.file_name().unwrap_or_default().to_string_lossy();
    assert!(name.contains("-cp39-abi3-"), "not an abi3 wheel: {name}");

    run(
        "pip install the wheel",
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--force-reinstall",
                "--no-deps",
                "--no-index",
            ])
            .arg(wheel),
    );
    // From a directory outside the repository, so `import runlog` finds the
    // installed wheel and not python/runlog.
    let out = run(
        "pytest python/tests",
        Command::new(&python)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .arg(repo.join("python/tests"))
            .current_dir(dist.path())
            .env("RUNLOG_WHEEL", wheel)
            // For the bench's apply row (a debug build: checked, not measured).
            .env("RUNLOG_BIN", env!("CARGO_BIN_EXE_runlog"))
            .env("RUNLOG_REQUIRE_PYTHON", "1")
            .env_remove("RUNLOG_DIR")
            .env_remove("RUNLOG_KEY_FILE"),
    );
    let summary = out
        .lines()
        .rev()
        .find(|l| l.contains(" passed"))
        .unwrap_or("");
    eprintln!("{summary}");
    assert!(
        !summary.contains("skipped") && !summary.contains("failed"),
        "pytest: {summary}"
    );
}
