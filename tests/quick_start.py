"""The README's quick start, read as a reader reads it: the commands of its console blocks."""

from __future__ import annotations

import re

SECTION = "## Quick start"
_CONSOLE_BLOCK = re.compile(r"^```console\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)


def quick_start_commands(readme: str) -> list[str]:
    """The one-line commands of the quick start's console blocks, in order."""
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    section = readme[start : end if end != -1 else len(readme)]
    commands = []
    for block in _CONSOLE_BLOCK.finditer(section):
        lines = [line for line in block["body"].splitlines() if line.strip()]
        assert len(lines) == 1, f"a quick-start block holds one command: {lines}"
        commands.append(lines[0])
    return commands
