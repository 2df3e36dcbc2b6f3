"""The README's copy of the help texts and settings, kept in step with the command line."""

from __future__ import annotations

import os
from pathlib import Path

from tests.cli.support import run

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
HELP_BEGIN = "<!-- BEGIN GENERATED HELP: regenerate with "
HELP_END = "<!-- END GENERATED HELP -->"
REGENERATE = "UPDATE_README_HELP=1 uv run pytest tests/cli/test_help_in_readme.py"
HELP_COMMANDS: list[list[str]] = [[], ["review"], ["serve"], ["schema"]]


# --- the README's copy of the help ------------------------------------------------------------


def generated_help() -> str:
    """The README's help section, as the commands print it today."""
    blocks = []
    for command in HELP_COMMANDS:
        result = run(*command, "--help")
        assert result.exit_code == 0
        shown = " ".join(["pr-review", *command, "--help"])
        blocks.append(f"```console\n$ {shown}\n{result.stdout}```")
    return f"{HELP_BEGIN}`{REGENERATE}` -->\n\n" + "\n\n".join(blocks) + f"\n\n{HELP_END}"


def test_readme_shows_the_current_help_texts() -> None:
    text = README.read_text(encoding="utf-8")
    start = text.index(HELP_BEGIN)
    end = text.index(HELP_END) + len(HELP_END)
    expected = generated_help()
    if os.environ.get("UPDATE_README_HELP") == "1":
        README.write_text(text[:start] + expected + text[end:], encoding="utf-8")
        return
    assert text[start:end] == expected, f"README.md's help is stale: run `{REGENERATE}`"


def test_readme_has_the_two_fresh_machine_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert (
        "python -m pip install uv && uv run --no-dev --locked pr-review review "
        "https://github.com/OWNER/REPO/pull/N" in text
    )
    assert "python -m pip install uv && uv run pytest" in text


def test_readme_configuration_table_names_every_setting() -> None:
    text = README.read_text(encoding="utf-8")
    for name in (
        "OPENCODE_API_KEY",
        "OPENCODE_BASE_URL",
        "OPENCODE_MODEL",
        "GITHUB_TOKEN",
        "GITHUB_SERVER_URL",
        "GITHUB_API_URL",
        "REVIEW_MAX_ROUNDS",
        "REVIEW_MAX_TOOL_CALLS",
        "REVIEW_MAX_TOOL_CALLS_PER_ROUND",
        "REVIEW_TIMEOUT_SECONDS",
        "PR_REVIEW_CACHE_DIR",
        "PR_REVIEW_API_KEYS",
        "PR_REVIEW_MAX_CONCURRENT_REVIEWS",
    ):
        assert f"| `{name}` |" in text, name
