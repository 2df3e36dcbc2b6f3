"""Fixtures for the command-line tests."""

from __future__ import annotations

import pytest

from tests.conftest import PROVIDER_KEY
from tests.environment import Environment
from tests.gitrepo import GitRepo


@pytest.fixture
def widget(repo: GitRepo) -> tuple[GitRepo, str, str]:
    base = repo.commit_files({"src/service.py": "def save(x):\n    store(x)\n"})
    head = repo.commit_files({"src/service.py": "def save(x):\n    store(x)\n    validate(x)\n"})
    return repo, base, head


@pytest.fixture
def with_key(environment: Environment) -> None:
    environment(OPENCODE_API_KEY=PROVIDER_KEY)
