"""Fixtures for the review-loop tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.loop.support import SERVICE


@pytest.fixture(scope="session")
def widget_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitRepo, str, str]:
    """Built once a session (a worker): each test reviews a copy of its own."""
    repo = GitRepo(tmp_path_factory.mktemp("loop-widget") / "widget")
    base = repo.commit_files({"src/widgets/service.py": "old\n", "README.md": "# widget\n"})
    head = repo.commit_files({"src/widgets/service.py": SERVICE}, message="rewrite")
    return repo, base, head


@pytest.fixture
def widget(tmp_path: Path, widget_template: tuple[GitRepo, str, str]) -> tuple[GitRepo, str, str]:
    template, base, head = widget_template
    return GitRepo.copy_of(template, tmp_path / "widget"), base, head
