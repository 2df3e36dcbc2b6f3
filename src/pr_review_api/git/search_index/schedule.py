"""`SearchIndexes`: the search indexes of a process, and when a head's missing blobs are added.

A search asks `complete_index` for the repository's index. A complete head gets it; a head
with few missing blobs has them added inline and gets it; any other gets None (the search
runs `git grep`) and a build in the background (one per repository, lowered in priority, one
at a time over every process). Opening a head `prepare`s its index the same way, off the
critical path. Each repository's incomplete head is recorded, for a closing one-shot process
to hand to a background build (loop/background_index.py). The vocabulary is the package's
(search_index/__init__.py).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pr_review_api.git.blobs import BlobReaders
from pr_review_api.git.search_index.build import (
    BATCH_BLOBS,
    BATCH_BYTES,
    add_inline,
    build_head,
    mark_found_complete,
    post_tail,
)
from pr_review_api.git.search_index.folder import current_generation, searching
from pr_review_api.git.search_index.reader import SearchIndex
from pr_review_api.git.search_index.schema import IndexUnavailable

if TYPE_CHECKING:
    from pr_review_api.git.tree import Snapshot

# Smaller repositories are searched with `git grep` alone: it answers them in milliseconds.
INDEX_MIN_BYTES = 32 * 1024**2
# A head whose missing blobs are at most this large has them added inline.
INDEX_INLINE_BYTES = 16 * 1024**2
# ... and to the tail, with no posting lists, when they are at most this large (a new head's
# changed files) and the tail holds less than a build's batch (`post_tail` lists it then).
TAIL_ADD_BYTES = 1024**2
# A generation holding this much more than its latest head needs is stale.
STALE_FACTOR = 2
STALE_SLACK_BYTES = 64 * 1024**2
# How long after a head is opened its index is prepared in the background.
PREPARE_DELAY_SECONDS = 0.5
# A head not complete in its index is searched through the part stored (a build under way,
# in this process or another) once at least this share of its text is: the rest is read blob
# by blob through one `cat-file`, about 2.4 times what `git grep <sha>` (two threads) costs a
# byte on the kernel tree (bench.partial: 1.18x its time at 50% stored, 0.52x at 75%), so
# below about 58% `git grep` over the whole tree is the faster.
PARTIAL_MIN_SHARE = 0.65
POSTINGS_MODULE = "pr_review_api.git.search_index.postings"


@dataclass(frozen=True)
class Partial:
    """A head's index in part: the generation, the head's search blobs it stored when asked
    (stored blobs stay stored: a file only grows, and a remade one is another generation,
    which `bodies` refuses), and where the other blobs are read from."""

    index: SearchIndex
    stored: frozenset[str]
    missing: frozenset[str]  # the head's other search blobs
    read: Callable[[list[str]], dict[str, bytes]]


class SearchIndexes:
    """The search indexes of the repositories a `RepositoryStore` reads, and their builds.

    `index_dir` names a repository's index folder (None: this store keeps no indexes, and
    every search runs `git grep`). A build runs `before_build(folder)` first (the store trims
    the cache it grows) and pauses while a search runs `git grep` (`searching`).
    `incomplete_heads()` names what a closing one-shot process leaves undone.
    """

    def __init__(
        self,
        readers: BlobReaders,
        index_dir: Callable[[Path], Path | None],
        *,
        max_bytes: int,
        min_bytes: int = INDEX_MIN_BYTES,
        inline_bytes: int = INDEX_INLINE_BYTES,
        before_build: Callable[[Path], None] | None = None,
    ) -> None:
        self._readers = readers
        self._index_dir = index_dir
        self._before_build = before_build
        self.max_bytes = max_bytes
        self.min_bytes = min_bytes
        self.inline_bytes = inline_bytes
        self.prepare_delay = PREPARE_DELAY_SECONDS
        self._indexes: dict[str, SearchIndex] = {}
        self._builds: dict[str, threading.Thread] = {}
        self._incomplete: dict[str, tuple[Path, str]] = {}  # (git dir, head), by repository
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._preparing: dict[str, int] = {}  # prepare() calls queued or running, by repository
        self._prepared = threading.Condition(self._lock)
        self._pid = os.getpid()

    def complete_index(  # noqa: PLR0911  (one answer per way a head can stand in the index)
        self, git_dir: Path, snapshot: Snapshot, head_sha: str
    ) -> SearchIndex | None:
        """The repository's index when the head (`snapshot` is its tree) is complete in it;
        otherwise None, and the missing blobs are added: inline when they are few, else by a
        build in the background."""
        self._after_fork()
        if self._closing.is_set():
            return None
        index = self._index(git_dir)
        with contextlib.suppress(IndexUnavailable):
            if index is not None and index.known_complete(snapshot, head_sha):
                # No need to weigh the head (a walk over a fresh process's 78,000 entries,
                # the larger part of its first search).
                return self._record_complete(git_dir, head_sha, index)
        total = snapshot.search_bytes()
        if not self.min_bytes <= total <= self.max_bytes:
            return self._record_complete(git_dir, head_sha, None)  # never indexed
        if self._building_head(git_dir, head_sha) or index is None:
            return None  # this process is building this very head in: no need to look
        try:
            missing: list[tuple[str, int]] | None = index.missing_blobs(snapshot)
        except IndexUnavailable:
            missing = None  # not made yet, or unreadable: a build makes (or remakes) it
        if missing == []:
            mark_found_complete(index, snapshot, head_sha)
            return self._record_complete(git_dir, head_sha, index)
        stale = index.size() > STALE_FACTOR * total + STALE_SLACK_BYTES
        # With no index yet every blob is missing: their size is the head's, known already.
        few = (total if missing is None else sum(size for _, size in missing)) <= self.inline_bytes
        if few and not stale:
            wanted = missing if missing is not None else list(dict(snapshot.search_blobs()).items())
            tail = (
                missing is not None
                and sum(size for _, size in missing) <= TAIL_ADD_BYTES
                and self._tail_has_room(index)
            )
            if add_inline(self._readers, git_dir, index, wanted, head_sha, tail=tail):
                with contextlib.suppress(IndexUnavailable):
                    if self._found_complete(index, snapshot, head_sha):
                        return self._record_complete(git_dir, head_sha, index)
                return None
        self._record_incomplete(git_dir, head_sha)
        self._start_build(git_dir, index.path.parent, snapshot, head_sha, fresh=stale)
        return None

    def partial_index(self, git_dir: Path, snapshot: Snapshot) -> Partial | None:
        """The head's index in part, when it stores at least PARTIAL_MIN_SHARE of the text
        a search of the head reads (and not all of it: then `complete_index` answers)."""
        total = snapshot.search_bytes()
        if not self.min_bytes <= total <= self.max_bytes or total == 0:
            return None
        index = self._index(git_dir)
        if index is None:
            return None
        try:
            ids = index.stored_ids()
        except IndexUnavailable:
            return None
        blobs = dict(snapshot.search_blobs())
        stored = frozenset(oid for oid in blobs if oid in ids)
        if sum(blobs[oid] for oid in stored) < PARTIAL_MIN_SHARE * total:
            return None
        missing = frozenset(blobs.keys() - stored)
        return Partial(index, stored, missing, self._readers.reader(git_dir).read)

    @staticmethod
    def _tail_has_room(index: SearchIndex) -> bool:
        """Whether the tail holds less than a build's batch (past it, `post_tail` lists it
        in a segment); False when it cannot be read."""
        try:
            count, size = index.tail_size()
        except IndexUnavailable:
            return False
        return count < BATCH_BLOBS and size < BATCH_BYTES

    def _post_full_tail(self, git_dir: Path) -> None:
        index = self._index(git_dir)
        if index is not None and not self._closing.is_set() and not self._tail_has_room(index):
            post_tail(git_dir, index, self._closing)  # an unreadable one fails, quietly, at once

    @staticmethod
    def _found_complete(index: SearchIndex, snapshot: Snapshot, head_sha: str) -> bool:
        """Whether the head is complete in `index`: known so, or found so by its blobs (and
        then marked complete)."""
        if index.known_complete(snapshot, head_sha):
            return True
        if index.missing_blobs(snapshot):
            return False
        mark_found_complete(index, snapshot, head_sha)
        return True

    def _building_head(self, git_dir: Path, head_sha: str) -> bool:
        """Whether this process runs a build of the repository's index for this very head."""
        with self._lock:
            recorded = self._incomplete.get(str(git_dir), (git_dir, None))[1] == head_sha
        return recorded and self.building(git_dir)

    def _record_incomplete(self, git_dir: Path, head_sha: str) -> None:
        with self._lock:
            self._incomplete[str(git_dir)] = (git_dir, head_sha)

    def _record_complete(
        self, git_dir: Path, head_sha: str, index: SearchIndex | None
    ) -> SearchIndex | None:
        """Forget the repository's incomplete head if it is `head_sha`; returns `index`."""
        with self._lock:
            if self._incomplete.get(str(git_dir), (None, head_sha))[1] == head_sha:
                self._incomplete.pop(str(git_dir), None)
        return index

    def incomplete_heads(self) -> list[tuple[Path, str]]:
        """(git directory, head) of each repository whose index this process last found
        short of a head and has not seen complete since: what a one-shot process that closes
        leaves for a background build (loop.background_index)."""
        with self._lock:
            return list(self._incomplete.values())

    def _index(self, git_dir: Path) -> SearchIndex | None:
        folder = self._index_dir(git_dir)
        if folder is None:
            return None
        key = str(git_dir)
        path = current_generation(folder)
        with self._lock:
            index = self._indexes.get(key)
            if index is None or index.closed or index.path != path:
                if index is not None:
                    index.close()  # a newer generation: the old one is left to its readers
                index = self._indexes[key] = SearchIndex(path)
            return index

    def _start_build(
        self, git_dir: Path, folder: Path, snapshot: Snapshot, head_sha: str, *, fresh: bool
    ) -> None:
        key = str(git_dir)
        if self.building(git_dir):
            return  # a search and the head's preparation both ask: one walk, one build
        blobs = dict(snapshot.search_blobs())  # taken now: the build must not hold the head
        with self._lock:
            running = self._builds.get(key)
            if (running is not None and running.is_alive()) or self._closing.is_set():
                return
            thread = threading.Thread(
                target=build_head,
                args=(git_dir, folder, blobs, head_sha),
                kwargs={
                    "fresh": fresh,
                    "stop": self._closing,
                    "before_build": self._before_build,
                    "on_complete": lambda: self._record_complete(git_dir, head_sha, None),
                },
                name="search-index",
                daemon=True,
            )
            self._builds[key] = thread
            thread.start()  # under the lock: a thread not yet started is not yet alive

    def prepare(self, executor: Executor, git_dir: Path, snapshot: Snapshot, head_sha: str) -> None:
        """Make the head complete on `executor`, without waiting for it, after
        `prepare_delay`: the steps up to a review's first model request come first (a search
        before then asks for the complete index itself)."""
        key = str(git_dir)

        def done() -> None:
            with self._prepared:
                self._preparing[key] -= 1
                self._prepared.notify_all()

        def run() -> None:
            try:
                self.complete_index(git_dir, snapshot, head_sha)
                self._post_full_tail(git_dir)
            finally:
                done()

        def submit() -> None:
            try:
                if self._closing.is_set():
                    raise RuntimeError()
                executor.submit(run)
            except RuntimeError:  # closing, or the executor is shut down: nothing to prepare
                done()

        with self._lock:
            self._preparing[key] = self._preparing.get(key, 0) + 1
        if POSTINGS_MODULE not in sys.modules:
            with contextlib.suppress(RuntimeError):  # the executor is shut down
                executor.submit(self._load_postings, git_dir)
        if self.prepare_delay <= 0:
            submit()
            return
        timer = threading.Timer(self.prepare_delay, submit)
        timer.daemon = True
        timer.start()

    def _load_postings(self, git_dir: Path) -> None:
        """Import the posting lists' module, and numpy (some 175 ms, the package's "numpy"
        note), when the repository has an index a search will read: here, rather than within
        its first search. A repository with no index never loads them."""
        if POSTINGS_MODULE in sys.modules:
            return
        folder = self._index_dir(git_dir)
        if folder is not None and current_generation(folder).exists():
            importlib.import_module(POSTINGS_MODULE)

    def wait(self, git_dir: Path, timeout: float | None = None, *, builds: bool = True) -> None:
        """Wait for this process's preparations of the repository's index and (with `builds`)
        for its build."""
        key = str(git_dir)
        with self._prepared:
            self._prepared.wait_for(lambda: not self._preparing.get(key), timeout)
            thread = self._builds.get(key) if builds else None
        if thread is not None:
            thread.join(timeout)

    def searching(
        self, git_dir: Path, snapshot: Snapshot
    ) -> contextlib.AbstractContextManager[None]:
        """Hold off the repository's index builds while a search of `snapshot` runs
        `git grep` (see `folder.searching`); a repository too small or too large to index
        has none."""
        indexed = self.min_bytes <= snapshot.search_bytes() <= self.max_bytes
        return searching(self._index_dir(git_dir) if indexed else None)

    def building(self, git_dir: Path) -> bool:
        """Whether this process runs a build of the repository's index."""
        with self._lock:
            thread = self._builds.get(str(git_dir))
        return thread is not None and thread.is_alive()

    def _after_fork(self) -> None:
        """A forked child must not use its parent's connections or wait for its threads."""
        if os.getpid() != self._pid:
            self._lock, self._pid = threading.Lock(), os.getpid()
            self._prepared = threading.Condition(self._lock)
            self._indexes, self._builds, self._preparing = {}, {}, {}
            self._incomplete = {}

    def close(self, timeout: float = 5.0) -> None:
        """Stop the builds (they stop between transactions) and close every index."""
        self._closing.set()
        with self._lock:
            threads = list(self._builds.values())
            indexes = list(self._indexes.values())
            self._indexes.clear()
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout)
        for index in indexes:
            index.close()
