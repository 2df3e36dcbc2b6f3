"""git/search_index/: the on-disk search index that every process of a cache shares.

A search answered from the index must be the search `git grep` answers, hit for hit, on a
hostile repository. The index is shared by stores (processes) over one cache directory,
built off the critical path, survives a killed build with whole blobs only, is remade when
corrupt or grown stale, and lives where the cache's bound and eviction cover it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import zlib
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pr_review_api.git import search
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.search import MAX_QUERY_GRAMS, matching_lines, trigram_query
from pr_review_api.git.search_index import build as index_build
from pr_review_api.git.search_index import folder as index_folder
from pr_review_api.git.search_index import schedule as index_schedule
from pr_review_api.git.search_index.folder import build_lock
from pr_review_api.git.search_index.reader import SearchIndex
from pr_review_api.git.search_index.schema import PreparedBlobs, write_blobs
from pr_review_api.git.store import RepositoryStore
from pr_review_api.git.tree import Snapshot, load_snapshot
from pr_review_api.loop.workspace import repository_store
from pr_review_api.settings import Settings
from pr_review_api.tools import SearchArguments, execute_tool, search_repository
from tests.conftest import examples
from tests.gitrepo import FILE, GitRepo, git
from tests.hostile.world import REGULAR_FILES, HostileWorld, build_hostile_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> HostileWorld:
    return build_hostile_world(tmp_path_factory.mktemp("hostile"))


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def indexed_store(cache: Path) -> RepositoryStore:
    """A store over `cache` that indexes every repository, however small."""
    store = RepositoryStore(cache_dir=cache)
    store.indexes.min_bytes = 0
    store.indexes.prepare_delay = 0
    return store


@pytest.fixture
def store(cache: Path) -> Iterator[RepositoryStore]:
    with indexed_store(cache) as fresh:
        yield fresh


def pin(store: RepositoryStore, git_dir: Path, base: str, head: str) -> PinnedRepository:
    """Open a head, and let the store's own preparation of its index (started by opening it)
    finish first, so that what a test does next does not race it."""
    pinned = PinnedRepository.open(git_dir, base, head, store=store)
    store.indexes.wait(git_dir, builds=False)
    return pinned


def index_path(store: RepositoryStore, git_dir: Path) -> Path:
    folder = store.index_dir(git_dir)
    assert folder is not None
    return index_folder.current_generation(folder)


def eventually_ready(store: RepositoryStore, pinned: PinnedRepository) -> SearchIndex:
    """The head's index once the builds under way have made it (a search meanwhile may see
    none, and answers with git grep)."""
    deadline = time.monotonic() + 20
    while (index := pinned._search_index()) is None and time.monotonic() < deadline:
        store.indexes.wait(pinned.git_dir)
        time.sleep(0.05)
    assert index is not None
    return index


@pytest.fixture
def held_builds(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Background builds wait for this event before they read a blob, so a test can see the
    state before a build has done anything, however fast the machine."""
    release = threading.Event()
    real_batches = index_build.prepared_batches

    def held(
        git_dir: Path, oids: list[str], stored_in: Path | None = None
    ) -> Iterator[PreparedBlobs]:
        release.wait(30)
        yield from real_batches(git_dir, oids, stored_in)

    monkeypatch.setattr(index_build, "prepared_batches", held)
    return release


def both_ways(
    store: RepositoryStore, pinned: PinnedRepository, arguments: SearchArguments
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tool's answer from the index, and from git grep."""
    return from_the_index(pinned, arguments), from_git_grep(store, pinned, arguments)


def from_the_index(pinned: PinnedRepository, arguments: SearchArguments) -> dict[str, Any]:
    assert pinned._search_index() is not None
    return execute_tool(pinned, "search_repository", arguments).result


def from_git_grep(
    store: RepositoryStore, pinned: PinnedRepository, arguments: SearchArguments
) -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store.indexes, "complete_index", lambda *_: None)  # as for an unindexed head
        patch.setattr(store.indexes, "partial_index", lambda *_: None)  # and none in part
        assert pinned._search_index() is None
        return execute_tool(pinned, "search_repository", arguments).result


QUERIES = [
    "needle",
    "validate_name",
    "needle exact",
    "café",
    "😀",
    '"\\\x01',
    '"" AND "x',
    ".*[",
    "--output=x",
    "Needle",
    "y" * 300,
    "two needle",
    "last",
    "LOOKALIKE-MARKER",
    "unspellable",
    "OUTSIDE-SENTINEL",
    "ne",
    "x",
]
PATHS = ["", "src", "src/app.py", "text", "links/to_src", "links/to_app", "many", "big", "bin"]


