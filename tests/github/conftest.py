"""Fixtures for the GitHub tests."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from tests.environment import Environment
from tests.fakes.github_server import FakeGitHub
from tests.github.support import Launch


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
def env(github_cli: FakeGitHub, environment: Environment) -> FakeGitHub:
    """`github_cli`, where a review posts no check run unless a test sets one."""
    environment(PR_REVIEW_CHECK_RUNS="false")
    return github_cli
