"""The PEP 517 build backend of the runlog package: maturin's, plus the CLI.

maturin builds the extension module (`runlog._runlog`), but it cannot put a
second cargo target into the same wheel: a PyO3 build compiles only the
cdylib (PyO3/maturin#368, open). This backend wraps maturin's hooks. After
maturin has built the wheel, `cargo rustc --release --bin runlog` builds the
native `runlog` binary in the same target directory and the binary is added to
the wheel as `runlog-<version>.data/scripts/runlog`, which pip installs beside
`python` in the environment's `bin/`. runlog-python depends on the `runlog`
crate with the binary's features (`cli`; the crate has no default ones), so that second
cargo call reuses every crate maturin compiled: it compiles src/main.rs and
links. Its progress goes to stderr, which `pip install -v` shows.

A native binary rather than a console script calling into the extension: a
one-shot CLI call is a checkpoint's hot path, and a console script starts a
Python interpreter for each call (docs/GUIDE.md, Python, has the figures).

Only the PEP 517 path (`pip install ./python`, `pip wheel ./python`,
`python -m build python`) goes through here; a bare `maturin build` or
`maturin develop` makes the module without the CLI.
"""

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile

import maturin as _maturin

# maturin's CLI warns "`build-backend` in pyproject.toml is not set to
# `maturin`, packaging tools such as pip will not use maturin to build this
# project" whenever the name there is not literally "maturin", once per hook
# (so twice in `pip install -v ./python`: metadata, then the wheel). Here it is
# false: this backend *is* maturin's, wrapped. maturin reads this variable to
# skip that one check (and nothing else), so every other line it prints,
# errors included, still shows. Set for the maturin processes the hooks start.
os.environ.setdefault("MATURIN_NO_MISSING_BUILD_BACKEND_WARNING", "1")

# maturin's hooks that need nothing added.
build_sdist = _maturin.build_sdist
get_requires_for_build_sdist = _maturin.get_requires_for_build_sdist
get_requires_for_build_wheel = _maturin.get_requires_for_build_wheel
get_requires_for_build_editable = _maturin.get_requires_for_build_editable
prepare_metadata_for_build_wheel = _maturin.prepare_metadata_for_build_wheel
prepare_metadata_for_build_editable = _maturin.prepare_metadata_for_build_editable

BIN = "runlog"


def _say(msg):
    print("runlog_backend: " + msg, file=sys.stderr, flush=True)


def _cargo():
    return os.environ.get("CARGO", "cargo")


def _root_manifest():
    """The `runlog` crate's Cargo.toml, from the workspace python/ is in."""
    out = subprocess.run(
        [_cargo(), "metadata", "--no-deps", "--format-version", "1",
         "--manifest-path", "Cargo.toml"],
        check=True, stdout=subprocess.PIPE,
    ).stdout
    for pkg in json.loads(out)["packages"]:
        if pkg["name"] == BIN:
            return pkg["manifest_path"]
    raise RuntimeError("runlog_backend: no `runlog` package in the workspace of python/Cargo.toml")


def _profile():
    """The cargo profile: `release`, unless `RUNLOG_WHEEL_PROFILE` names another
    (this repository's quick test suite builds its wheel with `dev`, whose
    dependencies `cargo test` already compiled; maturin is then given the
    same with `MATURIN_PEP517_ARGS="--profile dev"`)."""
    return os.environ.get("RUNLOG_WHEEL_PROFILE") or "release"


def _build_cli():
    """Builds the `runlog` binary; returns its path. Stripped as the module is
    (`strip = true`): `-C strip=symbols` is a rustc flag for the binary only,
    so the dependencies' builds are the ones maturin made."""
    cmd = [_cargo(), "rustc", "--profile", _profile(), "--manifest-path", _root_manifest(),
           "--bin", BIN, "--features", "cli",
           "--message-format", "json-render-diagnostics", "--", "-C", "strip=symbols"]
    _say("building the runlog CLI: " + " ".join(cmd))
    # stdout is cargo's JSON (read below); stderr, its progress, is pip's.
    proc = subprocess.run(cmd, stdout=subprocess.PIPE)
    if proc.returncode != 0:
        raise RuntimeError("runlog_backend: building the runlog CLI failed (cargo exit %d)"
                           % proc.returncode)
    exe = None
    for line in proc.stdout.decode(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        msg = json.loads(line)
        if (msg.get("reason") == "compiler-artifact" and msg.get("executable")
                and msg["target"]["name"] == BIN and "bin" in msg["target"]["kind"]):
            exe = msg["executable"]
    if not exe or not os.path.isfile(exe):
        raise RuntimeError("runlog_backend: cargo built no runlog executable")
    return exe


def _record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def add_cli_to_wheel(wheel, exe):
    """Rewrites the wheel with `exe` as `<dist>-<version>.data/scripts/runlog`
    (mode 755) and its line in RECORD."""
    tmp = wheel + ".tmp"
    with open(exe, "rb") as f:
        data = f.read()
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        record = next(n for n in src.namelist() if n.endswith(".dist-info/RECORD"))
        script = record[: -len(".dist-info/RECORD")] + ".data/scripts/" + BIN
        for info in src.infolist():
            if info.filename not in (record, script):
                dst.writestr(info, src.read(info.filename))
        entry = zipfile.ZipInfo(script, date_time=(1980, 1, 1, 0, 0, 0))
        entry.external_attr = 0o100755 << 16
        entry.compress_type = zipfile.ZIP_DEFLATED
        dst.writestr(entry, data)
        lines = [line for line in src.read(record).decode().splitlines()
                 if line and not line.startswith(script + ",")]
        lines.insert(len(lines) - 1 if lines and lines[-1].startswith(record + ",") else len(lines),
                     "%s,%s,%d" % (script, _record_hash(data), len(data)))
        dst.writestr(src.getinfo(record), "\n".join(lines) + "\n")
    os.replace(tmp, wheel)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = _maturin.build_wheel(wheel_directory, config_settings, metadata_directory)
    add_cli_to_wheel(os.path.join(wheel_directory, name), _build_cli())
    _say("added the runlog CLI to " + name)
    return name


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    name = _maturin.build_editable(wheel_directory, config_settings, metadata_directory)
    add_cli_to_wheel(os.path.join(wheel_directory, name), _build_cli())
    _say("added the runlog CLI to " + name)
    return name
