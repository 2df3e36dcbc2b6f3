"""The repository store: everything a process keeps to read repositories fast, owned by one
object with bounds, and closed explicitly.

A `RepositoryStore` holds the snapshot cache (recently indexed heads), the merge bases and
changed files of pinned pairs, the files read at base commits (loop/repo_config.py), the
`cat-file` readers (blobs.BlobReaders), the search indexes on disk and their builds
(search_index.schedule.SearchIndexes), the budgets of preparing a head (limits.PrepareLimits)
and a thread pool of its own for blocking git work, sized from the
review concurrency, so one review's slow work cannot take the threads another's tools need.
Nothing of it is process-global: create one per worker process (the HTTP service in its
lifespan, the CLI per run), pin heads with `PinnedRepository.open(..., store=store)`, and
`close()` it at the end. `before_build(index folder)` runs before a search index is built
(the process's cache trims itself there: loop.workspace.repository_store).

A store made for one pinned repository alone (`PinnedRepository.open` without a store) is
closed once that repository is garbage (`close_when_collected`), on a thread of its own.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import hashlib
import logging
import os
import queue
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from pr_review_api.cache_layout import CacheLayout, index_dir_of
from pr_review_api.git.blobs import BlobReaders
from pr_review_api.git.limits import UNLIMITED, PrepareLimits, Work
from pr_review_api.git.search_index.schedule import SearchIndexes
from pr_review_api.git.snapshots import SnapshotCache
from pr_review_api.git.tree import Snapshot
from pr_review_api.git_runner import is_sha, run_git
from pr_review_api.settings import Settings

logger = logging.getLogger(__name__)

SNAPSHOT_CACHE_SIZE = 8
PAIR_CACHE_SIZE = 256
# Base commits whose configuration and instruction files are kept (at most 112 KiB each).
BASE_FILES_CACHE_SIZE = 32
# Threads beyond one per concurrent review: the tool calls of one round run at once.
EXTRA_THREADS = 8
_V = TypeVar("_V")
_R = TypeVar("_R")


class PairCache(OrderedDict[tuple[str, str, str], _V]):
    """Answers about pinned pairs of commits (merge bases, changed files): commits never
    change, so an answer is kept until it is the least recently used of `size`."""

    def __init__(self, size: int = PAIR_CACHE_SIZE) -> None:
        super().__init__()
        self._size = size
        self._lock = threading.Lock()

    def remember(self, key: tuple[str, str, str], value: _V) -> None:
        with self._lock:
            self[key] = value
            while len(self) > self._size:
                self.popitem(last=False)

    def recall(self, key: tuple[str, str, str]) -> _V | None:
        with self._lock:
            value = self.get(key)
            if value is not None:
                self.move_to_end(key)
            return value


class RepositoryStore:
    """Snapshots, readers, search text, budgets and an executor for one process."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        limits: PrepareLimits | None = None,
        threads: int | None = None,
        snapshot_cache_size: int = SNAPSHOT_CACHE_SIZE,
        cache_dir: Path | None = None,
        before_build: Callable[[Path], None] | None = None,
    ) -> None:
        if limits is None:
            limits = PrepareLimits.from_settings(settings) if settings is not None else UNLIMITED
        if threads is None:
            reviews = settings.pr_review_max_concurrent_reviews if settings is not None else 4
            threads = reviews + EXTRA_THREADS
        self.limits = limits
        if cache_dir is None and settings is not None:
            cache_dir = settings.pr_review_cache_dir
        self.cache_dir = cache_dir
        self.readers = BlobReaders()
        cache_bytes = settings.pr_review_cache_max_bytes if settings is not None else 20 * 1024**3
        # An index holds about 0.83 bytes a byte of text (the kernel tree, large bodies
        # compressed; 1.23 before): a quarter of the cache for its text.
        self.indexes = SearchIndexes(
            self.readers, self.index_dir, max_bytes=cache_bytes // 4, before_build=before_build
        )
        self.snapshots = SnapshotCache(snapshot_cache_size, self.readers.source, self.index_dir)
        self.merge_bases: PairCache[str] = PairCache()
        self.changes: PairCache[list[tuple[str, str]]] = PairCache()
        # (git dir, base commit, files wanted): what loop/repo_config.read_base_files found.
        self.base_files: PairCache[dict[str, tuple[str, bytes | None]]] = PairCache(
            BASE_FILES_CACHE_SIZE
        )
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="pr-review-git")
        # Preparing new heads' search indexes, one at a time: fifty heads opened at once would
        # otherwise hold fifty of the reviews' threads, each waiting for the index's one writer.
        self.index_executor = ThreadPoolExecutor(1, thread_name_prefix="pr-review-index")
        self.closed = False

    def index_dir(self, git_dir: Path) -> Path | None:
        """Where the on-disk indexes of a repository live (search text, snapshots), or None
        when this store has no cache directory.

        A repository of the pull-request cache (`<cache>/repositories/<key>/git`, see
        `pr_review_api.cache_layout`) keeps them beside its object store, so they count in
        the cache's size and go when it is evicted; any other repository gets a folder of its
        own in the cache, named by a hash of its real path, which the same eviction bounds.
        Nothing in the name comes from the repository's content.
        """
        if self.cache_dir is None:
            return None
        layout = CacheLayout(self.cache_dir)
        folder = layout.cached_repository_of(git_dir)
        if folder is None:
            key = hashlib.sha256(os.fsencode(os.path.realpath(git_dir))).hexdigest()[:32]
            folder = layout.repository(key)
        return index_dir_of(folder)

    def work(self, deadline: float | None = None, cancel: threading.Event | None = None) -> Work:
        """A new preparation's budgets; `deadline` is on the `time.monotonic()` clock."""
        work = Work(self.limits, deadline)
        if cancel is not None:
            work.cancel = cancel
        return work

    def snapshot(self, git_dir: Path, head_sha: str, work: Work | None = None) -> Snapshot:
        """The index of a head, from the cache or made within `work`'s budgets. The head's
        search index is made ready in the background, off the review's critical path."""
        snapshot = self.snapshots.get(git_dir, head_sha, work if work is not None else self.work())
        if not self.closed:
            self.indexes.prepare(self.index_executor, git_dir, snapshot, head_sha)
        return snapshot

    def merge_base(self, git_dir: Path, base_sha: str, head_sha: str) -> str:
        """The merge base of two commits, or `base_sha` when they have none."""
        key = (str(git_dir), base_sha, head_sha)
        known = self.merge_bases.recall(key)
        if known is not None:
            return known
        found = run_git(git_dir, ["merge-base", base_sha, head_sha], check=False)
        merge_base = found.stdout.decode().strip() if found.returncode == 0 else base_sha
        if found.returncode == 0 and is_sha(merge_base):
            self.merge_bases.remember(key, merge_base)
            return merge_base
        return base_sha

    async def run(self, function: Callable[..., _R], /, *args: object, **kwargs: object) -> _R:
        """Run blocking git work on the store's own threads."""
        loop = asyncio.get_running_loop()
        call = functools.partial(function, *args, **kwargs)
        return await loop.run_in_executor(self.executor, call)

    def close(self) -> None:
        """Stop the readers and background builds, drop every cache; idempotent."""
        if self.closed:
            return
        self.closed = True
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.index_executor.shutdown(wait=False, cancel_futures=True)
        self.indexes.close()
        self.readers.close()
        self.snapshots.flush()
        self.snapshots.clear()
        self.merge_bases.clear()
        self.changes.clear()
        self.base_files.clear()

    def __enter__(self) -> RepositoryStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


