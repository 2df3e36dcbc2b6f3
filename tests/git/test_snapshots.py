"""The snapshot cache: a head derived from a cached one is the head loaded afresh.

`derive_snapshot` builds a head's index from another commit's index and the trees'
difference; whatever the difference (files, links that start or stop resolving, directories
that appear or vanish, gitlinks, missing blobs, unspellable names), the result must equal
`load_snapshot`. The cache loads one head once however many reviews ask at the same moment,
and remembers merge bases and changed files of pinned pairs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pr_review_api import git_runner as git_module
from pr_review_api.git import repository, tree
from pr_review_api.git import snapshots as snapshots_module
from pr_review_api.git import store as store_module
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.store import RepositoryStore
from pr_review_api.git.tree import Snapshot, derive_snapshot, load_snapshot
from tests.conftest import examples
from tests.gitrepo import EXECUTABLE, FILE, GITLINK, LINK, Entry, GitRepo, git
from tests.hostile.world import HostileWorld, build_hostile_world


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> HostileWorld:
    return build_hostile_world(tmp_path_factory.mktemp("hostile"))


@pytest.fixture
def store() -> Iterator[RepositoryStore]:
    with RepositoryStore() as fresh:
        yield fresh


def same(left: Snapshot, right: Snapshot) -> None:
    assert left.entries == right.entries
    assert left.directories == right.directories
    assert left.link_targets == right.link_targets
    assert left.files == right.files
    assert left.link_paths() == right.link_paths()
    # A link judged again only when a path its resolution looked at changed: the paths it
    # looked at are the paths a fresh resolution looks at.
    assert left.link_deps() == right.link_deps()


def count_full_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The heads the snapshot cache loads in full from now on (not derived)."""
    loads: list[str] = []
    real_load = tree.load_snapshot

    def counting(git_dir: Path, sha: str, **kwargs: Any) -> Snapshot:
        loads.append(sha)
        return real_load(git_dir, sha, **kwargs)

    monkeypatch.setattr(snapshots_module, "load_snapshot", counting)
    return loads


def test_derived_snapshots_equal_fresh_loads_both_ways(world: HostileWorld) -> None:
    git_dir = world.repo.git_dir
    base, head = load_snapshot(git_dir, world.base), load_snapshot(git_dir, world.head)
    up = derive_snapshot(git_dir, base, world.base, world.head)
    down = derive_snapshot(git_dir, head, world.head, world.base)
    assert up is not None
    assert down is not None
    same(up, head)
    same(down, base)


def test_a_missing_blob_is_absent_from_a_derived_snapshot(repo: GitRepo) -> None:
    base = repo.commit_files({"ok.txt": "fine\n"})
    ok = git(repo.path, "rev-parse", "HEAD:ok.txt")
    tree = git(
        repo.path,
        "mktree",
        "--missing",
        input_bytes=f"100644 blob {ok}\tok.txt\n100644 blob {'1' * 40}\tgone.txt\n".encode(),
    )
    head = git(repo.path, "commit-tree", tree, "-p", base, "-m", "missing")
    derived = derive_snapshot(repo.git_dir, load_snapshot(repo.git_dir, base), base, head)
    assert derived is not None
    same(derived, load_snapshot(repo.git_dir, head))
    assert "gone.txt" not in derived.entries


