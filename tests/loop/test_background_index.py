"""A one-shot review hands its unfinished search-index build to a process of its own
(loop/background_index.py): real git repositories, the real detached process, a real index.

Each test holds the repository's build lock while the review's own store runs, so that store's
build cannot finish (as a 3-second process's cannot on a kernel-sized tree) and the hand-off
is certain to have something to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.search_index.folder import build_lock, current_generation
from pr_review_api.git.search_index.reader import SearchIndex
from pr_review_api.git.store import RepositoryStore
from pr_review_api.llm.testing import ScriptedModel, stop_turn, tool_turn
from pr_review_api.llm.turn import Turn
from pr_review_api.loop import background_index
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import LocalTarget, repository_store
from pr_review_api.settings import Settings, load_settings
from tests.conftest import PROVIDER_KEY
from tests.gitrepo import GitRepo

FINAL = {"summary": "Looked.", "findings": [], "notes": []}


@pytest.fixture
def widget(tmp_path: Path) -> tuple[GitRepo, str, str]:
    repo = GitRepo(tmp_path / "widget")
    files = {f"src/m{n}.py": f"def f{n}():\n    return {n}\n" * 20 for n in range(30)}
    base = repo.commit_files(files, "base")
    head = repo.commit_files({"src/m0.py": "def needle():\n    return 0\n"}, "head")
    return repo, base, head


def settings(cache: Path, **overrides: object) -> Settings:
    return load_settings(opencode_api_key=PROVIDER_KEY, pr_review_cache_dir=cache, **overrides)


def indexed_store(values: Settings) -> RepositoryStore:
    """The review's store, indexing every repository however small, and only in a build."""
    store = repository_store(values)
    store.indexes.min_bytes = 0
    store.indexes.inline_bytes = 0
    store.indexes.prepare_delay = 0
    return store


@contextlib.contextmanager
def build_held(store: RepositoryStore, git_dir: Path) -> Iterator[Path]:
    """Hold the repository's build lock, as another process's build would."""
    folder = store.index_dir(git_dir)
    assert folder is not None
    folder.mkdir(parents=True, exist_ok=True)
    with build_lock(folder) as mine:
        assert mine
        yield folder


def wait_for_head(folder: Path, head: str, timeout: float = 60.0) -> bool:
    """Whether the index in `folder` notes `head` complete within `timeout`, and its build
    lock is free (the background process is done with it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            index = SearchIndex(current_generation(folder))
            try:
                noted = index.is_marked_complete(head)
            finally:
                index.close()
            with build_lock(folder) as free:
                if noted and free:
                    return True
        time.sleep(0.1)
    return False


def test_unfinished_names_a_head_until_its_build_completes(
    widget: tuple[GitRepo, str, str], tmp_path: Path
) -> None:
    repo, base, head = widget
    with indexed_store(settings(tmp_path / "cache")) as store:
        with build_held(store, repo.git_dir):
            pinned = PinnedRepository.open(repo.git_dir, base, head, store=store)
            assert store.indexes.complete_index(repo.git_dir, pinned.snapshot, head) is None
            store.indexes.wait(repo.git_dir, 30)  # its build found the lock held: gave up
            assert store.indexes.incomplete_heads() == [(repo.git_dir, head)]
        assert store.indexes.complete_index(repo.git_dir, pinned.snapshot, head) is None
        store.indexes.wait(repo.git_dir, 30)
        assert store.indexes.complete_index(repo.git_dir, pinned.snapshot, head) is not None
        assert store.indexes.incomplete_heads() == []


def test_a_small_repository_leaves_nothing_unfinished(
    widget: tuple[GitRepo, str, str], tmp_path: Path
) -> None:
    repo, base, head = widget
    with repository_store(settings(tmp_path / "cache")) as store:
        pinned = PinnedRepository.open(repo.git_dir, base, head, store=store)
        assert store.indexes.complete_index(repo.git_dir, pinned.snapshot, head) is None  # git grep
        assert store.indexes.incomplete_heads() == []
    assert background_index.hand_off(settings(tmp_path / "cache"), store) == []


def test_the_background_process_completes_the_index(
    widget: tuple[GitRepo, str, str], tmp_path: Path
) -> None:
    repo, base, head = widget
    values = settings(tmp_path / "cache")
    store = indexed_store(values)
    with build_held(store, repo.git_dir) as folder:
        pinned = PinnedRepository.open(repo.git_dir, base, head, store=store)
        store.indexes.complete_index(repo.git_dir, pinned.snapshot, head)
        store.indexes.wait(repo.git_dir, 30)
        store.close()
        started = background_index.hand_off(values, store)
        assert len(started) == 1
        assert started[0].poll() is None  # it waits for the lock this "other build" holds
    assert started[0].wait(60) == 0
    assert wait_for_head(folder, head, timeout=1)


@pytest.fixture
def one_shot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings of a one-shot review whose own store indexes every repository."""
    monkeypatch.setattr(background_index, "repository_store", indexed_store)
    return settings(tmp_path / "cache")


