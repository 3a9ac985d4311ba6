"""The README's example runs and its kernel table matches the registry."""

import re
from pathlib import Path

from sklearn_kernelpool.kernels import KERNELS

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs(capsys):
    text = README.read_text()
    (example,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(example.strip().splitlines()) <= 10
    exec(compile(example, str(README), "exec"), {})
    assert "'bandwidth'" in capsys.readouterr().out


def test_readme_kernel_table_lists_every_kernel_and_alias():
    rows = [line for line in README.read_text().splitlines() if line.startswith("| `")]
    names = {name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    assert names == set(KERNELS)


def test_readme_gives_the_two_commands():
    text = README.read_text()
    assert "<!-- main-command -->" in text
    assert "<!-- test-command -->" in text