@pytest.fixture(scope="module")
def world_indexed(
    world: HostileWorld, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RepositoryStore, PinnedRepository]]:
    """The hostile world's head opened and indexed once for the 486 query, path and probe
    cases below: a search reads the index and never writes it, and PROBE_FILES is read at
    each search, so the cases share one build instead of making one each."""
    with indexed_store(tmp_path_factory.mktemp("indexed") / "cache") as store:
        yield store, pin(store, world.repo.git_dir, world.base, world.head)


@pytest.fixture(scope="module")
def git_grep_answers() -> dict[tuple[str, str], dict[str, Any]]:
    """git grep's answer to each query and path below, asked once for the three probe
    settings: only a search of the index reads PROBE_FILES (search.grep_index)."""
    return {}


@pytest.mark.parametrize("probe", [0, 5, search.PROBE_FILES])  # index at once, later
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("query", QUERIES)
def test_index_search_equals_git_grep_search(
    world_indexed: tuple[RepositoryStore, PinnedRepository],
    git_grep_answers: dict[tuple[str, str], dict[str, Any]],
    *,
    query: str,
    path: str,
    probe: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    arguments = SearchArguments(query=query, path=path, limit=100)
    store, pinned = world_indexed
    if (query, path) not in git_grep_answers:
        git_grep_answers[query, path] = from_git_grep(store, pinned, arguments)
    monkeypatch.setattr(search, "PROBE_FILES", probe)
    assert from_the_index(pinned, arguments) == git_grep_answers[query, path]


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    text=st.sampled_from(sorted(REGULAR_FILES.values())),
    start=st.integers(min_value=0, max_value=60),
    length=st.integers(min_value=1, max_value=40),
    limit=st.integers(min_value=1, max_value=100),
)
def test_index_search_equals_git_grep_on_any_substring(
    store: RepositoryStore, world: HostileWorld, *, text: str, start: int, length: int, limit: int
) -> None:
    query = text[start : start + length]
    if not query:
        return
    pinned = pin(store, world.repo.git_dir, world.base, world.head)
    from_index, from_git = both_ways(store, pinned, SearchArguments(query=query, limit=limit))
    assert from_index == from_git


def test_index_search_numbers_lines_and_ends_as_git_does(
    store: RepositoryStore, repo: GitRepo
) -> None:
    base = repo.commit_files({"base.txt": "base\n"})
    head = repo.commit_tree(
        {
            "a.txt": (FILE, b"x\nhit one\n\nhit two hit\r\nno\nhit last"),
            "b.txt": (FILE, b"hit\n" * 3),
            "late_nul.txt": (FILE, b"hit\n" * 5000 + b"\x00"),
            "latin1.txt": (FILE, b"caf\xe9 hit\n"),
        },
        parent=base,
    )
    pinned = pin(store, repo.git_dir, base, head)
    from_index, from_git = both_ways(store, pinned, SearchArguments(query="hit", limit=100))
    assert from_index == from_git
    assert [(m["path"], m["line"]) for m in from_index["matches"]] == [
        ("a.txt", 2),
        ("a.txt", 4),
        ("a.txt", 6),
        ("b.txt", 1),
        ("b.txt", 2),
        ("b.txt", 3),
    ]  # latin1.txt is not UTF-8: the tool shows no line of it, either way


def test_the_trigram_query_narrows_and_never_excludes(store: RepositoryStore) -> None:
    assert trigram_query(b"ab") is None
    assert trigram_query(b'a"b') == [0x612262]  # three bytes, one 24-bit number
    assert trigram_query(b"abab") == [0x616261, 0x626162]
    long = bytes(range(33, 127))
    grams = trigram_query(long)
    assert grams is not None
    assert len(grams) == MAX_QUERY_GRAMS
    assert grams[0] == 0x212223  # the first trigram, "!\"#"
    assert grams[-1] == 0x7C7D7E  # and the last, "|}~"
    text = b"alpha\nbeta gamma\n\nbeta"
    assert list(matching_lines(text, b"beta")) == [(2, b"beta gamma"), (4, b"beta")]