def search_turn() -> Turn:
    return tool_turn([("c1", "search_repository", {"query": "needle"})])


def test_a_one_shot_review_hands_its_build_off(
    widget: tuple[GitRepo, str, str], one_shot: Settings
) -> None:
    repo, base, head = widget
    values = one_shot
    model = ScriptedModel(search_turn(), stop_turn(FINAL))
    probe = indexed_store(values)
    with build_held(probe, repo.git_dir) as folder:
        result = asyncio.run(
            run_review(LocalTarget(repo.path, base, head), values, ReviewOptions(model=model))
        )
        assert result.termination_reason == "final_review"
        assert result.tool_calls == 1
    probe.close()
    assert wait_for_head(folder, head)


class StalledModel(ScriptedModel):
    """Answers its script, then waits for ever (the user interrupts the review there)."""

    def __init__(self, *items: Turn) -> None:
        super().__init__(*items)
        self.waiting = asyncio.Event()

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, deadline: float
    ) -> Turn:
        if self._queue:
            return await super().complete(messages, tools, deadline=deadline)
        self.waiting.set()
        await asyncio.sleep(3600)
        raise AssertionError("never answered")


def test_an_interrupted_review_hands_nothing_off(
    widget: tuple[GitRepo, str, str], one_shot: Settings
) -> None:
    repo, base, head = widget
    values = one_shot
    model = StalledModel(search_turn())

    async def interrupted() -> None:
        review = asyncio.create_task(
            run_review(LocalTarget(repo.path, base, head), values, ReviewOptions(model=model))
        )
        await model.waiting.wait()  # the search ran: the review's store left its build short
        review.cancel()
        with pytest.raises(asyncio.CancelledError):
            await review

    probe = indexed_store(values)
    with build_held(probe, repo.git_dir) as folder:
        asyncio.run(interrupted())
    probe.close()
    assert not wait_for_head(folder, head, timeout=3)


def test_the_hand_off_can_be_turned_off(widget: tuple[GitRepo, str, str], tmp_path: Path) -> None:
    repo, base, head = widget
    values = settings(tmp_path / "cache", pr_review_background_index=False)
    store = indexed_store(values)
    with build_held(store, repo.git_dir):
        pinned = PinnedRepository.open(repo.git_dir, base, head, store=store)
        store.indexes.complete_index(repo.git_dir, pinned.snapshot, head)
        store.indexes.wait(repo.git_dir, 30)
        store.close()
        assert store.indexes.incomplete_heads() == [(repo.git_dir, head)]
        assert background_index.hand_off(values, store) == []


def test_the_process_gets_no_secret_and_no_working_directory_env_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-TOKEN-SECRET")
    monkeypatch.setenv("PR_REVIEW_API_KEYS", "service-SECRET")
    values = settings(tmp_path / "cache", pr_review_cache_max_bytes=128 * 1024**2)
    environment = background_index._environment(values)
    assert not any("SECRET" in value for value in environment.values())
    assert "OPENCODE_API_KEY" not in environment
    assert environment["PR_REVIEW_CACHE_DIR"] == str(tmp_path / "cache")
    assert environment["PR_REVIEW_CACHE_MAX_BYTES"] == str(128 * 1024**2)
    assert environment["PR_REVIEW_BACKGROUND_INDEX"] == "false"


@pytest.mark.parametrize(
    "argv",
    [[], ["repo"], ["repo", "not-a-sha", "0"], ["repo", "a" * 40, "-1"], ["repo", "a" * 40]],
)
def test_the_process_refuses_bad_arguments(argv: list[str]) -> None:
    assert background_index.main(argv) == 2


def test_the_process_ends_quietly_when_the_repository_is_gone(tmp_path: Path) -> None:
    (tmp_path / "cache").mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PR_REVIEW_CACHE_DIR", str(tmp_path / "cache"))
        assert background_index.main([str(tmp_path / "missing"), "a" * 40, "0"]) == 1
