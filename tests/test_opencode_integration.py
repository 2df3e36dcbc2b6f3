"""Opt-in: the native tool-calling protocol against the real provider.

Runs only with OPENCODE_INTEGRATION=1 and OPENCODE_API_KEY set (and `-m integration`, or the
marker is deselected by default): `OPENCODE_INTEGRATION=1 uv run pytest -m integration`.
The offline suite never contacts a provider.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.settings import load_settings
from tests.conftest import ORIGINAL_ENVIRONMENT
from tests.gitrepo import GitRepo

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.environ.get("OPENCODE_INTEGRATION") != "1", reason="set OPENCODE_INTEGRATION=1"
    ),
]


@pytest.fixture
def real_environment(monkeypatch: pytest.MonkeyPatch) -> str:
    """The autouse fixture cleaned the environment; restore the provider settings."""
    for name, value in ORIGINAL_ENVIRONMENT.items():
        if name.startswith("OPENCODE_"):
            monkeypatch.setenv(name, value)
    key = ORIGINAL_ENVIRONMENT.get("OPENCODE_API_KEY")
    if not key:
        pytest.skip("set OPENCODE_API_KEY")
    return key


def test_real_provider_uses_native_tool_calls_then_stops(
    tmp_path: Path, real_environment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = GitRepo(tmp_path / "tiny")
    base = repo.commit_files({"app.py": "def div(a, b):\n    return a / b\n"})
    head = repo.commit_files(
        {"app.py": "def div(a, b):\n    if b == 0:\n        return 0\n    return a // b\n"}
    )
    result = asyncio.run(
        run_review(
            LocalTarget(repo.path, base, head), load_settings(), ReviewOptions(include_trace=True)
        )
    )
    assert result.trace is not None
    actions = [turn.protocol_action for turn in result.trace]
    assert "execute_tools" in actions
    assert actions[-1] == "final_review"
    assert result.trace[-1].finish_reason == "stop"
    printed = capsys.readouterr()
    for text in (printed.out, printed.err, result.model_dump_json()):
        assert real_environment not in text
        assert "Authorization" not in text
