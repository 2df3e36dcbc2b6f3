"""Fixtures for the review-loop tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.loop.support import SERVICE


@pytest.fixture
def widget(tmp_path: Path) -> tuple[GitRepo, str, str]:
    repo = GitRepo(tmp_path / "widget")
    base = repo.commit_files({"src/widgets/service.py": "old\n", "README.md": "# widget\n"})
    head = repo.commit_files({"src/widgets/service.py": SERVICE}, message="rewrite")
    return repo, base, head
