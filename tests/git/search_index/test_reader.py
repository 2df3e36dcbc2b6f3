"""search_index/reader.py: reads of an index generation never write it.

Finding that a head has no missing blobs is a query; marking the head complete is the
scheduler's command, done apart from it. Real repositories, a real SQLite file.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.search_index.folder import current_generation
from pr_review_api.git.search_index.reader import SearchIndex
from pr_review_api.git.search_index.schema import IndexUnavailable, open_writer, write_blobs
from pr_review_api.git.store import RepositoryStore
from tests.gitrepo import GitRepo


def marked_heads(path: Path) -> list[tuple[str]]:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        return connection.execute("SELECT sha FROM heads").fetchall()


def test_finding_no_missing_blobs_writes_nothing_and_the_scheduler_marks_the_head(
    repo: GitRepo, tmp_path: Path
) -> None:
    head = repo.commit_files({f"f{n}.txt": f"needle {n}\n" for n in range(10)})
    with RepositoryStore(cache_dir=tmp_path / "cache") as store:
        store.indexes.min_bytes = 0
        store.indexes.prepare_delay = 3600  # no preparation in the background meanwhile
        pinned = PinnedRepository.open(repo.git_dir, head, head, store=store)
        folder = store.index_dir(repo.git_dir)
        assert folder is not None
        path = current_generation(folder)
        oids = [oid for oid, _ in pinned.snapshot.search_blobs()]
        with contextlib.closing(open_writer(path)) as connection:  # stored, never marked
            write_blobs(connection, store.readers.reader(repo.git_dir).read(oids).items())
        index = SearchIndex(path)
        assert index.missing_blobs(pinned.snapshot) == []
        assert not index.known_complete(pinned.snapshot, head)
        assert marked_heads(path) == []  # the query left the file as it was
        index.close()
        assert store.indexes.complete_index(repo.git_dir, pinned.snapshot, head) is not None
        assert marked_heads(path) == [(head,)]


def test_reading_an_absent_generation_does_not_create_it(tmp_path: Path) -> None:
    path = tmp_path / "search-1.sqlite"
    index = SearchIndex(path)
    with pytest.raises(IndexUnavailable):
        index.stored_ids()
    with pytest.raises(IndexUnavailable):
        index.is_marked_complete("0" * 40)
    assert not path.exists()


# A fresh interpreter opens a head through a store, waits for its preparation and, when
# asked, searches it; it prints whether numpy was ever imported.
_NUMPY_PROBE = """
import sys
from pathlib import Path
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.store import RepositoryStore
from pr_review_api.tools import SearchArguments, execute_tool

git_dir, head, cache = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
min_bytes, search = int(sys.argv[4]), sys.argv[5] == "search"
with RepositoryStore(cache_dir=cache) as store:
    store.indexes.min_bytes = min_bytes
    store.indexes.prepare_delay = 0
    pinned = PinnedRepository.open(git_dir, head, head, store=store)
    store.indexes.wait(git_dir)
    if search:
        found = execute_tool(pinned, "search_repository", SearchArguments(query="needle"))
        assert found.result["matches"], found.result
print("numpy" in sys.modules)
"""


def test_numpy_is_loaded_only_by_a_process_that_reads_an_index(
    repo: GitRepo, tmp_path: Path
) -> None:
    """numpy's import is 13 MB of resident memory and some 175 ms: the store, opening a head,
    its preparation and a `git grep` search leave it out; a search through an index loads it,
    and a process that opens a head whose repository has an index loads it beforehand."""
    head = repo.commit_files({f"f{n}.txt": f"needle {n}\n" for n in range(10)})

    def numpy_loaded(min_bytes: int, action: str) -> str:
        probe = [_NUMPY_PROBE, str(repo.git_dir), head, str(tmp_path), str(min_bytes), action]
        result = subprocess.run(
            [sys.executable, "-c", *probe], capture_output=True, text=True, check=False, timeout=120
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    with RepositoryStore(cache_dir=tmp_path) as store:
        folder = store.index_dir(repo.git_dir)
    assert folder is not None
    assert numpy_loaded(32 * 1024**2, "search") == "False"  # too small to index: git grep
    assert not current_generation(folder).exists()
    assert numpy_loaded(0, "search") == "True"  # indexed, then searched through the index
    assert current_generation(folder).exists()
    assert numpy_loaded(0, "open") == "True"  # no search: loaded by the head's preparation
