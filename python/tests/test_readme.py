"""The README's "From Python" block, run as written (its recordings path made this machine's)."""

import pathlib
import re

from conftest import ROOT


def test_the_readme_python_block_runs(reference, capsys, monkeypatch):
    text = (ROOT / "README.md").read_text()
    section = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(ROOT)
    exec(compile(block.replace("../shared/reference", str(reference)), "README.md", "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert re.fullmatch(r"0x[0-9a-f]{1,4} -?\d+/\d+ \d+", lines[0]), lines[0]
    assert re.fullmatch(r"\d+ of 1048576", lines[1]), lines[1]
    assert lines[2] == "0"
