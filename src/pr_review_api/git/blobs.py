"""Blob content, fast: one long-lived `git cat-file --batch` per repository, and the text that
search scans in memory instead of running `git grep` over the object store.

Reading a blob through a new `git cat-file` costs a process start and the loading of the
pack indexes, several milliseconds, on every call; `BlobReader` keeps one process per
repository (`reader_for`: content; `describer_for`: types and sizes) and asks it under a lock,
so a read costs a pipe round trip. Readers live in a small pool; one that is dropped from the
pool or left idle is stopped, and a reader whose repository directory was replaced starts a
new process.

`git grep <tree>` must inflate every blob of the tree, deltas and all, on every search: on a
kernel-sized repository that is seconds of CPU per call. A `TextStore` holds the text of one
repository's searchable blobs (regular files of at most 1 MiB without a NUL byte) by blob id,
so every head of the repository shares it and a new head adds only its new blobs. It is
filled in a background thread after a search first needs it (that search runs `git grep`),
read-only from then on, and bounded in bytes over all repositories; a repository too large for
the bound is never stored and keeps searching with `git grep`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import subprocess
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO

from pr_review_api.git.runner import (
    GitConfig,
    GitError,
    git_command,
    git_environment,
    is_sha,
    run_git,
)

READ_TIMEOUT_SECONDS = 120.0
READER_POOL_SIZE = 16  # readers: up to two per repository
READER_IDLE_SECONDS = 300.0
_CHUNK_OIDS = 1000  # 41 KB of requests: always fits a pipe, so writing never blocks
_READ_SIZE = 1 << 20

# The text of all searchable blobs, over all repositories: a kernel tree is about 1.2 GB.
TEXT_STORE_MAX_BYTES = 2 * 1024**3
# A new head whose missing blobs are at most this large is completed at once, in the call.
TEXT_STORE_INLINE_BYTES = 16 * 1024**2
# Smaller repositories are searched with `git grep` alone: it answers them in milliseconds.
TEXT_STORE_MIN_BYTES = 32 * 1024**2


class _ReaderBroken(Exception):
    """The cat-file process died or answered out of protocol."""


Answer = tuple[str, int, bytes]  # an object's type, size and (for --batch) content


class BlobReader:
    """A persistent `git cat-file --batch` (or `--batch-check`, with `contents=False`) for one
    git directory, safe to share across threads."""

    def __init__(self, git_dir: Path, *, contents: bool = True) -> None:
        self.git_dir = git_dir
        self.contents = contents
        self.last_used = time.monotonic()
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._identity: tuple[int, int] | None = None
        self._buffer = bytearray()
        self._retired = False

    def read(self, oids: Iterable[str]) -> dict[str, bytes]:
        """The content of each object that exists, by id; missing objects are left out."""
        if not self.contents:
            raise TypeError("a --batch-check reader has no contents")
        return {oid: data for oid, (_, _, data) in self._ask(oids).items()}

    def describe(self, oids: Iterable[str]) -> dict[str, tuple[str, int]]:
        """The type and size of each object that exists, by id."""
        return {oid: (kind, size) for oid, (kind, size, _) in self._ask(oids).items()}

    def close(self, *, retire: bool = False) -> None:
        """Stop the process; a retired reader reads through one-shot processes from then on."""
        with self._lock:
            self._retired = self._retired or retire
            self._stop_locked()

    def _ask(self, oids: Iterable[str]) -> dict[str, Answer]:
        wanted = list(dict.fromkeys(oids))
        if not wanted:
            return {}
        if not all(is_sha(oid) for oid in wanted):
            raise ValueError("object ids must be full SHAs")  # a newline would forge a request
        with self._lock:
            self.last_used = time.monotonic()
            if self._retired:
                return _ask_once(self.git_dir, wanted, contents=self.contents)
            try:
                return self._ask_locked(wanted)
            except (_ReaderBroken, OSError):
                self._stop_locked()
            try:  # one retry on a fresh process: the old one may have been killed
                return self._ask_locked(wanted)
            except (_ReaderBroken, OSError):
                self._stop_locked()
                raise GitError(["cat-file"], -1, b"") from None

    def _ask_locked(self, wanted: list[str]) -> dict[str, Answer]:
        process = self._ensure_process()
        assert process.stdin is not None
        deadline = time.monotonic() + READ_TIMEOUT_SECONDS
        answers: dict[str, Answer] = {}
        for start in range(0, len(wanted), _CHUNK_OIDS):
            chunk = wanted[start : start + _CHUNK_OIDS]
            process.stdin.write("".join(f"{oid}\n" for oid in chunk).encode())
            process.stdin.flush()
            for oid in chunk:
                header = self._read_line(deadline).split()
                if len(header) != 3:  # "<oid> missing"
                    continue
                if header[0].decode() != oid or not header[2].isdigit():
                    raise _ReaderBroken()
                size = int(header[2])
                data = self._read_exactly(size + 1, deadline)[:size] if self.contents else b""
                answers[oid] = (header[1].decode(), size, data)
        return answers

    def _ensure_process(self) -> subprocess.Popen[bytes]:
        identity = _identity(self.git_dir)
        if self._process is not None and (
            self._process.poll() is not None or identity != self._identity
        ):
            self._stop_locked()
        if self._process is None:
            mode = "--batch" if self.contents else "--batch-check"
            self._process = subprocess.Popen(
                git_command(self.git_dir, ["cat-file", mode]),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=git_environment(GitConfig()),
                cwd=self.git_dir,
            )
            self._identity = identity
            self._buffer.clear()
        return self._process

    def _fill(self, deadline: float) -> None:
        assert self._process is not None
        assert self._process.stdout is not None
        fd = self._process.stdout.fileno()
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise _ReaderBroken()  # git stalled: the process is replaced
        chunk = os.read(fd, _READ_SIZE)
        if not chunk:
            raise _ReaderBroken()
        self._buffer += chunk

    def _read_line(self, deadline: float) -> bytes:
        while (end := self._buffer.find(b"\n")) < 0:
            self._fill(deadline)
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        return line

    def _read_exactly(self, size: int, deadline: float) -> bytes:
        while len(self._buffer) < size:
            self._fill(deadline)
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def _stop_locked(self) -> None:
        process, self._process = self._process, None
        self._buffer.clear()
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        process.wait()


def _identity(git_dir: Path) -> tuple[int, int] | None:
    try:
        status = os.stat(git_dir)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def _ask_once(git_dir: Path, wanted: Sequence[str], *, contents: bool) -> dict[str, Answer]:
    """Ask one short-lived `git cat-file --batch` (or `--batch-check`)."""
    mode = "--batch" if contents else "--batch-check"
    data = run_git(
        git_dir, ["cat-file", mode], input_bytes="".join(f"{o}\n" for o in wanted).encode()
    ).stdout
    answers: dict[str, Answer] = {}
    offset = 0
    for oid in wanted:
        header_end = data.index(b"\n", offset)
        header = data[offset:header_end].split()
        offset = header_end + 1
        if len(header) != 3:
            continue
        size = int(header[2])
        if contents:
            answers[oid] = (header[1].decode(), size, data[offset : offset + size])
            offset += size + 1
        else:
            answers[oid] = (header[1].decode(), size, b"")
    return answers


class _ReaderPool:
    """The readers of recently used repositories; the least recently used ones are stopped."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._readers: OrderedDict[tuple[str, bool], BlobReader] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, git_dir: Path, *, contents: bool) -> BlobReader:
        key = (str(git_dir), contents)
        now = time.monotonic()
        dropped: list[BlobReader] = []
        with self._lock:
            reader = self._readers.get(key)
            if reader is None:
                reader = self._readers[key] = BlobReader(git_dir, contents=contents)
            self._readers.move_to_end(key)
            while len(self._readers) > self._size:
                dropped.append(self._readers.popitem(last=False)[1])
            dropped += [
                self._readers.pop(other)
                for other, idle in list(self._readers.items())
                if other != key and now - idle.last_used > READER_IDLE_SECONDS
            ]
        for old in dropped:
            old.close(retire=True)
        return reader

    def forget(self) -> None:
        self._lock = threading.Lock()
        self._readers = OrderedDict()

    def close_all(self) -> None:
        with self._lock:
            readers = list(self._readers.values())
            self._readers.clear()
        for reader in readers:
            reader.close(retire=True)


