"""Adding a head's missing blobs to its repository's index: inline, or by a build.

An inline add stores a head's few missing blobs in one transaction, within the search that
found them missing (or the head's preparation), and marks the head complete; the fewest go
to the tail, with no posting lists (schema.py), which `post_tail` later lists as a segment.
A build (`build_head`, a background thread that search_index/schedule.py starts) stores
them in batches of BATCH_BYTES, one transaction each, so a killed build loses at most one
batch; it pauses before each while a search runs `git grep`, and marks the head complete at
the end. A head found complete by its blobs alone is marked so too (`mark_found_complete`),
when no other writer holds the lock. Every write holds the folder's write lock; a build
holds its build lock throughout. The vocabulary is the package's (search_index/__init__.py).
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pr_review_api.git.blobs import BlobReaders, lower_priority
from pr_review_api.git.search_index.folder import (
    build_lock,
    current_generation,
    next_generation,
    remove_older_generations,
    write_lock,
    yield_to_searches,
)
from pr_review_api.git.search_index.prepare import read_batch
from pr_review_api.git.search_index.reader import SearchIndex
from pr_review_api.git.search_index.schema import (
    BUSY_SECONDS,
    BuildStopped,
    IndexUnavailable,
    PreparedBlobs,
    file_token,
    mark_complete,
    open_writer,
    truncate_log,
    write_blobs,
    write_tail,
)
from pr_review_api.git_runner import GitError

if TYPE_CHECKING:
    from pr_review_api.git.tree import Snapshot

# How long an inline add waits for another writer (another head's inline add, or a build
# between two transactions) before the search goes on with `git grep`.
INLINE_LOCK_WAIT_SECONDS = 10.0
# One transaction of a build, one segment of posting lists (search_index/postings.py): a
# killed build, or a process that exits, loses at most this. Larger segments mean fewer rows
# a trigram (a search reads one a segment) and the pairs sorted in bulk; the build holds a
# segment's text and pairs in memory (some 32 + 40 MB on source code).
BATCH_BYTES = 32 * 1024**2
BATCH_BLOBS = 8192
PREPARE_MODULE = "pr_review_api.git.search_index.prepare"
# How long a build pauses before a transaction while a search runs `git grep` (a kernel-sized
# one takes 2-3 s): searches then have the cores, and a stream of them cannot stop the build.
YIELD_SECONDS = 2.0


@contextlib.contextmanager
def index_writer(
    index: SearchIndex, *, create: bool = False, wait: float = 0.0
) -> Iterator[sqlite3.Connection | None]:
    """A connection to write the generation `index` reads, holding the write lock; None when
    another writer holds it. Never one to a remade file (its token differs), and (unless
    `create`) never one that makes the file."""
    folder = index.path.parent
    with write_lock(folder, wait) as mine:
        if not mine:
            yield None
            return
        if (not create and not index.path.is_file()) or current_generation(folder) != index.path:
            raise IndexUnavailable()  # gone, or a newer generation took over
        connection = open_writer(index.path)
        try:
            if not index.is_same_file(file_token(connection)):
                raise IndexUnavailable()
            yield connection
        finally:
            connection.close()


def mark_found_complete(index: SearchIndex, snapshot: Snapshot, head_sha: str) -> None:
    """Mark a head found to have no missing blobs complete (not now if another writer holds
    the lock: another time) and remember it."""
    with (
        contextlib.suppress(sqlite3.Error, OSError, IndexUnavailable),
        index_writer(index) as connection,
    ):
        if connection is not None:
            mark_complete(connection, head_sha)
    index.remember_complete(snapshot)


def add_inline(
    readers: BlobReaders,
    git_dir: Path,
    index: SearchIndex,
    missing: list[tuple[str, int]],
    head_sha: str,
    *,
    tail: bool = False,
) -> bool:
    """Store a head's missing blobs (`missing`, from this generation) and mark the head
    complete; whether it was done (not when other writers hold the lock past the wait).
    With `tail`, the blobs go to the tail."""
    try:
        blobs = readers.reader(git_dir).read(oid for oid, _ in missing)
        with index_writer(index, create=True, wait=INLINE_LOCK_WAIT_SECONDS) as connection:
            if connection is None:
                return False  # writers queue past the wait: git grep answers this once
            if tail:
                write_tail(connection, blobs.items())
            else:
                write_blobs(connection, blobs.items())
            mark_complete(connection, head_sha)
            truncate_log(connection)
    except (sqlite3.Error, OSError, GitError, IndexUnavailable):
        return False
    return True


def post_tail(git_dir: Path, index: SearchIndex, stop: threading.Event) -> None:
    """List the tail's blobs in segments (their text read from the index and prepared by a
    process of their own, as a build's are), a batch a transaction; stops when `stop` is
    set, another writer holds the lock or anything fails: a later preparation tries again."""
    with contextlib.suppress(
        sqlite3.Error, OSError, GitError, ValueError, IndexUnavailable, BuildStopped
    ):
        for prepared in prepared_batches(git_dir, index.tail_oids(), index.path):
            with index_writer(index) as connection:
                if connection is None or stop.is_set():
                    return
                write_blobs(connection, prepared, stop)
                truncate_log(connection)


def build_head(  # noqa: PLR0913  (a build thread's whole brief: what to build, how to stop, whom to tell)
    git_dir: Path,
    folder: Path,
    blobs: dict[str, int],
    head_sha: str,
    *,
    fresh: bool,
    stop: threading.Event,
    before_build: Callable[[Path], None] | None,
    on_complete: Callable[[], None],
) -> None:
    """Build the head's index in `folder` (the body of a build thread): store `blobs` (its
    search blobs) that are missing, mark the head complete, remove older generations and call
    `on_complete`. `fresh`: into a new generation. Stops between transactions when `stop` is
    set or the folder is evicted; `before_build(folder)` runs first (the store trims the cache
    the build grows)."""
    lower_priority(threading.get_native_id())
    try:
        with build_lock(folder) as mine:
            if not mine:
                return  # another process builds it; later searches see its progress
            if before_build is not None:
                before_build(folder)
            with write_lock(folder, BUSY_SECONDS) as writing:
                if not writing:
                    return
                path, connection = _build_connection(folder, fresh=fresh)
            try:
                if _store_missing(git_dir, folder, connection, blobs, stop):
                    with write_lock(folder, BUSY_SECONDS) as writing:
                        if writing:
                            mark_complete(connection, head_sha)
                            truncate_log(connection)
                            remove_older_generations(path)
                            on_complete()
            finally:
                connection.close()
    except (sqlite3.Error, OSError, GitError, ValueError, IndexUnavailable, BuildStopped):
        pass  # the index keeps what was committed: searches keep using git grep


def _store_missing(
    git_dir: Path,
    folder: Path,
    connection: sqlite3.Connection,
    blobs: dict[str, int],
    stop: threading.Event,
) -> bool:
    """Store the blobs of `blobs` the generation lacks, a batch a transaction, yielding to
    searches before each; whether all were stored. The batches are read and prepared by
    another process (prepare.py) while this one writes."""
    present = {row[0] for row in connection.execute("SELECT oid FROM blobs")}
    wanted = [oid for oid in blobs if oid not in present]
    yield_to_searches(folder, stop, YIELD_SECONDS)
    for prepared in prepared_batches(git_dir, wanted):
        if stop.is_set() or not folder.is_dir():
            return False  # closing, or the repository was evicted
        yield_to_searches(folder, stop, YIELD_SECONDS)
        with write_lock(folder, BUSY_SECONDS) as writing:
            if not writing:
                return False
            write_blobs(connection, prepared, stop)
        del prepared  # before the next is read: one batch in memory at a time
    return True


def prepared_batches(
    git_dir: Path, oids: list[str], stored_in: Path | None = None
) -> Iterator[PreparedBlobs]:
    """The blobs `oids`, read from git (or from the index file `stored_in`) and prepared in
    batches by a process of their own (prepare.py), at the build's lower priority;
    ValueError when that process fails."""
    source = [] if stored_in is None else [str(stored_in)]
    process = subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-m",
            PREPARE_MODULE,
            str(git_dir),
            str(BATCH_BYTES),
            str(BATCH_BLOBS),
            *source,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    lower_priority(process.pid)
    try:
        with contextlib.suppress(BrokenPipeError):  # it failed at once: its status says
            process.stdin.write("".join(f"{oid}\n" for oid in oids).encode())
            process.stdin.close()
        while True:
            prepared = read_batch(process.stdout)
            if prepared is None:
                break
            yield prepared
            del prepared  # before the next is read: one batch in memory at a time
        if process.wait() != 0:
            raise ValueError("the preparing process failed")
    finally:
        if process.poll() is None:
            process.kill()
        process.stdout.close()
        process.wait()


def _build_connection(folder: Path, *, fresh: bool) -> tuple[Path, sqlite3.Connection]:
    """The generation a build writes: the current one, or a new one when the current is
    stale (`fresh`), corrupt or of another version."""
    path = next_generation(folder) if fresh else current_generation(folder)
    try:
        return path, open_writer(path)
    except sqlite3.OperationalError:
        raise  # busy or unwritable: not a reason to throw the index away
    except (sqlite3.DatabaseError, IndexUnavailable):
        path = next_generation(folder)
        return path, open_writer(path)
