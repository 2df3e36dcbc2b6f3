"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo

# The fakes' fixtures (`scripted_provider`, `fake_github`), for every test of the suite: a test
# asks for one by name and never imports it. tests/README.md says which fake to use when.
pytest_plugins = ["tests.fakes.provider_server", "tests.fakes.github_server"]

# Distinctive secrets: tests assert they never appear in any output, log, trace or file.
PROVIDER_KEY = "sk-test-PROVIDER-SECRET-7f3a9c"
GITHUB_TOKEN = "ghp_test-GITHUB-SECRET-41be02"

# The inner loop's tier (`uv run pytest --fast`): everything but the hostile-world suite and the
# PostgreSQL job suite, which CI and the README's command still run.
_FAST_SKIPS = ("hostile", "jobs")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="skip tests/hostile and tests/jobs (the inner loop; CI runs everything)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--fast"):
        return
    root = Path(__file__).resolve().parent
    kept: list[pytest.Item] = []
    skipped: list[pytest.Item] = []
    for item in items:
        parts = item.path.resolve().relative_to(root).parts
        (skipped if parts and parts[0] in _FAST_SKIPS else kept).append(item)
    if skipped:
        config.hook.pytest_deselected(items=skipped)
        items[:] = kept


# The developer's environment as it was, for the opt-in real-provider test only.
ORIGINAL_ENVIRONMENT = dict(os.environ)

_OUR_VARIABLES = (
    "OPENCODE_",
    "GITHUB_",
    "REVIEW_",
    "PR_REVIEW_",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No setting leaks in from the developer's shell or a .env file."""
    for name in list(os.environ):
        if name.startswith(_OUR_VARIABLES):
            monkeypatch.delenv(name)
    # Indexes and saved snapshots go to the cache: never the developer's own.
    monkeypatch.setenv("PR_REVIEW_CACHE_DIR", str(tmp_path / "pr-review-cache"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def anyio_backend() -> str:
    """`@pytest.mark.anyio` tests run on asyncio only."""
    return "asyncio"


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    """An empty repository with a working tree."""
    return GitRepo(tmp_path / "repo")