_readers = _ReaderPool(READER_POOL_SIZE)
atexit.register(_readers.close_all)


def reader_for(git_dir: Path) -> BlobReader:
    """The shared `cat-file --batch` reader of a repository: content."""
    return _readers.get(git_dir, contents=True)


def describer_for(git_dir: Path) -> BlobReader:
    """The shared `cat-file --batch-check` reader of a repository: types and sizes."""
    return _readers.get(git_dir, contents=False)


# --- the text that search scans ---------------------------------------------------------------

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


class _TextStores:
    """The text stores of recently searched repositories, within TEXT_STORE_MAX_BYTES."""

    def __init__(self) -> None:
        self._stores: OrderedDict[str, TextStore] = OrderedDict()
        self._greps: dict[str, int] = {}  # git greps running, by repository
        self._lock = threading.Lock()

    def ready(self, git_dir: Path, total: int, blobs: BlobList, *, build: bool) -> TextStore | None:
        """The store holding every blob of `blobs()` (`total` bytes, distinct), or None; when
        the missing blobs are many and `build` is set, a background thread fetches them."""
        if not TEXT_STORE_MIN_BYTES <= total <= TEXT_STORE_MAX_BYTES:
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
        if store.size + needed > TEXT_STORE_MAX_BYTES:
            with self._lock:  # grown by other heads past the bound: start afresh with this one
                store.dropped = True
                store = self._stores[key] = TextStore(git_dir)
            missing, needed = store.missing(blobs()), total
        if needed <= TEXT_STORE_INLINE_BYTES:
            self._make_room(store, needed)
            for oid, data in reader_for(git_dir).read(oid for oid, _ in missing).items():
                store.add(oid, data)
            return store if not store.missing(missing) else None
        if build:
            self._start_build(store, missing, needed)
        return None

    def _make_room(self, keep: TextStore, needed: int) -> None:
        with self._lock:
            total = sum(store.size for store in self._stores.values())
            for key, store in list(self._stores.items()):
                if total + needed <= TEXT_STORE_MAX_BYTES:
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
            _lower_priority(threading.get_native_id())
            for oid, data in _stream_blobs(store.git_dir, [oid for oid, _ in missing]):
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

    def forget(self) -> None:
        self._lock = threading.Lock()
        self._stores = OrderedDict()
        self._greps = {}

    def clear(self) -> None:
        with self._lock:
            for store in self._stores.values():
                store.dropped = True
            self._stores.clear()