def test_a_new_head_only_adds_its_new_blobs(store: RepositoryStore, repo: GitRepo) -> None:
    base = repo.commit_files({f"f{n}.txt": f"needle {n}\n" for n in range(50)})
    head = repo.commit_files({"f1.txt": "needle changed\n", "new.txt": "needle new\n"})
    first = pin(store, repo.git_dir, base, base)
    index = first._search_index()
    assert index is not None
    assert len(index.stored_ids()) == 50
    second = pin(store, repo.git_dir, base, head)
    assert second._search_index() is index
    assert len(index.stored_ids()) == 52
    hits = search_repository(second, SearchArguments(query="needle", limit=100))["matches"]
    assert {"path": "f1.txt", "line": 1, "excerpt": "needle changed"} in hits
    assert {"path": "new.txt", "line": 1, "excerpt": "needle new"} in hits
    assert {"path": "f1.txt", "line": 1, "excerpt": "needle 1"} not in hits


@pytest.fixture
def tree_walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One item for each walk over a whole tree's searchable blobs (Snapshot.search_blobs)."""
    walks: list[int] = []
    real_walk = Snapshot.search_blobs

    def counting(self: Snapshot) -> Iterator[tuple[str, int]]:
        walks.append(1)
        return real_walk(self)

    monkeypatch.setattr(Snapshot, "search_blobs", counting)
    return walks


def test_a_new_process_uses_a_head_marked_complete_without_weighing_the_head(
    cache: Path, repo: GitRepo, tree_walks: list[int]
) -> None:
    base = repo.commit_files({f"d/f{n}.txt": f"needle {n}\n" for n in range(40)})
    with indexed_store(cache) as first:
        assert pin(first, repo.git_dir, base, base)._search_index() is not None
    assert tree_walks  # the first process weighed the head and checked it: the count counts
    tree_walks.clear()
    with indexed_store(cache) as later:  # a new process
        pinned = pin(later, repo.git_dir, base, base)
        assert pinned._search_index() is not None
        assert len(list(pinned.grep("needle", ""))) == 40
    assert tree_walks == []


def test_a_derived_head_is_checked_by_its_changes_alone(
    store: RepositoryStore, repo: GitRepo, tree_walks: list[int]
) -> None:
    base = repo.commit_files({f"d/f{n}.txt": f"needle {n}\n" for n in range(40)})
    head = repo.commit_files({"d/f3.txt": "needle three\n", "e/new.txt": "needle new\n"})
    assert pin(store, repo.git_dir, base, base)._search_index() is not None
    assert tree_walks  # the base's own check walked its tree: the count counts
    tree_walks.clear()
    derived = pin(store, repo.git_dir, base, head)
    assert derived.snapshot.origin is not None
    assert derived.snapshot.origin.sha == base
    assert len(derived.snapshot.origin.blobs()) == 2  # the two new blobs, nothing else
    assert derived._search_index() is not None
    assert tree_walks == []  # neither the preparation nor the search walked the tree
    hits = search_repository(derived, SearchArguments(query="needle", limit=100))["matches"]
    assert {"path": "d/f3.txt", "line": 1, "excerpt": "needle three"} in hits
    assert {"path": "e/new.txt", "line": 1, "excerpt": "needle new"} in hits
    assert len(hits) == 41


def test_heads_derived_one_from_another_start_from_the_head_marked_complete(
    store: RepositoryStore, repo: GitRepo, monkeypatch: pytest.MonkeyPatch, tree_walks: list[int]
) -> None:
    """Fifty new heads at once: each is derived from the one before, none marked complete yet."""
    base = repo.commit_files({f"d/f{n}.txt": f"needle {n}\n" for n in range(40)})
    first = repo.commit_files({"d/f1.txt": "needle one\n", "d/gone.txt": "needle gone\n"})
    git(repo.path, "reset", "-q", "--hard", base)
    second = repo.commit_files({"d/f2.txt": "needle two\n"})
    assert pin(store, repo.git_dir, base, base)._search_index() is not None
    monkeypatch.setattr(
        store.indexes, "prepare", lambda *_: None
    )  # nothing marked complete meanwhile
    one = PinnedRepository.open(repo.git_dir, base, first, store=store)
    two = PinnedRepository.open(
        repo.git_dir, base, second, store=store
    )  # derived from `one`, the latest
    origin = two.snapshot.origin
    assert origin is not None
    assert origin.sha == base
    # f1.txt is back to the base's blob (carried, harmlessly), gone.txt is gone, f2 is new.
    assert sorted(origin.changed) == ["d/f1.txt", "d/f2.txt"]
    assert tree_walks  # the base's own check walked its tree: the count counts
    tree_walks.clear()
    assert two._search_index() is not None
    assert one._search_index() is not None
    assert tree_walks == []
    hits = search_repository(two, SearchArguments(query="needle", limit=100))["matches"]
    assert {"path": "d/f2.txt", "line": 1, "excerpt": "needle two"} in hits
    assert not any(hit["path"] == "d/gone.txt" for hit in hits)


