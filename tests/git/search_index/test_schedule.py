"""search_index/schedule.py: where a new head's few missing blobs go, and when the tail is
listed. Real repositories, a real store and its own preparations."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.search_index import schedule
from pr_review_api.git.search_index.build import post_tail
from pr_review_api.git.search_index.folder import current_generation
from pr_review_api.git.search_index.reader import SearchIndex
from pr_review_api.git.search_index.schema import IndexUnavailable
from pr_review_api.git.store import RepositoryStore
from tests.gitrepo import GitRepo, git


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RepositoryStore]:
    with RepositoryStore(cache_dir=tmp_path / "cache") as opened:
        opened.indexes.min_bytes = 0
        opened.indexes.prepare_delay = 0
        yield opened


def opened(store: RepositoryStore, repo: GitRepo, base: str, head: str) -> PinnedRepository:
    """A head opened, its index prepared (the store's own preparation) and complete."""
    pinned = PinnedRepository.open(repo.git_dir, base, head, store=store)
    store.indexes.wait(repo.git_dir, builds=False)
    assert pinned._search_index() is not None
    return pinned


def counts(store: RepositoryStore, repo: GitRepo) -> tuple[int, int]:
    """(segments, blobs in the tail) of the repository's index."""
    folder = store.index_dir(repo.git_dir)
    assert folder is not None
    with contextlib.closing(sqlite3.connect(current_generation(folder))) as connection:
        (segments,) = connection.execute("SELECT count(*) FROM segments").fetchone()
        (tail,) = connection.execute("SELECT count(*) FROM tail").fetchone()
    return segments, tail


def hits(pinned: PinnedRepository, literal: str) -> list[tuple[str, int]]:
    return [(hit.path, hit.line) for hit in pinned.grep(literal, "")]


def test_a_new_heads_few_changes_go_to_the_tail_until_it_holds_a_batch(
    store: RepositoryStore, repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = repo.commit_files({f"d/f{n}.txt": f"needle {n}\n" for n in range(30)})
    opened(store, repo, base, base)
    assert counts(store, repo) == (1, 0)
    head = repo.commit_files({"d/f3.txt": "needle three\n", "e/new.txt": "needle new\n"})
    derived = opened(store, repo, base, head)
    assert counts(store, repo) == (1, 2)  # no segment for two files
    assert ("d/f3.txt", 1) in hits(derived, "three")
    assert hits(derived, "needle new") == [("e/new.txt", 1)]
    # Once the tail holds a batch, a preparation lists it in one segment.
    monkeypatch.setattr(schedule, "BATCH_BLOBS", 3)
    later = repo.commit_files({"e/third.txt": "needle third\n"})
    third = opened(store, repo, base, later)
    assert counts(store, repo) == (2, 0)
    assert hits(third, "needle new") == [("e/new.txt", 1)]
    assert hits(third, "third") == [("e/third.txt", 1)]
    assert hits(derived, "three") == [("d/f3.txt", 1)]


def test_a_new_head_with_more_than_a_few_changes_is_listed_at_once(
    store: RepositoryStore, repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schedule, "TAIL_ADD_BYTES", 10)
    base = repo.commit_files({f"d/f{n}.txt": f"needle {n}\n" for n in range(30)})
    opened(store, repo, base, base)
    head = repo.commit_files({"d/f3.txt": "needle three, longer than ten bytes\n"})
    derived = opened(store, repo, base, head)
    assert counts(store, repo) == (2, 0)
    assert hits(derived, "three") == [("d/f3.txt", 1)]


def test_a_full_tail_sends_the_next_head_to_a_segment(
    store: RepositoryStore, repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tail nobody lists yet (its listing failed) does not grow past a batch."""
    monkeypatch.setattr(schedule, "post_tail", lambda *_: None)
    monkeypatch.setattr(schedule, "BATCH_BLOBS", 1)
    base = repo.commit_files({f"d/f{n}.txt": f"needle {n}\n" for n in range(30)})
    opened(store, repo, base, base)
    first = repo.commit_files({"d/f1.txt": "needle one\n"})
    opened(store, repo, base, first)
    assert counts(store, repo) == (1, 1)
    second = repo.commit_files({"d/f2.txt": "needle two\n"})
    derived = opened(store, repo, first, second)
    assert counts(store, repo) == (2, 1)
    assert hits(derived, "needle t") == [("d/f2.txt", 1)]


def test_the_tail_is_listed_from_the_index_whatever_git_has_since_pruned(
    store: RepositoryStore, repo: GitRepo, tmp_path: Path
) -> None:
    base = repo.commit_files({f"d/f{n}.txt": f"needle {n}\n" for n in range(30)})
    opened(store, repo, base, base)
    head = repo.commit_files({"d/f3.txt": "needle three\n", "e/new.txt": "needle new\n"})
    derived = opened(store, repo, base, head)
    assert counts(store, repo) == (1, 2)
    index = derived._search_index()
    assert index is not None
    empty = tmp_path / "empty.git"  # a repository holding none of the tail's blobs
    git(tmp_path, "init", "-q", "--bare", str(empty))
    closing = threading.Event()
    closing.set()
    post_tail(empty, index, closing)  # a closing store lists nothing more
    assert counts(store, repo) == (1, 2)
    post_tail(empty, index, threading.Event())
    assert counts(store, repo) == (2, 0)
    assert hits(derived, "needle new") == [("e/new.txt", 1)]
    assert hits(derived, "three") == [("d/f3.txt", 1)]


def test_a_tail_that_cannot_be_read_sends_a_new_head_to_a_segment(
    store: RepositoryStore, repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = repo.commit_files({f"d/f{n}.txt": f"needle {n}\n" for n in range(30)})
    opened(store, repo, base, base)

    def unreadable(self: SearchIndex) -> tuple[int, int]:
        raise IndexUnavailable()

    monkeypatch.setattr(SearchIndex, "tail_size", unreadable)
    head = repo.commit_files({"d/f3.txt": "needle three\n"})
    derived = opened(store, repo, base, head)
    assert counts(store, repo) == (2, 0)
    assert hits(derived, "three") == [("d/f3.txt", 1)]