def test_a_difference_too_large_is_loaded_afresh(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = repo.commit_files({"a.txt": "a\n"})
    head = repo.commit_files({f"d/{n}.txt": "x\n" for n in range(10)})
    monkeypatch.setattr(tree, "MAX_DERIVED_CHANGES", 5)
    assert derive_snapshot(repo.git_dir, load_snapshot(repo.git_dir, base), base, head) is None


def test_an_unknown_commit_cannot_be_derived_from(repo: GitRepo) -> None:
    head = repo.commit_files({"a.txt": "a\n"})
    known = load_snapshot(repo.git_dir, head)
    assert derive_snapshot(repo.git_dir, known, "1" * 40, head) is None


# Trees made of a few names, so that edits collide: a file becomes a directory, a link starts
# to resolve when its target appears, a directory link loses its directory.
NAMES = ["a", "b", "d/x", "d/y", "d/e/z", "l1", "l2", "d/l3", "d/e/l4", "sub", "a.c", "d-e"]
TARGETS = [
    b"a",
    b"d",
    b"d/x",
    b"../a",
    b"l2",
    b"l1",
    b"missing",
    b"/etc/passwd",
    b"d/e",
    b".",
    b"d/l3/x",
    b"../l3",
    b"../../d/e/z",
    b"l1/x",
]


def entry_strategy() -> st.SearchStrategy[Entry]:
    return st.one_of(
        st.tuples(st.sampled_from([FILE, EXECUTABLE]), st.binary(max_size=8)),
        st.tuples(st.just(LINK), st.sampled_from(TARGETS)),
    )


def tree_strategy() -> st.SearchStrategy[dict[str, Entry]]:
    return st.dictionaries(st.sampled_from(NAMES), entry_strategy(), max_size=len(NAMES))


def consistent(entries: dict[str, Entry]) -> dict[str, Entry]:
    """Drop entries that would also have to be directories ("d" as a file beside "d/x")."""
    directories = {
        "/".join(path.split("/")[:n]) for path in entries for n in range(1, path.count("/") + 1)
    }
    return {path: entry for path, entry in entries.items() if path not in directories}


@pytest.fixture(scope="module")
def rooted(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitRepo, str]:
    """A repository and its root commit, for every example below: each example commits new
    objects on the root and moves no ref, so one repository serves them all."""
    repo = GitRepo(tmp_path_factory.mktemp("derive") / "repo")
    return repo, repo.commit_files({"root.txt": "root\n"})


@settings(max_examples=examples(40), deadline=None)
@given(old=tree_strategy(), new=tree_strategy(), gitlink=st.booleans())
def test_any_derived_snapshot_equals_a_fresh_load(
    rooted: tuple[GitRepo, str],
    old: dict[str, Entry],
    new: dict[str, Entry],
    gitlink: bool,
) -> None:
    repo, root = rooted
    if gitlink:
        new = {**new, "sub": (GITLINK, root.encode())}
    first = repo.commit_tree(consistent({"keep.txt": (FILE, b"k\n"), **old}), parent=root)
    second = repo.commit_tree(consistent({"keep.txt": (FILE, b"k\n"), **new}), parent=first)
    known = load_snapshot(repo.git_dir, first)
    derived = derive_snapshot(repo.git_dir, known, first, second)
    assert derived is not None
    same(derived, load_snapshot(repo.git_dir, second))


def test_a_new_head_of_a_cached_repository_is_derived(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch, store: RepositoryStore
) -> None:
    base = repo.commit_files({"a.txt": "a\n", "b.txt": "b\n"})
    head = repo.commit_files({"c.txt": "c\n"})
    PinnedRepository.open(repo.git_dir, base, base, store=store)
    loads = count_full_loads(monkeypatch)
    pinned = PinnedRepository.open(repo.git_dir, base, head, store=store)
    assert loads == []
    assert pinned.snapshot.files == ["a.txt", "b.txt", "c.txt"]


def test_concurrent_reviews_of_a_new_repository_load_it_once(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch, store: RepositoryStore
) -> None:
    base = repo.commit_files({"a.txt": "a\n"})
    heads = [repo.commit_files({f"f{n}.txt": f"{n}\n"}) for n in range(6)]
    loads: list[str] = []
    real_load = tree.load_snapshot
    gate = threading.Event()

    def slow_load(git_dir: Path, sha: str, **kwargs: Any) -> Snapshot:
        loads.append(sha)
        gate.wait(5)
        return real_load(git_dir, sha, **kwargs)

    monkeypatch.setattr(snapshots_module, "load_snapshot", slow_load)
    pinned: list[PinnedRepository] = []
    threads = [
        threading.Thread(
            target=lambda h=head: pinned.append(
                PinnedRepository.open(repo.git_dir, base, h, store=store)
            )
        )
        for head in [heads[0], heads[0], heads[0], *heads[1:]]
    ]
    for thread in threads:
        thread.start()
    gate.set()
    for thread in threads:
        thread.join()
    assert len(loads) == 1  # one full load; every other head derived from it
    assert len(pinned) == len(threads)
    by_head = {p.revisions.head_sha: p.snapshot for p in pinned}
    for head, snapshot in by_head.items():
        same(snapshot, real_load(repo.git_dir, head))
    assert len({id(p.snapshot) for p in pinned if p.revisions.head_sha == heads[0]}) == 1


def test_merge_bases_and_changed_files_are_remembered(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch, store: RepositoryStore
) -> None:
    base = repo.commit_files({"a.txt": "a\n"})
    head = repo.commit_files({"b.txt": "b\n"})
    first = PinnedRepository.open(repo.git_dir, base, head, store=store)
    changes = first.changed_files()
    changes.append(("M", "mutated by a caller"))
    calls: list[list[str]] = []
    real_run = git_module.run_git

    def recording(git_dir: Path | None, args: list[str], **kwargs: object) -> object:
        calls.append(list(args))
        return real_run(git_dir, args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(repository, "run_git", recording)
    monkeypatch.setattr(store_module, "run_git", recording)
    again = PinnedRepository.open(repo.git_dir, base, head, store=store)
    assert again.revisions == first.revisions
    assert again.changed_files() == [("A", "b.txt")]
    assert calls == []


def test_a_blob_that_goes_missing_or_comes_back_is_derived_as_loaded(repo: GitRepo) -> None:
    base = repo.commit_files({"x.txt": "present\n", "to_x": "x"})
    present = git(repo.path, "rev-parse", "HEAD:x.txt")
    link = git(repo.path, "hash-object", "-w", "--stdin", input_bytes=b"x.txt")

    def commit(blob: str) -> str:
        listing = f"100644 blob {blob}\tx.txt\n120000 blob {link}\tto_x\n"
        tree = git(repo.path, "mktree", "--missing", input_bytes=listing.encode())
        return git(repo.path, "commit-tree", tree, "-p", base, "-m", "x")

    gone, back = commit("4" * 40), commit(present)
    for old, new in ((back, gone), (gone, back)):
        derived = derive_snapshot(repo.git_dir, load_snapshot(repo.git_dir, old), old, new)
        assert derived is not None
        same(derived, load_snapshot(repo.git_dir, new))
    assert load_snapshot(repo.git_dir, gone).files == []
    assert load_snapshot(repo.git_dir, back).files == ["to_x", "x.txt"]