@pytest.mark.parametrize("probe", [0, 2, search.PROBE_FILES])
def test_a_derived_heads_search_equals_git_grep(
    store: RepositoryStore, repo: GitRepo, monkeypatch: pytest.MonkeyPatch, probe: int
) -> None:
    monkeypatch.setattr(search, "PROBE_FILES", probe)
    same = "needle shared\n"
    base = repo.commit_files({f"a/f{n}.txt": f"needle {n}\n" for n in range(12)} | {"z.txt": same})
    head = repo.commit_files(
        {"a/f2.txt": "no match\n", "b/copy.txt": same, "a/f5.txt": "needle\nneedle again\n"},
        delete=("a/f7.txt",),
    )
    assert pin(store, repo.git_dir, base, base)._search_index() is not None
    derived = pin(store, repo.git_dir, base, head)
    full = load_snapshot(repo.git_dir, head)
    # Counted from the base's and the changes: the copy of a blob z.txt holds counts twice.
    assert derived.snapshot.search_bytes() == full.search_bytes() + len(same)
    for arguments in (
        SearchArguments(query="needle", limit=100),
        SearchArguments(query="needle", path="a", limit=100),
        SearchArguments(query="shared", limit=100),
        SearchArguments(query="ne", limit=100),
    ):
        from_index, from_git = both_ways(store, derived, arguments)
        assert from_index == from_git


def test_a_dense_literal_is_read_in_order_and_a_sparse_one_asks_the_index(
    store: RepositoryStore, repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "PROBE_FILES", 4)
    monkeypatch.setattr(search, "RARE_LIST_BYTES", 0)  # every list here is a few bytes
    files = {f"f{n:02}.txt": f"common {n}\n" for n in range(60)}
    files |= {"f33.txt": "common rare\n", "f51.txt": "rare\n"}
    head = repo.commit_files(files)
    pinned = pin(store, repo.git_dir, head, head)
    asked: list[Sequence[int]] = []
    real_candidates = SearchIndex.candidates

    def counting(self: SearchIndex, grams: Sequence[int]) -> set[str]:
        asked.append(grams)
        return real_candidates(self, grams)

    monkeypatch.setattr(SearchIndex, "candidates", counting)
    for query, expected in (("common", []), ("rare", [trigram_query(b"rare")])):
        asked.clear()
        from_index, from_git = both_ways(store, pinned, SearchArguments(query=query, limit=100))
        assert from_index == from_git
        assert asked == expected
    assert [m["path"] for m in from_index["matches"]] == ["f33.txt", "f51.txt"]


@pytest.mark.parametrize(("rare_bytes", "bodies_read"), [(8, 2), (0, 4 + 2)])
def test_a_literal_with_a_rare_trigram_reads_its_candidates_first(
    store: RepositoryStore,
    repo: GitRepo,
    monkeypatch: pytest.MonkeyPatch,
    rare_bytes: int,
    bodies_read: int,
) -> None:
    """Under RARE_LIST_BYTES, no file is read before the index names the candidates."""
    monkeypatch.setattr(search, "PROBE_FILES", 4)
    monkeypatch.setattr(search, "RARE_LIST_BYTES", rare_bytes)
    files = {f"f{n:02}.txt": f"common {n}\n" for n in range(60)}
    files |= {"f33.txt": "common rare\n", "f51.txt": "rare\n"}
    head = repo.commit_files(files)
    pinned = pin(store, repo.git_dir, head, head)
    reads: list[int] = []
    real_bodies = SearchIndex.bodies

    def counting(self: SearchIndex, oids: Collection[str]) -> dict[str, bytes | None]:
        reads.append(len(oids))
        return real_bodies(self, oids)

    monkeypatch.setattr(SearchIndex, "bodies", counting)
    from_index, from_git = both_ways(store, pinned, SearchArguments(query="rare", limit=100))
    assert from_index == from_git
    assert [m["path"] for m in from_index["matches"]] == ["f33.txt", "f51.txt"]
    assert sum(reads) == bodies_read  # the two candidates, after the first PROBE_FILES or not


