"""A search-index build pauses while a search of its repository runs `git grep` (the index is
not complete yet), so on a small machine the search has the cores: real repositories, a
real SQLite index, real locks between threads."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pr_review_api.git import snapshot_file
from pr_review_api.git.blobs import BlobReaders
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.search_index import build as index_build
from pr_review_api.git.search_index.folder import (
    build_lock,
    current_generation,
    searching,
    yield_to_searches,
)
from pr_review_api.git.search_index.reader import SearchIndex
from pr_review_api.git.snapshots import SnapshotCache
from pr_review_api.git.store import RepositoryStore
from pr_review_api.git.tree import Snapshot
from tests.gitrepo import GitRepo


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    made = tmp_path / "index"
    made.mkdir()
    return made


def yielded(folder: Path, most: float, stop: threading.Event | None = None) -> float:
    started = time.monotonic()
    yield_to_searches(folder, stop or threading.Event(), most)
    return time.monotonic() - started


def test_a_build_goes_on_at_once_when_nothing_searches(folder: Path) -> None:
    assert yielded(folder, 60.0) < 30.0  # a build that waited would wait the whole 60 s


def test_a_build_waits_for_a_search_to_end(folder: Path) -> None:
    ended = threading.Event()

    def search() -> None:
        with searching(folder):
            time.sleep(0.5)
        ended.set()

    with searching(folder):  # held before the thread starts: the build surely meets a search
        thread = threading.Thread(target=search)
        thread.start()
        time.sleep(0.1)
    waited = yielded(folder, 60.0)
    thread.join()
    assert ended.is_set()
    assert 0.3 <= waited < 30.0  # it waited, and went on when the search ended, not at 60 s


def test_a_stream_of_searches_pauses_a_build_only_so_long(folder: Path) -> None:
    with searching(folder):
        assert 0.3 <= yielded(folder, 0.4) < 10.0  # a bound on the 0.4 s the test sets


def test_a_closing_build_does_not_wait(folder: Path) -> None:
    stop = threading.Event()
    stop.set()
    with searching(folder):
        assert yielded(folder, 60.0, stop) < 30.0  # not the 60 s it may wait when not closing


def test_searches_share_the_lock(folder: Path) -> None:
    with searching(folder), searching(folder):
        assert yielded(folder, 0.2) >= 0.2


def test_a_search_makes_the_folder_its_new_build_has_not_made_yet(tmp_path: Path) -> None:
    with searching(tmp_path / "new" / "index"):
        assert yielded(tmp_path / "new" / "index", 0.2) >= 0.2


def forty_files(tmp_path: Path) -> tuple[GitRepo, str, str]:
    repo = GitRepo(tmp_path / "repo")
    base = repo.commit_files({f"f{n}.txt": f"text {n}\n" * 50 for n in range(40)}, "base")
    return repo, base, repo.commit_files({"f0.txt": "changed\n"}, "head")


def wait_for_build(store: RepositoryStore, git_dir: Path) -> None:
    """Until the store's build of the repository's index has started (opening its head
    starts it on another thread)."""
    deadline = time.monotonic() + 10
    while not store.indexes.building(git_dir) and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_build_writes_nothing_while_a_search_runs_git_grep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, base, head = forty_files(tmp_path)
    monkeypatch.setattr(index_build, "YIELD_SECONDS", 30.0)
    with RepositoryStore(cache_dir=tmp_path / "cache") as store:
        store.indexes.min_bytes = store.indexes.inline_bytes = 0
        store.indexes.prepare_delay = 0  # opening the head starts its build
        folder = store.index_dir(repo.git_dir)
        assert folder is not None
        folder.mkdir(parents=True)
        with searching(folder):
            pinned = PinnedRepository.open(repo.git_dir, base, head, store=store)
            wait_for_build(store, repo.git_dir)
            time.sleep(0.5)
            assert store.indexes.building(repo.git_dir)  # paused, not done
            index = SearchIndex(current_generation(folder))
            assert index.stored_ids() == {}
            index.close()
        store.indexes.wait(repo.git_dir, 30)
        assert store.indexes.complete_index(repo.git_dir, pinned.snapshot, head) is not None


def test_a_search_by_git_grep_holds_the_lock_while_it_streams(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    base = repo.commit_files({"a.txt": "needle\n" * 3}, "base")
    head = repo.commit_files({"b.txt": "needle\n"}, "head")
    with RepositoryStore(cache_dir=tmp_path / "cache") as store:
        store.indexes.min_bytes = store.indexes.inline_bytes = 0  # indexed, by a build
        pinned = PinnedRepository.open(repo.git_dir, base, head, store=store)
        folder = store.index_dir(repo.git_dir)
        assert folder is not None
        folder.mkdir(parents=True, exist_ok=True)
        with build_lock(folder):  # another process builds: this search is git grep
            hits = pinned.grep("needle", "")
            assert next(hits).path == "a.txt"
            assert yielded(folder, 0.2) >= 0.2
            del hits  # a search dropped early (its cap is full) is closed with its generator
            assert yielded(folder, 60.0) < 30.0  # the lock was let go, not waited out


def test_a_repository_too_small_to_index_gets_no_lock_file(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    base = repo.commit_files({"a.txt": "needle\n"}, "base")
    head = repo.commit_files({"b.txt": "needle\n"}, "head")
    with RepositoryStore(cache_dir=tmp_path / "cache") as store:
        pinned = PinnedRepository.open(repo.git_dir, base, head, store=store)
        folder = store.index_dir(repo.git_dir)
        assert folder is not None
        folder.mkdir(parents=True, exist_ok=True)
        assert [hit.path for hit in pinned.grep("needle", "")] == ["a.txt", "b.txt"]
        assert list(folder.glob("*.lock")) == []


def test_a_snapshot_save_waits_for_a_search_and_a_closing_store_saves_at_once(
    tmp_path: Path,
) -> None:
    repo = GitRepo(tmp_path / "repo")
    head = repo.commit_files({"a.txt": "a\n"}, "base")
    folder = tmp_path / "index"
    cache = SnapshotCache(4, BlobReaders().source, lambda _: folder, save_delay=0)
    with searching(folder):
        cache.get(repo.git_dir, head)  # a full load: saved as soon as no search runs
        time.sleep(0.5)
        assert snapshot_file.saved_head(folder) is None
    cache.wait_for_saves(10)
    assert snapshot_file.saved_head(folder) == head
    other = repo.commit_files({"b.txt": "b\n"}, "head")
    closing = SnapshotCache(4, BlobReaders().source, lambda _: folder, save_delay=0)
    with searching(folder):
        closing.get(repo.git_dir, other)
        closing.flush()  # as RepositoryStore.close does: the save no longer waits
        closing.wait_for_saves(5)
        assert snapshot_file.saved_head(folder) == other


def test_while_a_build_of_the_head_runs_a_search_does_not_check_the_index_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, base, head = forty_files(tmp_path)
    monkeypatch.setattr(index_build, "YIELD_SECONDS", 30.0)
    checks: list[Snapshot] = []
    missing_blobs = SearchIndex.missing_blobs

    def counted(index: SearchIndex, snapshot: Snapshot) -> list[tuple[str, int]]:
        checks.append(snapshot)
        return missing_blobs(index, snapshot)

    monkeypatch.setattr(SearchIndex, "missing_blobs", counted)
    with RepositoryStore(cache_dir=tmp_path / "cache") as store:
        store.indexes.min_bytes = store.indexes.inline_bytes = 0
        store.indexes.prepare_delay = 0  # opening the head starts its build
        folder = store.index_dir(repo.git_dir)
        assert folder is not None
        with searching(folder):  # the build starts and pauses
            pinned = PinnedRepository.open(repo.git_dir, base, head, store=store)
            wait_for_build(store, repo.git_dir)
            assert len(checks) == 1
            for _ in range(3):  # a search's, each
                assert store.indexes.complete_index(repo.git_dir, pinned.snapshot, head) is None
            assert len(checks) == 1
        store.indexes.wait(repo.git_dir, 30)
        assert store.indexes.complete_index(repo.git_dir, pinned.snapshot, head) is not None
        assert len(checks) == 1  # the build marked the head complete: nothing to check
