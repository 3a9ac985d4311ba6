"""Print the shell command of README.md that follows ``<!-- NAME-command -->``."""

import sys
from pathlib import Path

name = sys.argv[1]
lines = Path(__file__).resolve().parents[1].joinpath("README.md").read_text()
lines = lines.splitlines()
start = lines.index(f"<!-- {name}-command -->")
fence, command, closing = lines[start + 1 : start + 4]
if not fence.startswith("```") or closing != "```":
    sys.exit(f"README.md: the {name} command must be one line in a code fence")
print(command)