def test_a_search_of_fewer_files_than_the_probe_reads_them_without_asking_the_index(
    store: RepositoryStore, repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file, or a folder of at most PROBE_FILES files, is read whole at once: its search
    neither weighs the literal's trigrams nor decodes their lists, however rare."""
    files = {f"f{n:02}.txt": f"common {n}\n" for n in range(60)} | {"f51.txt": "rare\n"}
    head = repo.commit_files(files)
    pinned = pin(store, repo.git_dir, head, head)
    asked: list[str] = []

    def counted(name: str) -> Callable[..., object]:
        real = getattr(SearchIndex, name)

        def counting(self: SearchIndex, *args: object) -> object:
            asked.append(name)
            return real(self, *args)

        return counting

    for name in ("posting_sizes", "candidates"):
        monkeypatch.setattr(SearchIndex, name, counted(name))
    for path in ("", "f51.txt"):
        arguments = SearchArguments(query="rare", path=path, limit=100)
        from_index, from_git = both_ways(store, pinned, arguments)
        assert from_index == from_git
        assert [m["path"] for m in from_index["matches"]] == ["f51.txt"]
    assert asked == []


def test_small_repositories_keep_git_grep(cache: Path, repo: GitRepo) -> None:
    head = repo.commit_files({"a.txt": "needle\n"})
    with RepositoryStore(cache_dir=cache) as store:
        assert pin(store, repo.git_dir, head, head)._search_index() is None
    with RepositoryStore() as without_cache:  # no cache directory: no index at all
        without_cache.indexes.min_bytes = 0
        assert without_cache.index_dir(repo.git_dir) is None
        assert pin(without_cache, repo.git_dir, head, head)._search_index() is None


def test_a_large_index_is_built_in_the_background(
    store: RepositoryStore,
    repo: GitRepo,
    monkeypatch: pytest.MonkeyPatch,
    held_builds: threading.Event,
) -> None:
    monkeypatch.setattr(store.indexes, "inline_bytes", 0)
    head = repo.commit_files({f"f{n}.txt": f"needle {n}\n" for n in range(20)})
    pinned = pin(store, repo.git_dir, head, head)
    greps: list[str] = []
    real_git_grep = search.git_grep

    def counted(git_dir: Path, head_sha: str, query: str, pathspec: str) -> Iterator[object]:
        greps.append(query)
        yield from real_git_grep(git_dir, head_sha, query, pathspec)

    monkeypatch.setattr(search, "git_grep", counted)
    first = search_repository(pinned, SearchArguments(query="needle", limit=100))
    assert greps == ["needle"]  # not ready: git grep answered, and a build started
    held_builds.set()
    store.indexes.wait(repo.git_dir)
    assert pinned._search_index() is not None
    assert search_repository(pinned, SearchArguments(query="needle", limit=100)) == first
    assert greps == ["needle"]


@pytest.mark.e2e
def test_another_process_reads_the_index_without_building_it(
    cache: Path, repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = repo.commit_files({f"f{n}.txt": f"needle {n}\n" for n in range(30)})
    with indexed_store(cache) as first:
        expected = search_repository(
            pin(first, repo.git_dir, head, head), SearchArguments(query="needle 2", limit=100)
        )
        assert expected["matches"]
    streamed: list[int] = []
    real_batches = index_build.prepared_batches

    def counting(git_dir: Path, oids: list[str]) -> Iterator[PreparedBlobs]:
        streamed.append(len(oids))
        yield from real_batches(git_dir, oids)

    monkeypatch.setattr(index_build, "prepared_batches", counting)
    with indexed_store(cache) as second:
        pinned = pin(second, repo.git_dir, head, head)
        assert pinned._search_index() is not None
        assert search_repository(pinned, SearchArguments(query="needle 2", limit=100)) == expected
    assert streamed == []
    # A real second process too: the file is all it needs.
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from pr_review_api.git.repository import PinnedRepository
        from pr_review_api.git.repository import PinnedRepository
        from pr_review_api.git.store import RepositoryStore
        from pr_review_api.tools import SearchArguments, search_repository
        with RepositoryStore(cache_dir=Path({str(cache)!r})) as store:
            store.indexes.min_bytes = 0
            git_dir = Path({str(repo.git_dir)!r})
            pinned = PinnedRepository.open(git_dir, {head!r}, {head!r}, store=store)
            assert pinned._search_index() is not None
            assert not store.indexes._builds
            print(len(search_repository(pinned, SearchArguments(query="needle 2"))["matches"]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(len(expected["matches"]))


@pytest.mark.e2e
def test_a_killed_build_leaves_whole_blobs_and_is_completed_later(
    cache: Path, repo: GitRepo, held_builds: threading.Event
) -> None:
    files = {f"f{n:03}.txt": f"needle {n}\n" * 50 for n in range(200)}
    head = repo.commit_files(files)
    ready = cache / "first-batch-committed"
    script = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from pr_review_api.git.repository import PinnedRepository
        from pr_review_api.git.search_index import build
        from pr_review_api.git.store import RepositoryStore
        build.BATCH_BLOBS = 10
        real_write = build.write_blobs
        def slow_write(connection, blobs, stop=None):
            real_write(connection, blobs, stop)
            Path({str(ready)!r}).touch()
            time.sleep(0.2)
        build.write_blobs = slow_write
        store = RepositoryStore(cache_dir=Path({str(cache)!r}))
        store.indexes.min_bytes = 0
        store.indexes.inline_bytes = 0
        git_dir = Path({str(repo.git_dir)!r})
        pinned = PinnedRepository.open(git_dir, {head!r}, {head!r}, store=store)
        assert pinned._search_index() is None
        time.sleep(60)
        """
    )
    process = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.02)
    assert ready.exists()
    time.sleep(0.3)
    process.send_signal(signal.SIGKILL)
    process.wait()
    with indexed_store(cache) as store:
        path = index_path(store, repo.git_dir)
        with sqlite3.connect(path) as connection:
            assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            rows = connection.execute(
                "SELECT oid, body, packed FROM blobs JOIN bodies USING (id)"
            ).fetchall()
        assert 0 < len(rows) < len(files)  # some batches, not all
        texts = [zlib.decompress(body) if packed else body for _, body, packed in rows]
        contents = {
            git(repo.path, "hash-object", "--stdin", input_bytes=text): text for text in texts
        }
        assert {row[0] for row in rows} == set(contents)  # every stored blob is whole
        store.indexes.inline_bytes = 0
        pinned = pin(store, repo.git_dir, head, head)
        assert pinned._search_index() is None  # incomplete: not used, completed in the background
        held_builds.set()
        store.indexes.wait(repo.git_dir)
        assert pinned._search_index() is not None
        hits = search_repository(pinned, SearchArguments(query="needle 199", limit=100))
        assert hits["matches"][0]["path"] == "f199.txt"


def test_a_corrupt_index_is_never_used_and_is_remade(
    store: RepositoryStore, repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = repo.commit_files({f"f{n}.txt": f"needle {n}\n" for n in range(10)})
    path = index_path(store, repo.git_dir)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database" * 100)
    monkeypatch.setattr(store.indexes, "inline_bytes", 0)
    pinned = pin(store, repo.git_dir, head, head)
    found = search_repository(pinned, SearchArguments(query="needle", limit=100))
    assert len(found["matches"]) == 10  # git grep answered
    store.indexes.wait(repo.git_dir)
    assert pinned._search_index() is not None
    assert search_repository(pinned, SearchArguments(query="needle", limit=100)) == found
    # Remade under a new name (a late close of the old file deletes its log by name), and
    # the old generation is gone.
    names = [older.name for _, older in index_folder.generations(path.parent)]
    assert names == ["search-2.sqlite"]


def test_an_index_of_another_version_is_remade(
    store: RepositoryStore,
    repo: GitRepo,
    monkeypatch: pytest.MonkeyPatch,
    held_builds: threading.Event,
) -> None:
    head = repo.commit_files({f"f{n}.txt": f"needle {n}\n" for n in range(10)})
    path = index_path(store, repo.git_dir)
    path.parent.mkdir(parents=True)
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE blobs(id INTEGER PRIMARY KEY, oid TEXT, body BLOB)")
        connection.execute("PRAGMA user_version = 99")
    monkeypatch.setattr(store.indexes, "inline_bytes", 0)
    pinned = pin(store, repo.git_dir, head, head)
    assert pinned._search_index() is None
    held_builds.set()
    store.indexes.wait(repo.git_dir)
    assert pinned._search_index() is not None


def test_one_builder_at_a_time_over_processes(
    store: RepositoryStore, repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = repo.commit_files({f"f{n}.txt": f"needle {n}\n" for n in range(10)})
    monkeypatch.setattr(store.indexes, "inline_bytes", 0)
    path = index_path(store, repo.git_dir)
    with build_lock(path.parent) as mine:  # as another process's build would hold it
        assert mine
        pinned = pin(store, repo.git_dir, head, head)
        assert pinned._search_index() is None
        store.indexes.wait(repo.git_dir)
        assert not path.exists()  # this process's build saw the lock and left
    assert pinned._search_index() is None
    store.indexes.wait(repo.git_dir)
    assert pinned._search_index() is not None


def test_large_bodies_are_stored_compressed_and_searched_alike(
    store: RepositoryStore, repo: GitRepo
) -> None:
    large = noise(1, 1000) + "needle in the large one\n" + noise(2, 200)  # 78 kB
    head = repo.commit_files({"large.txt": large, "small.txt": "a needle\n" * 3})
    pinned = pin(store, repo.git_dir, head, head)
    arguments = SearchArguments(query="needle", limit=100)
    from_index, from_git = both_ways(store, pinned, arguments)
    assert from_index == from_git
    assert [hit["path"] for hit in from_index["matches"]] == ["large.txt", *["small.txt"] * 3]
    with sqlite3.connect(index_path(store, repo.git_dir)) as connection:
        stored = connection.execute("SELECT length(body), packed FROM bodies").fetchall()
    assert sorted(packed for _, packed in stored) == [0, 1]  # the large one only
    assert max(size for size, _ in stored) < len(large) // 1.5


def noise(seed: int, lines: int) -> str:
    """Text that compresses little (as the index stores it): hex digests, one a line."""
    return "".join(hashlib.sha256(f"{seed}.{n}".encode()).hexdigest() + "\n" for n in range(lines))


def test_an_index_grown_stale_by_old_heads_is_rebuilt_for_the_new_one(
    store: RepositoryStore, repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = repo.commit_files({f"old{n}.txt": noise(n, 600) for n in range(20)})  # 780 kB
    assert pin(store, repo.git_dir, old, old)._search_index() is not None
    new = repo.commit_files({"a.txt": "new\n"}, delete=tuple(f"old{n}.txt" for n in range(20)))
    monkeypatch.setattr(index_schedule, "STALE_FACTOR", 1)
    monkeypatch.setattr(index_schedule, "STALE_SLACK_BYTES", 256 * 1024)  # past the old head's
    pinned = pin(store, repo.git_dir, new, new)
    index = eventually_ready(store, pinned)  # stale: rebuilt, in the background
    assert index.path.name == "search-2.sqlite"  # a new generation, for the new head only
    assert len(index.stored_ids()) == 1
    # The build notes the head, then removes the older generation: let it finish.
    store.indexes.wait(repo.git_dir)
    assert [older.name for _, older in index_folder.generations(index.path.parent)] == [
        "search-2.sqlite"
    ]


def test_reads_fall_back_to_git_grep_when_the_index_vanishes(
    store: RepositoryStore, repo: GitRepo
) -> None:
    head = repo.commit_files({f"f{n}.txt": f"needle {n}\n" for n in range(10)})
    pinned = pin(store, repo.git_dir, head, head)
    index = pinned._search_index()
    assert index is not None
    index.close()  # as if the file had become unreadable: every read raises IndexUnavailable
    found = search_repository(pinned, SearchArguments(query="needle", limit=100))
    assert len(found["matches"]) == 10


def test_the_index_lives_inside_the_cache_it_is_counted_in(cache: Path, tmp_path: Path) -> None:
    with RepositoryStore(cache_dir=cache) as store:
        cached = cache / "repositories" / ("a" * 32) / "git"
        cached.mkdir(parents=True)
        assert store.index_dir(cached) == cache / "repositories" / ("a" * 32) / "index"
        local = tmp_path / "work" / ".git"
        local.mkdir(parents=True)
        folder = store.index_dir(local)
        assert folder is not None
        assert folder.parent.parent == cache / "repositories"
        assert len(folder.parent.name) == 32
        assert os.fsencode(str(local)) not in os.fsencode(str(folder))


def test_a_build_trims_the_cache_it_grows(tmp_path: Path, repo: GitRepo) -> None:
    """A local repository's index grows the cache without any fetch: the build trims it."""
    cache = tmp_path / "cache"
    old = cache / "repositories" / ("b" * 32)
    (old / "git").mkdir(parents=True)
    with (old / "git" / "pack").open("wb") as pack:  # sparse: counted, not written
        pack.truncate(100 * 1024**2)
    os.utime(old, (1, 1))  # used long ago
    settings = Settings(pr_review_cache_dir=cache, pr_review_cache_max_bytes=64 * 1024**2)
    head = repo.commit_files({f"f{n}.txt": f"needle {n}\n" for n in range(20)})
    with repository_store(settings) as store:
        store.indexes.min_bytes, store.indexes.inline_bytes = 0, 0
        pinned = PinnedRepository.open(repo.git_dir, head, head, store=store)
        index = eventually_ready(store, pinned)
        assert not old.exists()
        assert index.path.is_file()
        assert (index.path.parent.parent / "last-used").is_file()


def test_concurrent_searches_of_one_index_agree(store: RepositoryStore, repo: GitRepo) -> None:
    head = repo.commit_files({f"d{n % 5}/f{n}.txt": f"needle {n}\n" for n in range(60)})
    pinned = pin(store, repo.git_dir, head, head)
    assert pinned._search_index() is not None
    expected = search_repository(pinned, SearchArguments(query="needle", limit=100))
    results: list[dict[str, Any]] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(
                search_repository(pinned, SearchArguments(query="needle", limit=100))
            )
        )
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 8


def test_a_head_marked_complete_means_a_new_process_need_not_check_its_blobs(
    cache: Path, repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = repo.commit_files({f"f{n}.txt": f"needle {n}\n" for n in range(30)})
    with indexed_store(cache) as first:
        assert pin(first, repo.git_dir, head, head)._search_index() is not None
    checked: list[int] = []
    real_not_stored = SearchIndex.not_stored

    def counting(self: SearchIndex, blobs: Any) -> list[tuple[str, int]]:
        checked.append(1)
        return real_not_stored(self, blobs)

    monkeypatch.setattr(SearchIndex, "not_stored", counting)
    with indexed_store(cache) as second:
        assert pin(second, repo.git_dir, head, head)._search_index() is not None
    assert checked == []
    other = repo.commit_files({"f1.txt": "needle changed\n"})
    with indexed_store(cache) as third:  # a head never marked complete is checked blob by blob
        assert pin(third, repo.git_dir, other, other)._search_index() is not None
    assert checked


def test_opening_a_head_builds_its_index_without_any_search(
    store: RepositoryStore, repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store.indexes, "inline_bytes", 0)
    head = repo.commit_files({f"f{n}.txt": f"needle {n}\n" for n in range(20)})
    pin(store, repo.git_dir, head, head)
    deadline = time.monotonic() + 30
    path = index_path(store, repo.git_dir)
    while time.monotonic() < deadline:
        store.indexes.wait(repo.git_dir)
        if path.exists():
            with (
                contextlib.closing(sqlite3.connect(path)) as connection,
                contextlib.suppress(sqlite3.OperationalError),  # no tables yet
            ):
                if connection.execute("SELECT count(*) FROM heads").fetchone() == (1,):
                    break
        time.sleep(0.05)
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT sha FROM heads").fetchall() == [(head,)]
        assert connection.execute("SELECT count(*) FROM blobs").fetchone() == (20,)


def test_closing_the_store_stops_a_build_inside_its_transaction(
    cache: Path, repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = repo.commit_files({f"f{n:03}.txt": f"needle {n}\n" for n in range(300)})
    store = indexed_store(cache)
    monkeypatch.setattr(store.indexes, "inline_bytes", 0)
    started = threading.Event()
    real_write = write_blobs

    written: list[str] = []

    class Trickle(list[tuple[str, bytes | None, bool]]):
        def __iter__(self) -> Iterator[tuple[str, bytes | None, bool]]:
            for blob in super().__iter__():
                started.set()
                time.sleep(0.05)  # 300 blobs: 15 s for one transaction
                written.append(blob[0])
                yield blob

    def slow(connection: sqlite3.Connection, prepared: PreparedBlobs, stop: Any = None) -> None:
        real_write(connection, PreparedBlobs(Trickle(prepared.blobs), prepared.postings), stop)

    monkeypatch.setattr(index_build, "write_blobs", slow)
    pinned = pin(store, repo.git_dir, head, head)
    assert pinned._search_index() is None
    assert started.wait(10)
    store.close()
    assert len(written) < 300  # the build stopped, not waited out
    with sqlite3.connect(index_path(store, repo.git_dir)) as connection:
        assert connection.execute("SELECT count(*) FROM blobs").fetchone() == (0,)  # rolled back


def test_an_index_others_may_write_is_never_read(
    store: RepositoryStore, repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = repo.commit_files({f"f{n}.txt": f"needle {n}\n" for n in range(10)})
    pinned = pin(store, repo.git_dir, head, head)
    index = pinned._search_index()
    assert index is not None
    assert index.path.stat().st_mode & 0o777 == 0o600
    index.path.chmod(0o666)  # as if another user could have written it
    other = repo.commit_files({"f1.txt": "changed\n"})
    monkeypatch.setattr(store.indexes, "inline_bytes", 0)
    fresh = PinnedRepository.open(repo.git_dir, other, other, store=store)
    found = search_repository(fresh, SearchArguments(query="needle", limit=100))
    assert len(found["matches"]) == 9  # git grep answered
    remade = eventually_ready(store, fresh)
    assert remade.path != index.path  # a new generation, private again
    assert remade.path.stat().st_mode & 0o777 == 0o600
