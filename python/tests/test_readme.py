"""README's Python example runs as printed."""

import re

from conftest import REPO


def test_readme_example_runs(tmp_path, monkeypatch, capsys):
    text = (REPO / "README.md").read_text()
    section = text[text.index("\n## Python\n"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.setenv("RUNLOG_DIR", str(tmp_path / "root"))
    exec(compile(code, "README.md", "exec"), {})
    import runlog

    view = runlog.Runs().get("nightly")
    assert view.status().status == "done" and view.status().result == "3 units"
    assert [u.note for u in view] == ["A", "B", "C"]
    assert "Counts(" in capsys.readouterr().out
