"""README's Python example runs as printed, and survives being killed before
any line it executes: rerun unchanged, it finishes the run with every unit
done, and a unit done before the kill is not done again."""

import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO


def readme_example():
    text = (REPO / "README.md").read_text()
    section = text[text.index("\n## Python\n"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RUNLOG_DIR", str(tmp_path / "root"))
    exec(compile(readme_example(), "README.md", "exec"), {})
    import runlog

    view = runlog.Runs().get("nightly")
    assert view.status().status == "done" and view.status().result == "3 units"
    assert [u.note for u in view] == ["A", "B", "C"]
    assert "Counts(" in capsys.readouterr().out


# Runs the example; with KILL_AT=k, SIGKILLs itself at the k-th line event of
# the example's code (before that line runs), a real kill -9 mid-program.
# Prints the number of line events when it finishes.
RUNNER = textwrap.dedent(
    """
    import os, signal, sys
    code = compile(open(sys.argv[1]).read(), "README.md", "exec")
    kill_at = int(os.environ.get("KILL_AT", "0"))
    seen = 0
    def local(frame, event, arg):
        global seen
        if event == "line":
            seen += 1
            if seen == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
        return local
    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename == "README.md" else None
    sys.settrace(tracer)
    exec(code, {"__name__": "__main__"})
    sys.settrace(None)
    print("LINES", seen)
    """
)


def run_example(tmp_path, root, kill_at=0):
    example = tmp_path / "example.py"
    example.write_text(readme_example())
    env = dict(os.environ, RUNLOG_DIR=str(root), KILL_AT=str(kill_at))
    return subprocess.run([sys.executable, "-c", RUNNER, str(example)], env=env,
                          capture_output=True, text=True, cwd=tmp_path)


def test_readme_example_resumes_after_a_kill_at_every_line(tmp_path):
    import runlog

    clean = run_example(tmp_path, tmp_path / "clean")
    assert clean.returncode == 0, clean.stderr
    lines = int(clean.stdout.split("LINES")[-1])
    assert lines >= 10, clean.stdout
    for k in range(1, lines + 1):
        root = tmp_path / f"kill-{k}"
        killed = run_example(tmp_path, root, kill_at=k)
        assert killed.returncode == -signal.SIGKILL, (k, killed.stdout, killed.stderr)
        before, finalized = {}, False
        try:
            view = runlog.Runs(root).get("nightly")
        except runlog.NotFound:  # killed before the run was created
            view = None
        if view is not None:
            finalized = view.status().closed
            before = {u.name: u.finished_at for u in view if u.status == "done"}
        again = run_example(tmp_path, root)
        assert again.returncode == 0, f"killed at line event {k}, rerun failed:\n{again.stderr}"
        view = runlog.Runs(root).get("nightly")
        st = view.status()
        assert st.status == "done" and st.result == "3 units", (k, st)
        units = {u.name: u for u in view}
        assert [units[n].note for n in "abc"] == ["A", "B", "C"], k
        if not finalized:
            # Done before the kill: not done again.
            for name, at in before.items():
                assert units[name].finished_at == at, (k, name)
