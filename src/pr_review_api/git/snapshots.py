"""The snapshot cache: recently indexed heads, shared by every review of a process.

A head of a repository with a cached snapshot is derived from it (tree.derive_snapshot);
concurrent requests for one head wait for a single load, and while a repository's first full
load runs, its other new heads wait for it rather than each loading in full.

With an index folder per repository (`index_dir`), the first head a process needs of a
repository seen before is derived from the snapshot a process saved there
(snapshot_file.py); each new snapshot is saved in turn, on a thread of its own once the
review has it, at most once per `save_interval` seconds per repository unless it was a
full load.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar, cast

from pr_review_api.git import snapshot_file
from pr_review_api.git.allocator import release_free_memory
from pr_review_api.git.limits import Work
from pr_review_api.git.search_index.folder import yield_to_searches
from pr_review_api.git.tree import (
    BlobSource,
    Snapshot,
    derive_snapshot,
    load_snapshot,
    tree_changes,
)

# Saving the kernel tree's snapshot costs about 0.1 s of CPU: a busy service does it for a
# repository at most this often (a full load is always saved: it is what a save spares).
SAVE_INTERVAL_SECONDS = 60.0
# A save waits this long first, so its CPU goes to a review that awaits its model, not to
# the steps between the snapshot and the first model request.
SAVE_DELAY_SECONDS = 1.0
# And it waits at most this long more while a search of the repository runs `git grep`.
SAVE_YIELD_SECONDS = 10.0


_T = TypeVar("_T")


class Background(Generic[_T]):
    """A call run on a daemon thread of its own; `result()` waits for it (within a
    preparation's deadline) and raises what it raised."""

    def __init__(self, function: Callable[..., _T], *args: object) -> None:
        self._done = threading.Event()
        self._value: _T | None = None
        self._error: BaseException | None = None
        self._call = functools.partial(function, *args)
        threading.Thread(target=self._run, daemon=True, name="pr-review-snapshot").start()

    def _run(self) -> None:
        try:
            self._value = self._call()
        except BaseException as error:  # handed to whoever waits for the result
            self._error = error
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def result(self, work: Work) -> _T:
        _wait(self._done, work)
        if self._error is not None:
            raise self._error
        return cast("_T", self._value)


def _wait(event: threading.Event, work: Work) -> None:
    """Wait for another thread's load, no longer than this preparation's deadline."""
    while not event.wait(min(1.0, work.remaining() or 1.0)):
        work.check()
    work.check()


class SnapshotCache:
    """Recently used snapshots, so a head reviewed again needs no new index."""

    def __init__(
        self,
        size: int,
        blobs: Callable[[Path], BlobSource],
        index_dir: Callable[[Path], Path | None] | None = None,
        save_interval: float = SAVE_INTERVAL_SECONDS,
        save_delay: float = SAVE_DELAY_SECONDS,
    ) -> None:
        self._size = size
        self._blobs = blobs
        self._index_dir = index_dir
        self._save_interval = save_interval
        self._save_delay = save_delay
        self._saved_at: dict[str, float] = {}
        self._pending: dict[str, tuple[Path, str, Snapshot]] = {}
        self._savers: dict[str, threading.Thread] = {}
        self._items: OrderedDict[tuple[str, str], Snapshot] = OrderedDict()
        self._loading: dict[tuple[str, str], threading.Event] = {}
        self._full_loads: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._flush = threading.Event()

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
            if derived is not None:
                self._save_later(git_dir, head_sha, derived, full=False)
                return derived
            return self._full_load(git_dir, head_sha, blobs, work)
        if running is not None:  # that full load failed: this one goes on its own
            return self._full_load(git_dir, head_sha, blobs, work)
        try:
            saved = self._from_saved(git_dir, head_sha, blobs, work)
            return saved if saved is not None else self._full_load(git_dir, head_sha, blobs, work)
        finally:
            with self._lock:
                self._full_loads.pop(repository).set()

    def _full_load(self, git_dir: Path, head_sha: str, blobs: BlobSource, work: Work) -> Snapshot:
        snapshot = load_snapshot(git_dir, head_sha, blobs=blobs, work=work)
        release_free_memory(len(snapshot.entries))  # before the save allocates (allocator.py)
        self._save_later(git_dir, head_sha, snapshot, full=True)
        return snapshot

    def _from_saved(
        self, git_dir: Path, head_sha: str, blobs: BlobSource, work: Work
    ) -> Snapshot | None:
        """The head made from the snapshot saved for this repository, or None."""
        directory = self._index_dir(git_dir) if self._index_dir is not None else None
        saved_sha = snapshot_file.saved_head(directory) if directory is not None else None
        if directory is None or saved_sha is None:
            return None
        # While the file is read, git compares the two trees and the size reader starts (on a
        # cold page cache each costs tens of milliseconds, mostly waiting for the disk).
        changes = Background(tree_changes, git_dir, saved_sha, head_sha)
        Background(blobs.describe, [head_sha])
        saved = snapshot_file.load(directory, work.limits.max_index_bytes)
        if saved is None or saved[0] != saved_sha:
            return None
        snapshot = saved[1]
        if saved_sha == head_sha:
            work.add_entries(len(snapshot.entries) + len(snapshot.directories), 0)
            return snapshot
        derived = derive_snapshot(
            git_dir,
            snapshot,
            saved_sha,
            head_sha,
            blobs=blobs,
            work=work,
            changes=changes.result(work),
        )
        if derived is not None:
            self._save_later(git_dir, head_sha, derived, full=False)
        return derived

    def _save_later(self, git_dir: Path, head_sha: str, snapshot: Snapshot, *, full: bool) -> None:
        """Save a new snapshot as the repository's latest, on a thread of the repository's
        own that writes the newest one asked for (and that the interpreter waits for at exit,
        so a one-shot process leaves its file whole)."""
        directory = self._index_dir(git_dir) if self._index_dir is not None else None
        if directory is None:
            return
        repository = str(git_dir)
        now = time.monotonic()
        with self._lock:
            last = self._saved_at.get(repository)
            if not full and last is not None and now - last < self._save_interval:
                return
            self._saved_at[repository] = now
            self._pending[repository] = (directory, head_sha, snapshot)
            if repository in self._savers:
                return  # the running saver writes this one next
            saver = threading.Thread(
                target=self._saver, args=(repository,), name="pr-review-snapshot-save"
            )
            self._savers[repository] = saver
            saver.start()  # under the lock: wait_for_saves never meets an unstarted saver

    def _saver(self, repository: str) -> None:
        try:
            while True:
                self._flush.wait(self._save_delay)  # set by close(): save now, then stop
                with self._lock:
                    pending = self._pending.pop(repository, None)
                    if pending is None:  # under the lock: a new ask starts a new saver
                        del self._savers[repository]
                        return
                # A cache: a full disk or a folder gone away (a test's, an evicted
                # repository's) costs the next process a full load, nothing more.
                with contextlib.suppress(OSError):
                    # A first search runs `git grep` meanwhile, wanting every core.
                    yield_to_searches(pending[0], self._flush, SAVE_YIELD_SECONDS)
                    snapshot_file.save(*pending)
        except BaseException:
            with self._lock:
                self._savers.pop(repository, None)
            raise

    def wait_for_saves(self, timeout: float | None = None) -> None:
        """Let the saves asked for so far finish (tests, and a caller about to exit)."""
        with self._lock:
            savers = list(self._savers.values())
        for saver in savers:
            saver.join(timeout)

    def _latest(self, repository: str) -> tuple[str, Snapshot] | None:
        for (directory, sha), snapshot in reversed(self._items.items()):
            if directory == repository:
                return sha, snapshot
        return None

    def flush(self) -> None:
        """Write the pending saves now rather than after their delay (the store is closing,
        and a one-shot process should not wait out the delay at exit)."""
        self._flush.set()

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
