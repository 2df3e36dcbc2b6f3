"""blobs.py: the long-lived blob reader.

The reader must answer exactly as a one-shot `git cat-file --batch` does, survive its process
dying or its repository being replaced, and stop when retired. (The search index has its own
tests: test_search_index.py.)
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pr_review_api import git_runner as git_module
from pr_review_api.git import repository
from pr_review_api.git.blobs import BlobReader
from pr_review_api.git.repository import PinnedRepository, resolve_commit
from pr_review_api.git.store import RepositoryStore
from tests.gitrepo import GitRepo, git

# The store of the running test (the `store` fixture, autouse): its readers.
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
    return PinnedRepository.open(git_dir, base, head, store=STORE[-1])


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


def test_the_describer_tells_a_commits_tree_as_rev_parse_peels_it(repo: GitRepo) -> None:
    head = repo.commit_files({"a.txt": "a\n"})
    git(repo.path, "tag", "-a", "v1", "-m", "release")
    tag = git(repo.path, "rev-parse", "v1")
    tree = git(repo.path, "rev-parse", "HEAD^{tree}")
    blob = blob_ids(repo, head)["a.txt"]
    describer = describer_for(repo.git_dir)
    # A tag peels as rev-parse peels it; a blob has no tree and a missing id none: left out.
    assert describer.trees([head, tag, tree, blob, "4" * 40]) == {
        head: tree,
        tag: tree,
        tree: tree,
    }
    with pytest.raises(TypeError):
        reader_for(repo.git_dir).trees([head])
    with pytest.raises(ValueError, match="full SHAs"):
        describer.trees(["HEAD"])
    retired = BlobReader(repo.git_dir, contents=False)
    retired.close(retire=True)
    assert retired.trees([head]) == {}  # the caller asks rev-parse
