"""Blob content, fast: one long-lived `git cat-file --batch` per repository.

Reading a blob through a new `git cat-file` costs a process start and the loading of the
pack indexes, several milliseconds, on every call; `BlobReader` keeps one process per
repository (content, or `--batch-check` for types and sizes) and asks it under a lock, so a
read costs a pipe round trip. `BlobReaders` is the small pool a `RepositoryStore` owns: a
reader dropped from it or left idle is stopped, a reader whose repository directory was
replaced starts a new process, and `close()` stops them all. Nothing here is process-global:
a pool used in a forked child forgets the parent's pipes (it notices the new pid).
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO

from pr_review_api.git_runner import (
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

    def trees(self, commits: Iterable[str]) -> dict[str, str]:
        """The tree each commit names, as `rev-parse <commit>^{tree}` tells it (a batch-check
        reader takes a revision as well as an id); one git cannot tell is left out, as are
        all when the reader fails (the caller asks `rev-parse`, which says why)."""
        if self.contents:
            raise TypeError("trees are told by a --batch-check reader")
        wanted = list(dict.fromkeys(commits))
        if not all(is_sha(oid) for oid in wanted):
            raise ValueError("object ids must be full SHAs")
        with self._lock:
            self.last_used = time.monotonic()
            if self._retired or not wanted:
                return {}
            try:
                return self._trees_locked(wanted)
            except (_ReaderBroken, OSError):
                self._stop_locked()
                return {}

    def _trees_locked(self, wanted: list[str]) -> dict[str, str]:
        process = self._ensure_process()
        assert process.stdin is not None
        deadline = time.monotonic() + READ_TIMEOUT_SECONDS
        process.stdin.write("".join(f"{oid}^{{tree}}\n" for oid in wanted).encode())
        process.stdin.flush()
        trees: dict[str, str] = {}
        for oid in wanted:
            header = self._read_line(deadline).split()  # "<tree> tree <size>" or "... missing"
            if len(header) == 3 and header[1] == b"tree" and is_sha(tree := header[0].decode()):
                trees[oid] = tree
        return trees

    def count_lines(self, oids: Iterable[str], max_bytes: int) -> dict[str, int]:
        """Lines (as an editor numbers them) of each blob that exists, reading at most its first
        `max_bytes` as a stream: memory stays at one pipe read however large the blob. A blob
        larger than that counts the lines that begin within its first `max_bytes` + 1 bytes."""
        if not self.contents:
            raise TypeError("a --batch-check reader has no contents")
        wanted = list(dict.fromkeys(oids))
        if not all(is_sha(oid) for oid in wanted):
            raise ValueError("object ids must be full SHAs")
        counts: dict[str, int] = {}
        with self._lock:
            self.last_used = time.monotonic()
            for oid in wanted:
                try:
                    found = self._count_locked(oid, max_bytes)
                except (_ReaderBroken, OSError):
                    self._stop_locked()
                    raise GitError(["cat-file"], -1, b"") from None
                if found is not None:
                    counts[oid] = found
            if self._retired:
                self._stop_locked()
        return counts

    def _count_locked(self, oid: str, max_bytes: int) -> int | None:
        process = self._ensure_process()
        assert process.stdin is not None
        deadline = time.monotonic() + READ_TIMEOUT_SECONDS
        process.stdin.write(f"{oid}\n".encode())
        process.stdin.flush()
        header = self._read_line(deadline).split()
        if len(header) != 3:
            return None
        if header[0].decode() != oid or not header[2].isdigit():
            raise _ReaderBroken()
        size = int(header[2])
        left = min(size, max_bytes)
        newlines, last = 0, b"\n"
        while left > 0:
            if not self._buffer:
                self._fill(deadline)
            piece = bytes(self._buffer[:left])
            del self._buffer[: len(piece)]
            newlines += piece.count(b"\n")
            last = piece[-1:]
            left -= len(piece)
        if size > max_bytes:
            self._stop_locked()  # the rest is never read: a new process answers next time
        else:
            self._read_exactly(1, deadline)  # the newline after the content
        # Bytes past the cap mean one more line begins (or goes on) there: counted unread.
        return newlines + (1 if size > max_bytes or last != b"\n" else 0)

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
                return ask_once(self.git_dir, wanted, contents=self.contents)
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


def ask_once(git_dir: Path, wanted: Sequence[str], *, contents: bool) -> dict[str, Answer]:
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


class BlobReaders:
    """The readers of recently used repositories; the least recently used ones are stopped."""

    def __init__(self, size: int = READER_POOL_SIZE) -> None:
        self._size = size
        self._readers: OrderedDict[tuple[str, bool], BlobReader] = OrderedDict()
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._closed = False

    def get(self, git_dir: Path, *, contents: bool) -> BlobReader:
        if os.getpid() != self._pid:  # a forked child must not use the parent's pipes
            self._lock, self._readers, self._pid = threading.Lock(), OrderedDict(), os.getpid()
        key = (str(git_dir), contents)
        now = time.monotonic()
        dropped: list[BlobReader] = []
        with self._lock:
            reader = self._readers.get(key)
            if reader is None:
                reader = BlobReader(git_dir, contents=contents)
                if self._closed:  # a closed pool answers through one-shot processes
                    reader.close(retire=True)
                    return reader
                self._readers[key] = reader
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

    def reader(self, git_dir: Path) -> BlobReader:
        """The repository's `cat-file --batch` reader: content."""
        return self.get(git_dir, contents=True)

    def describer(self, git_dir: Path) -> BlobReader:
        """The repository's `cat-file --batch-check` reader: types and sizes."""
        return self.get(git_dir, contents=False)

    def source(self, git_dir: Path) -> RepositoryBlobs:
        """The repository's blobs through this pool (a tree.BlobSource)."""
        return RepositoryBlobs(self, git_dir)

    def close(self) -> None:
        """Stop every reader; later reads use one-shot processes."""
        with self._lock:
            self._closed = True
            readers = list(self._readers.values())
            self._readers.clear()
        if os.getpid() != self._pid:
            return  # the parent's processes are the parent's to stop
        for reader in readers:
            reader.close(retire=True)


class RepositoryBlobs:
    """One repository's content and sizes through a pool's readers."""

    def __init__(self, readers: BlobReaders, git_dir: Path) -> None:
        self._readers = readers
        self._git_dir = git_dir

    def read(self, oids: Iterable[str]) -> dict[str, bytes]:
        return self._readers.reader(self._git_dir).read(oids)

    def describe(self, oids: Iterable[str]) -> dict[str, tuple[str, int]]:
        return self._readers.describer(self._git_dir).describe(oids)


def lower_priority(thread_id: int) -> None:
    """Let a background build use only what the reviews leave (Linux: per-thread nice; never
    raised back for a thread already lower, as a background process's are)."""
    with contextlib.suppress(AttributeError, OSError):
        current = os.getpriority(os.PRIO_PROCESS, thread_id)
        os.setpriority(os.PRIO_PROCESS, thread_id, max(current, 10))


def stream_blobs(git_dir: Path, oids: list[str]) -> Iterator[tuple[str, bytes]]:
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
    lower_priority(process.pid)

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