# Stores whose owner is garbage, closed by one thread (`close_when_collected`).
_COLLECTED: queue.SimpleQueue[RepositoryStore] = queue.SimpleQueue()
_closer_lock = threading.Lock()
_closer_started = False
_exiting = False


def close_when_collected(owner: object, store: RepositoryStore) -> None:
    """Close `store` once `owner` is garbage.

    Not inside the garbage collection: it runs on whatever thread allocates at that moment,
    even one inside this store's own executor holding the executor's lock, and closing there
    waits on that lock forever, and with it every executor of the process (a test hung so).
    The collection only hands the store to a closer thread (`SimpleQueue.put` may be called
    from a weakref callback). At exit, where no collection runs, the finalizer closes it in
    place, as before, so its snapshots are still saved."""
    weakref.finalize(owner, _collected, store)
    global _closer_started  # noqa: PLW0603  (one closer thread for the process)
    with _closer_lock:
        if _closer_started:
            return
        _closer_started = True
        # Registered after weakref.finalize's own exit hook (made by the finalize above), so
        # it runs before it: the finalizers that run at exit then close in place.
        atexit.register(_close_at_exit)
    threading.Thread(target=_close_collected, name="pr-review-store-closer", daemon=True).start()


def _collected(store: RepositoryStore) -> None:
    if _exiting:
        store.close()
    else:
        _COLLECTED.put(store)


def _close_collected() -> None:
    while True:
        store = _COLLECTED.get()
        try:
            store.close()
        except Exception as exc:  # as a finalizer's error: reported, and the closer goes on
            logger.warning("a repository store could not be closed: %s", type(exc).__name__)


def _close_at_exit() -> None:
    global _exiting  # noqa: PLW0603  (read by the finalizers that run after this)
    _exiting = True
    while True:
        try:
            store = _COLLECTED.get_nowait()
        except queue.Empty:
            return
        store.close()
