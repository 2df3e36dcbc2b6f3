"""blobs.py: the long-lived blob reader and the text store that search scans.

The reader must answer exactly as a one-shot `git cat-file --batch` does, survive its process
dying or its repository being replaced, and stop when retired. A search answered from the
text store must be the search `git grep` answers, hit for hit, on a hostile repository.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pr_review_api.git import blobs, repository, search, texts
from pr_review_api.git import runner as git_module
from pr_review_api.git.blobs import BlobReader
from pr_review_api.git.repository import PinnedRepository, resolve_commit
from pr_review_api.git.store import RepositoryStore
from pr_review_api.tools import SearchArguments, execute_tool, search_repository
from tests.gitrepo import FILE, GitRepo, git
from tests.hostile.world import REGULAR_FILES, HostileWorld, build_hostile_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> HostileWorld:
    return build_hostile_world(tmp_path_factory.mktemp("hostile"))


# The store of the running test (the `store` fixture, autouse): readers and text stores.
STORE: list[RepositoryStore] = []


@pytest.fixture(autouse=True)
def store() -> Iterator[RepositoryStore]:
    with RepositoryStore() as fresh:
        STORE.append(fresh)
        try:
            yield fresh
        finally:
            STORE.remove(fresh)


def reader_for(git_dir: Path) -> BlobReader:
    return STORE[-1].readers.reader(git_dir)


def describer_for(git_dir: Path) -> BlobReader:
    return STORE[-1].readers.describer(git_dir)


def pin(git_dir: Path, base: str, head: str) -> PinnedRepository:
    return STORE[-1].open(git_dir, base, head)


@pytest.fixture
def stored(store: RepositoryStore) -> None:
    """Every repository, however small, is searched through its text store."""
    store.texts.min_bytes = 0


def blob_ids(repo: GitRepo, revision: str) -> dict[str, str]:
    listing = git(repo.path, "ls-tree", "-r", revision)
    return {line.split("\t")[1]: line.split()[2] for line in listing.splitlines()}


# --- the reader -------------------------------------------------------------------------------


def test_reader_returns_content_and_leaves_missing_objects_out(repo: GitRepo) -> None:
    head = repo.commit_files({"a.txt": "alpha\n", "b.bin": b"\x00\xff\n", "empty": ""})
    ids = blob_ids(repo, head)
    reader = BlobReader(repo.git_dir)
    try:
        found = reader.read([*ids.values(), "1" * 40, ids["a.txt"]])
    finally:
        reader.close()
    assert found == {ids["a.txt"]: b"alpha\n", ids["b.bin"]: b"\x00\xff\n", ids["empty"]: b""}


def test_reader_refuses_anything_but_full_ids(repo: GitRepo) -> None:
    repo.commit_files({"a.txt": "a\n"})
    with pytest.raises(ValueError, match="full SHAs"):
        reader_for(repo.git_dir).read(["HEAD:a.txt\nHEAD"])


def test_reader_reads_many_blobs_in_one_call(repo: GitRepo) -> None:
    head = repo.commit_files({f"f{n:04d}.txt": f"{n}\n" * n for n in range(2500)})
    ids = blob_ids(repo, head)
    found = reader_for(repo.git_dir).read(ids.values())
    assert {path: found[oid] for path, oid in ids.items()} == {
        f"f{n:04d}.txt": f"{n}\n".encode() * n for n in range(2500)
    }


def test_reader_is_shared_and_safe_across_threads(repo: GitRepo) -> None:
    head = repo.commit_files({f"f{n}.txt": f"content {n}\n" * 50 for n in range(40)})
    ids = blob_ids(repo, head)
    reader = reader_for(repo.git_dir)
    assert reader_for(repo.git_dir) is reader
    failures: list[str] = []

    def work(offset: int) -> None:
        for round_ in range(30):
            path = f"f{(offset + round_) % 40}.txt"
            data = reader.read([ids[path]])[ids[path]]
            if data != f"content {path[1:-4]}\n".encode() * 50:
                failures.append(path)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_reader_replaces_a_dead_process(repo: GitRepo) -> None:
    head = repo.commit_files({"a.txt": "a\n"})
    oid = blob_ids(repo, head)["a.txt"]
    reader = BlobReader(repo.git_dir)
    assert reader.read([oid]) == {oid: b"a\n"}
    assert reader._process is not None
    reader._process.kill()
    reader._process.wait()
    assert reader.read([oid]) == {oid: b"a\n"}
    reader.close()


def test_reader_follows_a_repository_replaced_at_the_same_path(tmp_path: Path) -> None:
    first = GitRepo(tmp_path / "repo")
    first.commit_files({"a.txt": "first\n"})
    reader = reader_for(first.git_dir)
    old = blob_ids(first, "HEAD")["a.txt"]
    assert reader.read([old]) == {old: b"first\n"}
    shutil.rmtree(tmp_path / "repo")
    second = GitRepo(tmp_path / "repo")
    second.commit_files({"a.txt": "second\n"})
    new = blob_ids(second, "HEAD")["a.txt"]
    assert reader.read([new, old]) == {new: b"second\n"}


def test_a_retired_reader_still_reads_without_a_process(repo: GitRepo) -> None:
    head = repo.commit_files({"a.txt": "a\n"})
    oid = blob_ids(repo, head)["a.txt"]
    reader = BlobReader(repo.git_dir)
    reader.close(retire=True)
    assert reader.read([oid]) == {oid: b"a\n"}
    assert reader._process is None


def test_reader_sees_objects_written_after_it_started(repo: GitRepo) -> None:
    repo.commit_files({"a.txt": "a\n"})
    reader = reader_for(repo.git_dir)
    reader.read([blob_ids(repo, "HEAD")["a.txt"]])
    head = repo.commit_files({"b.txt": "later\n"})
    git(repo.path, "gc", "-q")  # packed, in a pack the process has never seen
    oid = blob_ids(repo, head)["b.txt"]
    assert reader.read([oid]) == {oid: b"later\n"}


# --- the text store -------------------------------------------------------------------------


def both_ways(
    pinned: PinnedRepository, arguments: SearchArguments
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tool's answer from the text store, and from git grep."""
    store = pinned._text_store()
    assert store is not None
    from_store = execute_tool(pinned, "search_repository", arguments).result
    saved = pinned.snapshot._text_store
    pinned.snapshot._text_store = None
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(STORE[-1].texts, "min_bytes", 1 << 62)
            from_git = execute_tool(pinned, "search_repository", arguments).result
    finally:
        pinned.snapshot._text_store = saved
    return from_store, from_git


