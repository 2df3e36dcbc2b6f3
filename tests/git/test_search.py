"""git/search.py: a head stored in part in its index (another process's build under way) is
searched through the part stored and git for the rest, and finds what `git grep` finds, each
match once; below the share that pays, `git grep` answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.git import search
from pr_review_api.git.blobs import ask_once
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.search_index import folder as index_folder
from pr_review_api.git.search_index import schedule
from pr_review_api.git.search_index.schema import open_writer, write_blobs
from pr_review_api.git.store import RepositoryStore
from pr_review_api.tools import SearchArguments, execute_tool
from tests.hostile.world import HostileWorld, build_hostile_world

QUERIES = ["needle", "needle exact", "café", "😀", ".*[", "Needle", "ne", "x", "unspellable"]
PATHS = ["", "src", "src/app.py", "text", "links/to_src", "many", "big", "bin"]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> HostileWorld:
    return build_hostile_world(tmp_path_factory.mktemp("partial-hostile"))


def _search(pinned: PinnedRepository, query: str, path: str) -> dict[str, Any]:
    arguments = SearchArguments(query=query, path=path, limit=100)
    return execute_tool(pinned, "search_repository", arguments).result


@pytest.fixture(scope="module")
def git_grep_answers(world: HostileWorld) -> dict[tuple[str, str], dict[str, Any]]:
    """What a store with no index (every search `git grep`) answers to each case."""
    pinned = PinnedRepository.open(world.repo.git_dir, world.base, world.head)
    return {(query, path): _search(pinned, query, path) for query in QUERIES for path in PATHS}


def _partly_indexed(
    world: HostileWorld, cache: Path, share: int, *, large: bool = True
) -> Iterator[PinnedRepository]:
    """The world's head in a store whose index holds every `share`-th of the head's search
    blobs in path order (and, with `large`, every one over 64 KiB), while another builder
    holds the build lock (so this process adds nothing: as while another process's build
    is under way)."""
    store = RepositoryStore(cache_dir=cache)
    store.indexes.min_bytes, store.indexes.inline_bytes, store.indexes.prepare_delay = 0, 0, 0
    git_dir = world.repo.git_dir
    folder = store.index_dir(git_dir)
    assert folder is not None
    folder.mkdir(parents=True, exist_ok=True)
    with index_folder.build_lock(folder) as mine:
        assert mine
        snapshot = store.snapshot(git_dir, world.head)
        blobs = list(dict(snapshot.search_blobs()).items())
        chosen = {oid for n, (oid, _) in enumerate(blobs) if n % share == 0}
        chosen |= {oid for oid, size in blobs if large and size > 64 * 1024}
        contents = ask_once(git_dir, sorted(chosen), contents=True)
        connection = open_writer(index_folder.current_generation(folder))
        write_blobs(connection, [(oid, data) for oid, (_, _, data) in contents.items()])
        connection.close()
        pinned = PinnedRepository.open(git_dir, world.base, world.head, store=store)
        store.indexes.wait(git_dir)
        yield pinned
    store.close()


@pytest.fixture
def grep_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The queries `git grep` ran for (counted, then run as ever)."""
    runs: list[str] = []
    real = search.git_grep

    def counted(git_dir: Path, head_sha: str, query: str, pathspec: str) -> Iterator[Any]:
        runs.append(query)
        return real(git_dir, head_sha, query, pathspec)

    monkeypatch.setattr(search, "git_grep", counted)
    return runs


@pytest.mark.parametrize("share", [2, 3])
def test_a_partly_built_index_and_git_find_what_git_grep_finds_once_each(
    world: HostileWorld,
    tmp_path: Path,
    git_grep_answers: dict[tuple[str, str], dict[str, Any]],
    grep_runs: list[str],
    monkeypatch: pytest.MonkeyPatch,
    share: int,
) -> None:
    monkeypatch.setattr(schedule, "PARTIAL_MIN_SHARE", 0.0)  # any part: every path is tried
    for pinned in _partly_indexed(world, tmp_path / "cache", share):
        partial = pinned._store.indexes.partial_index(pinned.git_dir, pinned.snapshot)
        assert partial is not None
        head_blobs = dict(pinned.snapshot.search_blobs())
        assert 0 < len(partial.stored) < len(head_blobs)  # stored in part: not complete
        assert pinned._search_index() is None
        found = 0
        for (query, path), expected in git_grep_answers.items():
            answer = _search(pinned, query, path)
            assert answer == expected, (query, path)
            hits = [(hit["path"], hit["line"]) for hit in answer["matches"]]
            assert len(hits) == len(set(hits))
            found += len(hits)
        assert found > 100
    assert grep_runs == []  # every answer came from the index and git's objects


def test_too_small_a_part_leaves_the_search_to_git_grep(
    world: HostileWorld, tmp_path: Path, grep_runs: list[str]
) -> None:
    # The defaults: the part stored (one small file) is under half the head's text, so
    # `git grep` over the whole tree is the faster.
    for pinned in _partly_indexed(world, tmp_path / "cache", 1000, large=False):
        assert pinned._store.indexes.partial_index(pinned.git_dir, pinned.snapshot) is None
        _search(pinned, "needle", "")
    assert grep_runs == ["needle"]
