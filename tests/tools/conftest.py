"""Fixtures of the tool tests: one hostile repository for the package, a small widget."""

from __future__ import annotations

from pathlib import Path

import pytest

from pr_review_api.git.repository import PinnedRepository
from tests.gitrepo import GitRepo
from tests.hostile.world import (
    HostileWorld,
    build_hostile_world,
)
from tests.tools.git_failures import BASE_FILES, HEAD_FILES


@pytest.fixture(scope="package")
def world(tmp_path_factory: pytest.TempPathFactory) -> HostileWorld:
    return build_hostile_world(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="package")
def pinned(world: HostileWorld) -> PinnedRepository:
    return world.pinned()


@pytest.fixture(scope="session")
def widget_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitRepo, str, str]:
    """Built once a session (a worker): each test gets a copy of its own."""
    repo = GitRepo(tmp_path_factory.mktemp("tools-widget") / "widget")
    base = repo.commit_files(BASE_FILES)
    head = repo.commit_files(HEAD_FILES, message="grow app.py")
    return repo, base, head


@pytest.fixture
def widget(tmp_path: Path, widget_template: tuple[GitRepo, str, str]) -> tuple[GitRepo, str, str]:
    """A base and a head whose src/app.py is 12 KB of text (read through cat-file streams)."""
    template, base, head = widget_template
    return GitRepo.copy_of(template, tmp_path / "widget"), base, head
