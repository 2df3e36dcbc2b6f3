"""One embedded PostgreSQL per test session; a fresh database per test; the service and a
worker on it beside the fake GitLab, or beside the fake Gitea; and a GitLab or Gitea job
test's whole world (`gitlab`, `gitea`)."""

from __future__ import annotations

import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

with warnings.catch_warnings():  # platformdirs warns once about XDG_RUNTIME_DIR at import
    warnings.simplefilter("ignore")
    from pr_review_api.jobs.embedded import EmbeddedPostgres

from tests.fakes.gitea_reviews import GiteaWrites
from tests.fakes.gitea_server import FakeGitea
from tests.fakes.gitlab_notes import FakeNotes
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.provider_server import ScriptedProvider
from tests.jobs.gitea_service import GiteaScene, GiteaService
from tests.jobs.gitlab_service import GitLabScene, GitLabService


@pytest.fixture(scope="session")
def embedded_postgres() -> Iterator[EmbeddedPostgres]:
    # Not under pytest's basetemp: concurrent pytest sessions prune old basetemps, and the
    # server's data folder must outlive every test of this session.
    folder = Path(tempfile.mkdtemp(prefix="pr-review-pg-"))
    server = EmbeddedPostgres(folder).start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def database_url(embedded_postgres: EmbeddedPostgres) -> Iterator[str]:
    """A new, empty database on the session's server."""
    name = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(embedded_postgres.url(), autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield embedded_postgres.url(name)
    finally:
        with psycopg.connect(embedded_postgres.url(), autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def gitlab_service(database_url: str, fake_gitlab: FakeGitLab, tmp_path: Path) -> GitLabService:
    """The service and a worker on this test's database, beside the fake GitLab."""
    return GitLabService(database_url, tmp_path / "cache", fake_gitlab)


@pytest.fixture
def gitea_service(database_url: str, fake_gitea: FakeGitea, tmp_path: Path) -> GiteaService:
    """The service and a worker on this test's database, beside the fake Gitea."""
    return GiteaService(database_url, tmp_path / "cache", fake_gitea)


@pytest.fixture
def gitea(
    fake_gitea: FakeGitea,
    fake_gitea_writes: GiteaWrites,
    scripted_provider: ScriptedProvider,
    gitea_service: GiteaService,
) -> GiteaScene:
    """A Gitea comment or webhook job test's world: the pull request #3 and the service's
    settings, with a writer and a reader known."""
    return GiteaScene.make(fake_gitea, fake_gitea_writes, scripted_provider, gitea_service)


@pytest.fixture
def gitlab(
    fake_gitlab: FakeGitLab,
    fake_gitlab_notes: FakeNotes,
    scripted_provider: ScriptedProvider,
    gitlab_service: GitLabService,
) -> GitLabScene:
    """A GitLab comment or webhook job test's world: the fake with its notes, and the service's
    settings of a review by the scripted provider."""
    return GitLabScene.make(fake_gitlab, fake_gitlab_notes, scripted_provider, gitlab_service)
