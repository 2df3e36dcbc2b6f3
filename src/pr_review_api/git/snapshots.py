"""The snapshot cache: recently indexed heads, shared by every review of a process.

A head of a repository with a cached snapshot is derived from it (tree.derive_snapshot);
concurrent requests for one head wait for a single load, and while a repository's first full
load runs, its other new heads wait for it rather than each loading in full.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from pr_review_api.git.limits import Work
from pr_review_api.git.tree import BlobSource, Snapshot, derive_snapshot, load_snapshot


def _wait(event: threading.Event, work: Work) -> None:
    """Wait for another thread's load, no longer than this preparation's deadline."""
    while not event.wait(min(1.0, work.remaining() or 1.0)):
        work.check()
    work.check()


class SnapshotCache:
    """Recently used snapshots, so a head reviewed again needs no new index."""

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
