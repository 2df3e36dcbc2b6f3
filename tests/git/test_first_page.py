"""The first list page read from tree objects (git/first_page.py): always the index's own first
page, on real repositories (odd names, links, submodules, many directories), and nothing at
all (`Uncertain`: the caller waits for the index) where the tree objects cannot show it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pr_review_api.git.blobs import BlobReaders
from pr_review_api.git.first_page import HeadTree, Uncertain
from pr_review_api.git.limits import Work
from pr_review_api.git.paths import reachable
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.store import RepositoryStore
from pr_review_api.git.tree import Snapshot, files_under, load_snapshot
from pr_review_api.git_runner import GitError
from pr_review_api.tools import ListFilesArguments, list_repository_files
from tests.gitrepo import EXECUTABLE, FILE, GITLINK, LINK, Entry, GitRepo, git
from tests.hostile.world import HostileWorld, build_hostile_world

COUNTS = (1, 2, 7, 101, 201)


class HeldStore(RepositoryStore):
    """A store whose snapshots wait for `release`: an `early` view's index is still being
    made for as long as a test needs (everything else is the real store)."""

    def __init__(self) -> None:
        super().__init__(threads=2)
        self.release = threading.Event()

    def snapshot(self, git_dir: Path, head_sha: str, work: Work | None = None) -> Snapshot:
        self.release.wait(60)
        return super().snapshot(git_dir, head_sha, work)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> HostileWorld:
    return build_hostile_world(tmp_path_factory.mktemp("first-page-hostile"))


@pytest.fixture
def readers() -> Iterator[BlobReaders]:
    made = BlobReaders()
    yield made
    made.close()


def _index_page(snapshot: Snapshot, directory: str, count: int) -> list[str]:
    start, end = files_under(snapshot.files, directory)
    return snapshot.files[start : min(end, start + count)]


def _every_directory(snapshot: Snapshot) -> list[str]:
    """The directories a request can name (the root, and each whose path is reachable)."""
    return sorted(d for d in snapshot.directories if not d or reachable(d))


def _assert_same_pages(readers: BlobReaders, git_dir: Path, head: str) -> int:
    """Every directory's first pages from the tree objects equal the index's; the count of
    pages compared."""
    snapshot = load_snapshot(git_dir, head)
    compared = 0
    for directory in _every_directory(snapshot):
        for count in COUNTS:
            listed = HeadTree(readers.source(git_dir), head).listed(directory, count)
            assert listed == _index_page(snapshot, directory, count), (directory, count)
            compared += 1
    return compared


def test_every_first_page_of_the_hostile_world_is_the_index_s(
    world: HostileWorld, readers: BlobReaders
) -> None:
    # Lookalikes of .git, unspellable and non-UTF-8 names, links of every kind, a submodule,
    # 4096-byte paths: each left out, or listed, where the index does.
    compared = _assert_same_pages(readers, world.repo.git_dir, world.head)
    assert compared >= 10 * len(COUNTS)


def _raw_tree(repo: GitRepo, records: list[tuple[str, bytes, str]]) -> str:
    """A tree object written as given (any order, any name), as no porcelain would."""
    data = b"".join(
        mode.lstrip("0").encode() + b" " + name + b"\0" + bytes.fromhex(oid)
        for mode, name, oid in records
    )
    return git(repo.git_dir, "hash-object", "-t", "tree", "--literally", "-w", "--stdin",
               input_bytes=data)  # fmt: skip


def _blob(repo: GitRepo, content: bytes) -> str:
    return git(repo.git_dir, "hash-object", "-w", "--stdin", input_bytes=content)


def _commit(repo: GitRepo, tree: str) -> str:
    return git(repo.git_dir, "commit-tree", tree, "-m", "raw")


def test_names_that_sort_around_the_slash_and_many_directories(
    tmp_path: Path, readers: BlobReaders
) -> None:
    # "a-b", "a.b" sort before "a/..." and "a0" after it; a file "d" and a directory "d" may
    # stand in one tree (the file first, as git orders them); links into later directories.
    repo = GitRepo(tmp_path / "repo")
    entries: dict[str, Entry] = {}
    for name in ("a-b", "a.b", "a0", "a/b", "a/b-c", "a/b.c", "a/b0", "a/b/c", "a/b/c/d"):
        parent = name.rpartition("/")[0]
        if parent not in entries:
            entries[f"{name}.txt" if name in ("a/b", "a/b/c") else name] = (FILE, name.encode())
    for top in range(12):
        for sub in range(9):
            entries[f"dir{top:02d}/sub{sub}/file.txt"] = (FILE, f"{top} {sub}".encode())
            entries[f"dir{top:02d}/sub{sub}.txt"] = (EXECUTABLE, b"x")
    entries["dir00/to_late"] = (LINK, b"../dir11/sub8/file.txt")
    entries["dir00/to_dir"] = (LINK, b"../dir11")
    entries["dir00/vendor"] = (GITLINK, _commit(repo, _raw_tree(repo, [])).encode())
    head = repo.commit_tree(entries)
    both = _raw_tree(
        repo,
        [
            (FILE, b"d", _blob(repo, b"file d")),
            ("040000", b"d", _raw_tree(repo, [(FILE, b"inner", _blob(repo, b"inner"))])),
            ("040000", b"e", git(repo.git_dir, "rev-parse", f"{head}^{{tree}}")),
        ],
    )
    for commit in (head, _commit(repo, both)):
        assert _assert_same_pages(readers, repo.git_dir, commit) > 100


@pytest.mark.parametrize(
    "case", ["unsorted", "twice", "slash", "empty name", "missing tree", "tree is a blob"]
)
def test_a_tree_whose_order_git_cannot_vouch_for_is_uncertain(
    tmp_path: Path, readers: BlobReaders, case: str
) -> None:
    repo = GitRepo(tmp_path / "repo")
    blob = _blob(repo, b"text\n")
    records = {
        "unsorted": [(FILE, b"b", blob), (FILE, b"a", blob)],
        "twice": [(FILE, b"a", blob), (FILE, b"a", blob)],
        "slash": [(FILE, b"a/b", blob)],
        "empty name": [(FILE, b"", blob)],
        "missing tree": [("040000", b"a", "1" * 40)],
        "tree is a blob": [("040000", b"a", blob)],
    }[case]
    sub = _raw_tree(repo, records)
    head = _commit(repo, _raw_tree(repo, [("040000", b"sub", sub), (FILE, b"z", blob)]))
    with pytest.raises(Uncertain):
        HeadTree(readers.source(repo.git_dir), head).listed("", 10)
    # The index reads the whole tree: its answer (a listing, or git's refusal) is the one given.
    store = HeldStore()
    pinned = PinnedRepository.open(repo.git_dir, head, head, store=store, early=True)
    assert pinned.first_listed("", 10) is None
    store.release.set()
    try:
        expected = _index_page(load_snapshot(repo.git_dir, head), "", 10)
    except GitError:
        with pytest.raises(GitError):
            list_repository_files(pinned, ListFilesArguments())
    else:
        assert list_repository_files(pinned, ListFilesArguments())["paths"] == expected
    store.close()


def test_a_missing_blob_is_left_out_as_the_index_leaves_it(
    tmp_path: Path, readers: BlobReaders
) -> None:
    repo = GitRepo(tmp_path / "repo")
    blob = _blob(repo, b"text\n")
    tree = _raw_tree(repo, [(FILE, b"a", "2" * 40), (FILE, b"b", blob), (LINK, b"c", "3" * 40)])
    head = _commit(repo, tree)
    assert HeadTree(readers.source(repo.git_dir), head).listed("", 10) == ["b"]
    assert _index_page(load_snapshot(repo.git_dir, head), "", 10) == ["b"]


def test_first_listed_answers_only_while_the_index_is_being_made(world: HostileWorld) -> None:
    store = HeldStore()
    pinned = PinnedRepository.open(world.repo.git_dir, world.base, world.head, store=store,
                                   early=True)  # fmt: skip
    early = {path: pinned.first_listed(path, 8) for path in ("", "links/to_src", "./many/")}
    assert pinned._snapshot is None  # every answer above came from the tree objects
    # A file, or a path that is not there, is the index's to refuse.
    assert pinned.first_listed("README.md", 8) is None
    assert pinned.first_listed("nowhere", 8) is None
    store.release.set()
    snapshot = pinned.snapshot
    assert early == {
        "": ("", _index_page(snapshot, "", 8)),
        "links/to_src": ("src", _index_page(snapshot, "src", 8)),
        "./many/": ("many", _index_page(snapshot, "many", 8)),
    }
    assert pinned.first_listed("", 8) is None  # the index is made: it answers
    store.close()


@pytest.mark.parametrize("path", ["", "many", "quotes", "links", "links/to_src", "weird"])
def test_the_early_page_is_the_tool_s_page_its_cursor_and_truncation_too(
    world: HostileWorld, path: str
) -> None:
    # "quotes" holds 4096-byte paths that JSON doubles: the page is cut by bytes, not limit.
    full = PinnedRepository.open(world.repo.git_dir, world.base, world.head)
    for limit in (1, 7, 100, 200):
        held = HeldStore()  # a view of its own each: its index not made until released
        early = PinnedRepository.open(world.repo.git_dir, world.base, world.head, store=held,
                                      early=True)  # fmt: skip
        arguments = ListFilesArguments(path=path, limit=limit)
        assert early.first_listed(path, limit + 1) is not None
        page = list_repository_files(early, arguments)
        assert early._snapshot is None  # the page came from the tree objects
        assert page == list_repository_files(full, arguments), limit
        held.release.set()
        if page["truncated"]:  # the next page, from the early page's cursor, as the index's
            after = ListFilesArguments(path=path, limit=limit, cursor=page["next_cursor"])
            assert list_repository_files(early, after) == list_repository_files(full, after)
        held.close()