QUERIES = [
    "needle",
    "validate_name",
    "needle exact",
    "café",
    "😀",
    '"\\\x01',
    ".*[",
    "--output=x",
    "Needle",
    "y" * 300,
    "two needle",
    "last",
    "LOOKALIKE-MARKER",
    "unspellable",
    "OUTSIDE-SENTINEL",
]
PATHS = ["", "src", "src/app.py", "text", "links/to_src", "links/to_app", "many", "big", "bin"]


@pytest.mark.usefixtures("stored")
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("query", QUERIES)
def test_store_search_equals_git_grep_search(world: HostileWorld, query: str, path: str) -> None:
    arguments = SearchArguments(query=query, path=path, limit=100)
    from_store, from_git = both_ways(pin(world.repo.git_dir, world.base, world.head), arguments)
    assert from_store == from_git


@pytest.mark.usefixtures("stored")
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=st.sampled_from(sorted(REGULAR_FILES.values())),
    start=st.integers(min_value=0, max_value=60),
    length=st.integers(min_value=1, max_value=12),
    limit=st.integers(min_value=1, max_value=100),
)
def test_store_search_equals_git_grep_on_any_substring(
    world: HostileWorld, text: str, start: int, length: int, limit: int
) -> None:
    query = text[start : start + length]
    if not query:
        return
    pinned = pin(world.repo.git_dir, world.base, world.head)
    assert pinned._text_store() is not None
    from_store, from_git = both_ways(pinned, SearchArguments(query=query, limit=limit))
    assert from_store == from_git


@pytest.mark.usefixtures("stored")
def test_store_search_numbers_lines_and_ends_as_git_does(repo: GitRepo) -> None:
    base = repo.commit_files({"base.txt": "base\n"})
    head = repo.commit_tree(
        {
            "a.txt": (FILE, b"x\nhit one\n\nhit two hit\r\nno\nhit last"),
            "b.txt": (FILE, b"hit\n" * 3),
            "late_nul.txt": (FILE, b"hit\n" * 5000 + b"\x00"),
        },
        parent=base,
    )
    pinned = pin(repo.git_dir, base, head)
    from_store, from_git = both_ways(pinned, SearchArguments(query="hit", limit=100))
    assert from_store == from_git
    assert [(m["path"], m["line"]) for m in from_store["matches"]] == [
        ("a.txt", 2),
        ("a.txt", 4),
        ("a.txt", 6),
        ("b.txt", 1),
        ("b.txt", 2),
        ("b.txt", 3),
    ]


@pytest.mark.usefixtures("stored")
def test_a_new_head_only_adds_its_new_blobs(repo: GitRepo) -> None:
    base = repo.commit_files({f"f{n}.txt": f"needle {n}\n" for n in range(50)})
    head = repo.commit_files({"f1.txt": "needle changed\n", "new.txt": "needle new\n"})
    first = pin(repo.git_dir, base, base)
    store = first._text_store()
    assert store is not None
    assert len(store.texts) == 50
    second = pin(repo.git_dir, base, head)
    assert second._text_store() is store
    assert len(store.texts) == 52
    hits = search_repository(second, SearchArguments(query="needle", limit=100))["matches"]
    assert {"path": "f1.txt", "line": 1, "excerpt": "needle changed"} in hits
    assert {"path": "new.txt", "line": 1, "excerpt": "needle new"} in hits


