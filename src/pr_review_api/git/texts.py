"""The text that search scans in memory instead of running `git grep` over the object store.

`git grep <tree>` must inflate every blob of the tree, deltas and all, on every search: on a
kernel-sized repository that is seconds of CPU per call. A `TextStore` holds the text of one
repository's searchable blobs (regular files of at most 1 MiB without a NUL byte) by blob id,
so every head of the repository shares it and a new head adds only its new blobs. It is
filled in a background thread after a search first needs it (that search runs `git grep`),
read-only from then on, and bounded in bytes over all repositories (`TextStores`, owned by a
`RepositoryStore`); a repository too large for the bound is never stored and keeps searching
with `git grep`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from pr_review_api.git.blobs import BlobReaders, lower_priority, stream_blobs
from pr_review_api.git.runner import GitError

# The text of all searchable blobs, over all repositories: a kernel tree is about 1.2 GB.
TEXT_STORE_MAX_BYTES = 2 * 1024**3
# A new head whose missing blobs are at most this large is completed at once, in the call.
TEXT_STORE_INLINE_BYTES = 16 * 1024**2
# Smaller repositories are searched with `git grep` alone: it answers them in milliseconds.
TEXT_STORE_MIN_BYTES = 32 * 1024**2

BlobList = Callable[[], Iterable[tuple[str, int]]]  # (blob id, size), to be walked on demand


class TextStore:
    """The text of one repository's searchable blobs, by blob id; it only ever grows."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self.texts: dict[str, bytes] = {}
        self.binary: set[str] = set()  # blobs holding a NUL byte: never searched
        self.size = 0
        self.dropped = False  # evicted: no longer grown, freed when the last search ends
        self.building: threading.Thread | None = None

    def missing(self, blobs: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
        """The blobs not yet stored, once each."""
        texts, binary = self.texts, self.binary
        wanted = (blob for blob in blobs if blob[0] not in texts and blob[0] not in binary)
        return list(dict.fromkeys(wanted))

    def add(self, oid: str, data: bytes) -> None:
        if b"\0" in data:
            self.binary.add(oid)
        elif oid not in self.texts:
            self.texts[oid] = data
            self.size += len(data)

    def search(
        self, files: Iterable[tuple[str, str | None]], query: bytes
    ) -> Iterator[tuple[str, int, bytes]]:
        """(path, line number, line) of each line holding `query`, as `git grep -F -n` finds
        them: in the order of `files` (path, blob id or None to skip), each line once,
        without its newline."""
        texts = self.texts
        find = bytes.find
        for path, oid in files:
            if oid is None:
                continue
            data = texts.get(oid)
            if data is None or (position := find(data, query)) < 0:
                continue
            line, counted = 1, 0
            while position >= 0:
                start = data.rfind(b"\n", 0, position) + 1
                end = data.find(b"\n", position)
                if end < 0:
                    end = len(data)
                line += data.count(b"\n", counted, start)
                counted = start
                yield path, line, data[start:end]
                position = data.find(query, end + 1)


class TextStores:
    """The text stores of recently searched repositories, within `max_bytes` in all."""

    def __init__(
        self,
        readers: BlobReaders,
        max_bytes: int = TEXT_STORE_MAX_BYTES,
        min_bytes: int = TEXT_STORE_MIN_BYTES,
        inline_bytes: int = TEXT_STORE_INLINE_BYTES,
    ) -> None:
        self._readers = readers
        self.max_bytes = max_bytes
        self.min_bytes = min_bytes
        self.inline_bytes = inline_bytes
        self._pid = os.getpid()
        self._stores: OrderedDict[str, TextStore] = OrderedDict()
        self._greps: dict[str, int] = {}  # git greps running, by repository
        self._lock = threading.Lock()

    def ready(self, git_dir: Path, total: int, blobs: BlobList, *, build: bool) -> TextStore | None:
        """The store holding every blob of `blobs()` (`total` bytes, distinct), or None; when
        the missing blobs are many and `build` is set, a background thread fetches them."""
        self._after_fork()
        if not self.min_bytes <= total <= self.max_bytes:
            return None
        key = str(git_dir)
        with self._lock:
            store = self._stores.get(key)
            if store is None:
                store = self._stores[key] = TextStore(git_dir)
            self._stores.move_to_end(key)
            building = store.building is not None
        missing = store.missing(blobs())
        if not missing or building:
            return None if missing else store
        needed = sum(size for _, size in missing)
        if store.size + needed > self.max_bytes:
            with self._lock:  # grown by other heads past the bound: start afresh with this one
                store.dropped = True
                store = self._stores[key] = TextStore(git_dir)
            missing, needed = store.missing(blobs()), total
        if needed <= self.inline_bytes:
            self._make_room(store, needed)
            for oid, data in self._readers.reader(git_dir).read(oid for oid, _ in missing).items():
                store.add(oid, data)
            return store if not store.missing(missing) else None
        if build:
            self._start_build(store, missing, needed)
        return None

    def _make_room(self, keep: TextStore, needed: int) -> None:
        with self._lock:
            total = sum(store.size for store in self._stores.values())
            for key, store in list(self._stores.items()):
                if total + needed <= self.max_bytes:
                    break
                if store is not keep and store.building is None:
                    store.dropped = True
                    del self._stores[key]
                    total -= store.size

    def _start_build(self, store: TextStore, missing: list[tuple[str, int]], needed: int) -> None:
        with self._lock:
            if store.building is not None or store.dropped:
                return
            thread = threading.Thread(
                target=self._build, args=(store, missing, needed), name="text-store", daemon=True
            )
            store.building = thread
        thread.start()

    def _build(self, store: TextStore, missing: list[tuple[str, int]], needed: int) -> None:
        try:
            self._make_room(store, needed)
            lower_priority(threading.get_native_id())
            for oid, data in stream_blobs(store.git_dir, [oid for oid, _ in missing]):
                if store.dropped:
                    return
                store.add(oid, data)
        except (OSError, GitError, ValueError):
            pass  # the store stays incomplete: searches keep using git grep
        finally:
            store.building = None

    def wait(self, git_dir: Path, timeout: float | None = None) -> None:
        """Wait for a background build of the repository's store, if one runs."""
        store = self._stores.get(str(git_dir))
        thread = store.building if store is not None else None
        if thread is not None:
            thread.join(timeout)

    def begin_grep(self, git_dir: Path, *, force: bool = False) -> bool:
        """Count a `git grep` about to run on the repository. False (nothing counted) when
        one already runs while the store fills: the caller should wait for the store."""
        key = str(git_dir)
        with self._lock:
            store = self._stores.get(key)
            if not force and store is not None and store.building and self._greps.get(key):
                return False
            self._greps[key] = self._greps.get(key, 0) + 1
            return True

    def end_grep(self, git_dir: Path) -> None:
        key = str(git_dir)
        with self._lock:
            left = self._greps.get(key, 1) - 1
            if left > 0:
                self._greps[key] = left
            else:
                self._greps.pop(key, None)

    def _after_fork(self) -> None:
        """A forked child must not wait for its parent's build threads."""
        if os.getpid() != self._pid:
            self._lock, self._pid = threading.Lock(), os.getpid()
            self._stores, self._greps = OrderedDict(), {}

    def clear(self) -> None:
        with self._lock:
            for store in self._stores.values():
                store.dropped = True
            self._stores.clear()

    @contextlib.contextmanager
    def git_grep_turn(self, git_dir: Path) -> Iterator[bool]:
        """Whether this search should run `git grep` (True, counted until the block ends) or
        wait for the store being filled (False): when many searches of a repository arrive
        before its store is ready, one runs git grep and the others wait for the store, instead
        of each inflating the whole tree at once."""
        turn = self.begin_grep(git_dir)
        try:
            yield turn
        finally:
            if turn:
                self.end_grep(git_dir)

    def close(self, timeout: float = 5.0) -> None:
        """Drop every store and let background builds stop (they check `dropped`)."""
        with self._lock:
            stores = list(self._stores.values())
        self.clear()
        for store in stores:
            thread = store.building
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout)
