"""loop/guidance.py: path instructions and instruction files reach the model from the BASE
commit only (specification §16), through a real review of a local repository and the scripted
provider.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Mapping
from pathlib import Path

from pr_review_api.loop.guidance import (
    BASE_FILES,
    MAX_INSTRUCTION_FILE_BYTES,
    instruction_text,
    repository_guidance,
)
from pr_review_api.loop.repo_config import RepoConfig, read_base_files
from pr_review_api.loop.run import run_review
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.settings import load_settings
from tests.builders import final_turn
from tests.fakes.provider_server import ScriptedProvider
from tests.gitrepo import GitRepo

CONFIG = """\
[[path_instructions]]
paths = ["migrations/**"]
instructions = "Every migration must be reversible."

[[path_instructions]]
paths = ["docs/**"]
instructions = "Never shown: no docs file changed."

[[path_instructions]]
paths = ["migrations/0002*", "app.py"]
instructions = "Check the lock order."
"""


def _guidance(
    repo: GitRepo,
    provider: ScriptedProvider,
    base: Mapping[str, str | bytes],
    head: Mapping[str, str | bytes],
) -> str | None:
    base_sha = repo.commit_files(base, "base")
    head_sha = repo.commit_files(head, "head")
    provider.script(final_turn(summary="s"))
    settings = load_settings(opencode_api_key="key", opencode_base_url=provider.base_url)
    asyncio.run(run_review(LocalTarget(repo.path, base_sha, head_sha), settings))
    message = provider.requests[0].json["messages"][1]["content"]
    assert isinstance(message, str)
    if "<repository_instructions>" not in message:
        return None
    block = message.split("<repository_instructions>\n", 1)[1].split(
        "\n</repository_instructions>"
    )[0]
    assert "<" not in block
    text = json.loads(block)
    assert isinstance(text, str)
    return text


def test_matching_path_instructions_reach_the_model_once_with_their_paths(
    repo: GitRepo, scripted_provider: ScriptedProvider
) -> None:
    text = _guidance(
        repo,
        scripted_provider,
        {".pr-review.toml": CONFIG, "app.py": "x = 1\n"},
        {"migrations/0001_a.py": "up\n", "migrations/0002_b.py": "up\n", "app.py": "x = 2\n"},
    )
    assert text is not None
    assert text.count("Every migration must be reversible.") == 1
    assert "migrations/0001_a.py, migrations/0002_b.py" in text
    assert "Never shown" not in text
    assert text.count("Check the lock order.") == 1
    assert "applying to the changed files app.py, migrations/0002_b.py" in text


def test_instruction_files_come_from_the_base_and_a_head_edit_changes_nothing(
    repo: GitRepo, scripted_provider: ScriptedProvider
) -> None:
    base = {
        "AGENTS.md": "Base agents rule.\n",
        ".github/copilot-instructions.md": "Base copilot rule.\n",
        "app.py": "x = 1\n",
    }
    head = {"AGENTS.md": "Head agents rule.\n", "CLAUDE.md": "Head claude rule.\n", "app.py": "2\n"}
    text = _guidance(repo, scripted_provider, base, head)
    assert text is not None
    assert "From AGENTS.md at the base commit:\nBase agents rule." in text
    assert "From .github/copilot-instructions.md at the base commit:\nBase copilot rule." in text
    assert "Head" not in text


def test_instruction_files_false_turns_them_off(
    repo: GitRepo, scripted_provider: ScriptedProvider
) -> None:
    base = {
        ".pr-review.toml": "instruction_files = false\n",
        "CLAUDE.md": "Base claude rule.\n",
        "app.py": "x = 1\n",
    }
    assert _guidance(repo, scripted_provider, base, {"app.py": "x = 2\n"}) is None


def _git(repo: GitRepo, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo.path, capture_output=True, check=True, text=True
    ).stdout.strip()


def test_a_link_is_not_followed_and_a_long_file_is_cut_at_16_kib(repo: GitRepo) -> None:
    repo.write({"secret.txt": "do not read\n", "CLAUDE.md": "é" * MAX_INSTRUCTION_FILE_BYTES})
    repo.symlink("AGENTS.md", "secret.txt")
    sha = repo.commit_files({"app.py": "x\n"}, "base")
    git_dir = Path(_git(repo, "rev-parse", "--absolute-git-dir"))
    files = read_base_files(git_dir, sha, BASE_FILES)
    assert instruction_text(files["AGENTS.md"]) is None
    claude = instruction_text(files["CLAUDE.md"])
    assert claude is not None
    assert claude.endswith("[cut at 16 KiB]")
    assert len(claude.removesuffix("\n[cut at 16 KiB]").encode()) <= MAX_INSTRUCTION_FILE_BYTES
    assert "\ufffd" not in claude
    assert instruction_text(files[".github/copilot-instructions.md"]) is None
    text = repository_guidance(RepoConfig(), ["app.py"], files)
    assert text is not None
    assert "do not read" not in text
