"""The docs' copy of the help texts and settings, kept in step with the command line: the help
in docs/cli.md, every setting in docs/configuration.md, the README's quick start."""

from __future__ import annotations

import os
import re
from pathlib import Path

from pr_review_api.settings import Settings
from tests.cli.support import run
from tests.quick_start import quick_start_commands

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
HELP_DOC = REPO_ROOT / "docs" / "cli.md"
CONFIGURATION_DOC = REPO_ROOT / "docs" / "configuration.md"
HELP_BEGIN = "<!-- BEGIN GENERATED HELP: regenerate with "
HELP_END = "<!-- END GENERATED HELP -->"
REGENERATE = "UPDATE_README_HELP=1 uv run pytest tests/cli/test_help_in_readme.py"
HELP_COMMANDS: list[list[str]] = [[], ["review"], ["serve"], ["schema"]]


# --- the docs' copy of the help ---------------------------------------------------------------


def generated_help() -> str:
    """The help section of docs/cli.md, as the commands print it today."""
    blocks = []
    for command in HELP_COMMANDS:
        result = run(*command, "--help")
        assert result.exit_code == 0
        shown = " ".join(["pr-review", *command, "--help"])
        blocks.append(f"```console\n$ {shown}\n{result.stdout}```")
    return f"{HELP_BEGIN}`{REGENERATE}` -->\n\n" + "\n\n".join(blocks) + f"\n\n{HELP_END}"


def test_the_docs_show_the_current_help_texts() -> None:
    text = HELP_DOC.read_text(encoding="utf-8")
    start = text.index(HELP_BEGIN)
    end = text.index(HELP_END) + len(HELP_END)
    expected = generated_help()
    if os.environ.get("UPDATE_README_HELP") == "1":
        HELP_DOC.write_text(text[:start] + expected + text[end:], encoding="utf-8")
        return
    assert text[start:end] == expected, f"docs/cli.md's help is stale: run `{REGENERATE}`"


def test_readme_quick_start_is_two_commands_one_review_and_one_test_run() -> None:
    """What tests/test_quick_start.py runs, as a reader sees it: two commands that need only
    Python 3 with venv (no pip into the system's Python: PEP 668) and git."""
    review, tests = quick_start_commands(README.read_text(encoding="utf-8"))
    assert review.endswith(" pr-review review https://github.com/OWNER/REPO/pull/N")
    assert tests.endswith(" pytest")
    for command in (review, tests):
        assert command.startswith("python3 -m venv ")
        assert "pip install" not in command.split("&&")[0]
        assert not re.search(r"(^|&& )(python3? -m )?pip3? install", command)


def test_the_configuration_doc_names_every_setting() -> None:
    text = CONFIGURATION_DOC.read_text(encoding="utf-8")
    named: set[str] = set()
    for row in text.splitlines():
        if row.startswith("| `"):
            named |= set(re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split("|")[1]))
    assert named == {name.upper() for name in Settings.model_fields}