def test_small_repositories_keep_git_grep(repo: GitRepo) -> None:
    head = repo.commit_files({"a.txt": "needle\n"})
    pinned = pin(repo.git_dir, head, head)
    assert pinned._text_store() is None


@pytest.mark.usefixtures("stored")
def test_a_large_store_is_built_in_the_background(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(STORE[-1].texts, "inline_bytes", 0)
    head = repo.commit_files({f"f{n}.txt": f"needle {n}\n" for n in range(20)})
    pinned = pin(repo.git_dir, head, head)
    first = search_repository(pinned, SearchArguments(query="needle", limit=100))
    STORE[-1].texts.wait(repo.git_dir)
    assert pinned._text_store() is not None
    assert search_repository(pinned, SearchArguments(query="needle", limit=100)) == first


@pytest.mark.usefixtures("stored")
def test_stores_stay_within_their_byte_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(STORE[-1].texts, "max_bytes", 3000)
    pinned = []
    for name in ("one", "two", "three"):
        repo = GitRepo(tmp_path / name)
        head = repo.commit_files({"a.txt": name[0] * 1200 + "\n"})
        pinned.append(pin(repo.git_dir, head, head))
    stores = [p._text_store() for p in pinned]
    assert all(store is not None for store in stores)
    assert stores[0] is not None
    assert stores[0].dropped  # the least recently used one made room
    assert not any(store.dropped for store in stores[1:] if store is not None)
    big = GitRepo(tmp_path / "big")
    head = big.commit_files({"a.txt": "x" * 4000 + "\n"})
    assert pin(big.git_dir, head, head)._text_store() is None


@pytest.mark.usefixtures("stored")
def test_searches_arriving_while_the_store_fills_wait_for_it(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(STORE[-1].texts, "inline_bytes", 0)
    head = repo.commit_files({f"f{n}.txt": f"needle {n}\n" for n in range(20)})
    pinned = pin(repo.git_dir, head, head)
    gate = threading.Event()
    real_stream = blobs.stream_blobs

    def held_stream(git_dir: Path, oids: list[str]) -> Iterator[tuple[str, bytes]]:
        gate.wait(10)
        yield from real_stream(git_dir, oids)

    monkeypatch.setattr(texts, "stream_blobs", held_stream)
    greps: list[str] = []
    real_git_grep = search.git_grep

    def counted(git_dir: Path, head_sha: str, query: str, pathspec: str) -> Iterator[object]:
        greps.append(query)
        yield from real_git_grep(git_dir, head_sha, query, pathspec)

    monkeypatch.setattr(search, "git_grep", counted)
    first = pinned.grep("needle", "")
    assert isinstance(first, Generator)
    assert next(first).path == "f0.txt"  # git grep runs, and the store is being filled
    results: list[dict[str, Any]] = []
    waiting = [
        threading.Thread(
            target=lambda: results.append(
                search_repository(pinned, SearchArguments(query="needle", limit=100))
            )
        )
        for _ in range(4)
    ]
    for thread in waiting:
        thread.start()
    gate.set()
    for thread in waiting:
        thread.join()
    first.close()
    assert greps == ["needle"]  # only the first search ran git grep
    assert len(results) == 4
    assert all(len(result["matches"]) == 20 for result in results)


def test_the_describer_gives_types_and_sizes(repo: GitRepo) -> None:
    head = repo.commit_files({"a.txt": "alpha\n"})
    blob = blob_ids(repo, head)["a.txt"]
    tree = git(repo.path, "rev-parse", "HEAD^{tree}")
    described = describer_for(repo.git_dir).describe([blob, tree, head, "2" * 40])
    assert described[blob] == ("blob", 6)
    assert described[tree][0] == "tree"
    assert described[head][0] == "commit"
    assert "2" * 40 not in described
    retired = BlobReader(repo.git_dir, contents=False)
    retired.close(retire=True)
    assert retired.describe([blob, "2" * 40]) == {blob: ("blob", 6)}
    with pytest.raises(TypeError):
        retired.read([blob])


def test_resolve_commit_takes_full_shas_without_rev_parse_and_peels_tags(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = repo.commit_files({"a.txt": "a\n"})
    git(repo.path, "tag", "-a", "v1", "-m", "release")
    tag = git(repo.path, "rev-parse", "v1")
    blob = blob_ids(repo, head)["a.txt"]
    assert resolve_commit(repo.git_dir, tag) == head  # an annotated tag: peeled by rev-parse
    calls: list[list[str]] = []
    real_run = git_module.run_git

    def recording(git_dir: Path | None, args: list[str], **kwargs: Any) -> Any:
        calls.append(list(args))
        return real_run(git_dir, args, **kwargs)

    monkeypatch.setattr(repository, "run_git", recording)
    assert resolve_commit(repo.git_dir, head, STORE[-1]) == head
    assert resolve_commit(repo.git_dir, blob, STORE[-1]) is None
    assert resolve_commit(repo.git_dir, "3" * 40, STORE[-1]) is None
    assert calls == []