_stores = _TextStores()


def _forget_parent_state() -> None:
    """A forked child must not use the parent's pipes, nor wait for its build threads."""
    _readers.forget()
    _stores.forget()


os.register_at_fork(after_in_child=_forget_parent_state)


def text_store(
    git_dir: Path, total: int, blobs: BlobList, *, build: bool = True
) -> TextStore | None:
    """The repository's text store when it holds all of `blobs()` (`_TextStores.ready`)."""
    return _stores.ready(git_dir, total, blobs, build=build)


def wait_for_text_store(git_dir: Path, timeout: float | None = None) -> None:
    """Block until a background build for the repository, if any, has finished."""
    _stores.wait(git_dir, timeout)


@contextlib.contextmanager
def git_grep_turn(git_dir: Path) -> Iterator[bool]:
    """Whether this search should run `git grep` (True, counted until the block ends) or
    wait for the store being filled (False): when many searches of a repository arrive
    before its store is ready, one runs git grep and the others wait for the store, instead
    of each inflating the whole tree at once."""
    turn = _stores.begin_grep(git_dir)
    try:
        yield turn
    finally:
        if turn:
            _stores.end_grep(git_dir)


def clear_text_stores() -> None:
    """Forget every text store (tests and benches)."""
    _stores.clear()


def _lower_priority(thread_id: int) -> None:
    """Let a background build use only what the reviews leave (Linux: per-thread nice)."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, thread_id, 10)


def _stream_blobs(git_dir: Path, oids: list[str]) -> Iterator[tuple[str, bytes]]:
    """Each blob's content, through one `git cat-file --batch` fed by a writer thread."""
    process = subprocess.Popen(
        git_command(git_dir, ["cat-file", "--batch"]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=git_environment(GitConfig()),
        cwd=git_dir,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    _lower_priority(process.pid)

    def feed(stream: IO[bytes]) -> None:
        try:
            for start in range(0, len(oids), _CHUNK_OIDS):
                stream.write(
                    "".join(f"{oid}\n" for oid in oids[start : start + _CHUNK_OIDS]).encode()
                )
            stream.close()
        except OSError:
            pass  # the reader stopped early and killed git

    writer = threading.Thread(target=feed, args=(process.stdin,), daemon=True)
    writer.start()
    try:
        for oid in oids:
            header = process.stdout.readline().split()
            if len(header) != 3:
                continue  # missing
            if header[0].decode() != oid or not header[2].isdigit():
                raise ValueError("cat-file answered out of order")
            size = int(header[2])
            data = process.stdout.read(size + 1)
            if len(data) != size + 1:
                raise ValueError("cat-file output ended early")
            yield oid, data[:size]
    finally:
        if process.poll() is None:
            process.kill()
        process.stdout.close()
        process.wait()
        writer.join()
