"""Fixtures for the GitHub tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import GITHUB_TOKEN
from tests.environment import Environment
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import ScriptedProvider
from tests.github.support import BOT, Launch


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> list[Launch]:
    """Record the argument vector and environment of every process started."""
    recorded: list[Launch] = []
    original = subprocess.Popen

    class Recording(original):  # type: ignore[valid-type, misc]
        def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
            argv = [args] if isinstance(args, (str, bytes)) else list(args)
            env = kwargs.get("env")
            recorded.append(Launch([os.fsdecode(a) for a in argv], dict(env or {})))
            super().__init__(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Recording)
    return recorded


@pytest.fixture
def env(
    fake_github: FakeGitHub,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    environment: Environment,
) -> FakeGitHub:
    """The fake GitHub, where `BOT` owns our token, and the CLI's environment pointed at it and at
    the scripted provider (one request per failure; no check run unless a test sets one)."""
    fake_github.users.setdefault(GITHUB_TOKEN, BOT)
    environment(
        scripted_provider,
        github=fake_github,
        cache=tmp_path / "cache",
        retries=0,
        timeout=30,
        PR_REVIEW_CHECK_RUNS="false",
    )
    return fake_github
