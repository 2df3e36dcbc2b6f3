"""The repository store: everything a process keeps to read repositories fast, owned by one
object with bounds, and closed explicitly.

A `RepositoryStore` holds the snapshot cache (recently indexed heads), the merge bases and
changed files of pinned pairs, the `cat-file` readers (blobs.BlobReaders), the text that
search scans (texts.TextStores), the budgets of preparing a head (limits.PrepareLimits) and a
thread pool of its own for blocking git work, sized from the review concurrency, so one
review's slow work cannot take the threads another's tools need. Nothing of it is
process-global: create one per worker process (the HTTP service in its lifespan, the CLI per
run), hand its `PinnedRepository` views to tools and checks, and `close()` it at the end.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

from pr_review_api.git.blobs import BlobReaders
from pr_review_api.git.limits import UNLIMITED, PrepareLimits, Work
from pr_review_api.git.runner import is_sha, run_git
from pr_review_api.git.texts import TEXT_STORE_MAX_BYTES, TextStores
from pr_review_api.git.tree import BlobSource, Snapshot, derive_snapshot, load_snapshot
from pr_review_api.settings import Settings

if TYPE_CHECKING:
    from pr_review_api.git.repository import PinnedRepository, Revisions

SNAPSHOT_CACHE_SIZE = 8
PAIR_CACHE_SIZE = 256
# Threads beyond one per concurrent review: the tool calls of one round run at once.
EXTRA_THREADS = 8
_V = TypeVar("_V")
_R = TypeVar("_R")


def _wait(event: threading.Event, work: Work) -> None:
    """Wait for another thread's load, no longer than this preparation's deadline."""
    while not event.wait(min(1.0, work.remaining() or 1.0)):
        work.check()
    work.check()


class SnapshotCache:
    """Recently used snapshots, so a head reviewed again needs no new index.

    A head of a repository with a cached snapshot is derived from it (`derive_snapshot`);
    concurrent requests for one head wait for a single load, and while a repository's first
    full load runs, its other new heads wait for it rather than each loading in full.
    """

    def __init__(self, size: int, blobs: Callable[[Path], BlobSource]) -> None:
        self._size = size
        self._blobs = blobs
        self._items: OrderedDict[tuple[str, str], Snapshot] = OrderedDict()
        self._loading: dict[tuple[str, str], threading.Event] = {}
        self._full_loads: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def get(self, git_dir: Path, head_sha: str, work: Work | None = None) -> Snapshot:
        work = work if work is not None else Work()
        key = (str(git_dir), head_sha)
        while True:
            with self._lock:
                if key in self._items:
                    self._items.move_to_end(key)
                    return self._items[key]
                pending = self._loading.get(key)
                if pending is None:
                    self._loading[key] = threading.Event()
                    break
            _wait(pending, work)
        try:
            snapshot = self._load(git_dir, head_sha, work)
            with self._lock:
                self._items[key] = snapshot
                while len(self._items) > self._size:
                    self._items.popitem(last=False)
            return snapshot
        finally:
            with self._lock:
                self._loading.pop(key).set()

    def _load(self, git_dir: Path, head_sha: str, work: Work) -> Snapshot:
        blobs = self._blobs(git_dir)
        repository = str(git_dir)
        with self._lock:
            related = self._latest(repository)
            running = self._full_loads.get(repository) if related is None else None
            if related is None and running is None:
                self._full_loads[repository] = threading.Event()
        if running is not None:
            _wait(running, work)
            with self._lock:
                related = self._latest(repository)
        if related is not None:
            derived = derive_snapshot(
                git_dir, related[1], related[0], head_sha, blobs=blobs, work=work
            )
            return (
                derived
                if derived is not None
                else load_snapshot(git_dir, head_sha, blobs=blobs, work=work)
            )
        if running is not None:  # that full load failed: this one goes on its own
            return load_snapshot(git_dir, head_sha, blobs=blobs, work=work)
        try:
            return load_snapshot(git_dir, head_sha, blobs=blobs, work=work)
        finally:
            with self._lock:
                self._full_loads.pop(repository).set()

    def _latest(self, repository: str) -> tuple[str, Snapshot] | None:
        for (directory, sha), snapshot in reversed(self._items.items()):
            if directory == repository:
                return sha, snapshot
        return None

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


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
        text_store_max_bytes: int = TEXT_STORE_MAX_BYTES,
    ) -> None:
        if limits is None:
            limits = PrepareLimits.from_settings(settings) if settings is not None else UNLIMITED
        if threads is None:
            reviews = settings.pr_review_max_concurrent_reviews if settings is not None else 4
            threads = reviews + EXTRA_THREADS
        self.limits = limits
        self.readers = BlobReaders()
        self.texts = TextStores(self.readers, max_bytes=text_store_max_bytes)
        self.snapshots = SnapshotCache(snapshot_cache_size, self.readers.source)
        self.merge_bases: PairCache[str] = PairCache()
        self.changes: PairCache[list[tuple[str, str]]] = PairCache()
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="pr-review-git")
        self.closed = False

    def work(self, deadline: float | None = None, cancel: threading.Event | None = None) -> Work:
        """A new preparation's budgets; `deadline` is on the `time.monotonic()` clock."""
        work = Work(self.limits, deadline)
        if cancel is not None:
            work.cancel = cancel
        return work

    def open(
        self, git_dir: Path, base_sha: str, head_sha: str, work: Work | None = None
    ) -> PinnedRepository:
        """Pin a base and a head commit (see PinnedRepository.open)."""
        from pr_review_api.git.repository import PinnedRepository  # noqa: PLC0415

        return PinnedRepository.open(git_dir, base_sha, head_sha, store=self, work=work)

    def pin(
        self, git_dir: Path, revisions: Revisions, work: Work | None = None
    ) -> PinnedRepository:
        from pr_review_api.git.repository import PinnedRepository  # noqa: PLC0415

        return PinnedRepository(git_dir, revisions, store=self, work=work)

    def snapshot(self, git_dir: Path, head_sha: str, work: Work | None = None) -> Snapshot:
        """The index of a head, from the cache or made within `work`'s budgets."""
        return self.snapshots.get(git_dir, head_sha, work if work is not None else self.work())

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

    async def run(self, function: Callable[..., _R], /, *args: object) -> _R:
        """Run blocking git work on the store's own threads."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(function, *args))

    def close(self) -> None:
        """Stop the readers and background builds, drop every cache; idempotent."""
        if self.closed:
            return
        self.closed = True
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.texts.close()
        self.readers.close()
        self.snapshots.clear()
        self.merge_bases.clear()
        self.changes.clear()

    def __enter__(self) -> RepositoryStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
