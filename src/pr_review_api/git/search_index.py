"""The search index: a repository's searchable text on disk, shared by every process.

`git grep <tree>` inflates every blob of the tree on every search, seconds of CPU on a
kernel-sized repository, and a text store in memory costs each process its own gigabyte and a
fill. A `SearchIndex` is one SQLite file per repository, in its index folder
(`RepositoryStore.index_dir`, inside the cache, so the cache's bound and eviction cover it),
named `search-<generation>.sqlite`: a remade index is a new generation, never the old name.

    blobs(id INTEGER PRIMARY KEY, oid TEXT UNIQUE)   every stored blob, small rows
    bodies(id INTEGER PRIMARY KEY, body BLOB)        the text of each (none: holds a NUL byte)
    grams   FTS5, trigram tokenizer, case-sensitive, contentless, by blobs.id
    heads(sha TEXT PRIMARY KEY)   commits whose every searchable blob is stored
    about(token)                  a random name of this file: a remade file has another

Each blob is stored once, by id, so every head of the repository shares the file and a new
head adds only its new blobs. A head found complete is noted in `heads`, so a new process
knows it in one look-up instead of checking each of the head's blobs. A search asks `grams`
for the blobs holding every trigram of the literal (a few, for a rare literal, in
milliseconds), then finds the literal in those bodies itself: the index only narrows, the
exact match and every rule of `git grep -F -n -I` decide.
Bodies are indexed as Latin-1 text, one character per byte, so a byte string and its trigrams
map one to one whatever the file's encoding.

Why SQLite (in the standard library): transactions make a killed build leave whole blobs or
none, WAL lets any number of processes read while one writes, and FTS5 is the trigram index we
would otherwise write by hand. Any SQLite error makes the index count as absent: search falls
back to `git grep`, never fails because of it.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import re
import secrets
import sqlite3
import stat
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import Executor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pr_review_api.git.blobs import BlobReaders, lower_priority, stream_blobs
from pr_review_api.git.runner import GitError

if TYPE_CHECKING:
    from pr_review_api.git.tree import Snapshot

# An index file is `search-<generation>.sqlite`; the highest generation is the current one.
_GENERATION = re.compile(r"search-([1-9][0-9]{0,8})\.sqlite")
SCHEMA_VERSION = 3
# Smaller repositories are searched with `git grep` alone: it answers them in milliseconds.
INDEX_MIN_BYTES = 32 * 1024**2
# A new head whose missing blobs are at most this large is completed at once, in the call.
INDEX_INLINE_BYTES = 16 * 1024**2
# How long adding a new head's few blobs waits for another writer (another head's few blobs,
# or a build between two transactions) before the search goes on with `git grep`.
INLINE_LOCK_WAIT_SECONDS = 10.0
# One transaction of a build: a killed build, or a process that exits, loses at most this.
BATCH_BYTES = 4 * 1024**2
BATCH_BLOBS = 4000
# How long a build pauses before a transaction while a search runs `git grep` (a kernel-sized
# one takes 2-3 s): searches then have the cores, and a stream of them cannot stop the build.
YIELD_SECONDS = 2.0
# An index holding this much more than its latest head needs (old heads' blobs) is rebuilt.
STALE_FACTOR = 2
STALE_SLACK_BYTES = 64 * 1024**2
# Files a search reads before it asks the trigram index (see search.grep_index).
PROBE_FILES = 128
# A literal gives at most this many trigrams to the index: more would narrow little more.
MAX_QUERY_GRAMS = 16
# Blob ids bound in one query (SQLite allows 999 or more).
MAX_QUERY_VARIABLES = 512
_BODIES = (
    "SELECT blobs.oid, bodies.body FROM blobs LEFT JOIN bodies ON bodies.id = blobs.id "
    "WHERE blobs.oid IN ({})"  # one "?" a blob id: the ids themselves are bound
)
BUSY_SECONDS = 5.0
# How long after a head is opened its index is prepared in the background.
PREPARE_DELAY_SECONDS = 0.5

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS blobs(id INTEGER PRIMARY KEY, oid TEXT UNIQUE NOT NULL)",
    "CREATE TABLE IF NOT EXISTS bodies(id INTEGER PRIMARY KEY, body BLOB NOT NULL)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS grams USING fts5("
    "body, tokenize='trigram case_sensitive 1', detail='none', content='')",
    "CREATE TABLE IF NOT EXISTS heads(sha TEXT PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS about(token TEXT NOT NULL)",
)


class IndexUnavailable(Exception):
    """The index file could not be opened or read (absent, corrupt, another version)."""


def trigram_query(query: bytes) -> str | None:
    """An FTS5 query matching the bodies that hold every trigram of `query`, or None when the
    literal is too short to have one."""
    text = query.decode("latin-1")
    grams = list(dict.fromkeys(text[i : i + 3] for i in range(len(text) - 2)))
    if not grams:
        return None
    if len(grams) > MAX_QUERY_GRAMS:  # spread over the literal: both ends and between
        step = (len(grams) - 1) / (MAX_QUERY_GRAMS - 1)
        grams = [grams[round(i * step)] for i in range(MAX_QUERY_GRAMS)]
    return " AND ".join('"' + gram.replace('"', '""') + '"' for gram in grams)


def matching_lines(data: bytes, query: bytes) -> Iterator[tuple[int, bytes]]:
    """(line number, line without its newline) of each line of `data` holding `query`, as
    `git grep -F -n` numbers and cuts them; each line once."""
    position = data.find(query)
    line, counted = 1, 0
    while position >= 0:
        start = data.rfind(b"\n", 0, position) + 1
        end = data.find(b"\n", position)
        if end < 0:
            end = len(data)
        line += data.count(b"\n", counted, start)
        counted = start
        yield line, data[start:end]
        position = data.find(query, end + 1)


class _Reader:
    """A thread's read-only connection, and the lock that `close` takes so it never closes a
    connection in the middle of a query (closing one in use from another thread crashes)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.lock = threading.Lock()
        self.closed = False


class SearchIndex:
    """One repository's index file. Safe to share across threads: each thread reads through a
    connection of its own."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._readers: list[_Reader] = []
        self._ids: dict[str, int] = {}  # stored blobs (text or binary), by blob id
        self._last_id = 0
        self._covered: dict[int, weakref.ref[Snapshot]] = {}
        self._lock = threading.Lock()
        self.token: str | None = None  # of the file this object reads (about.token)
        self.closed = False

    # --- reading ---

    def _reader(self) -> _Reader:
        reader: _Reader | None = getattr(self._local, "reader", None)
        if reader is not None:
            return reader
        if self.closed or not _own_file(self.path):
            raise IndexUnavailable()  # never created by a reader: sqlite would make an empty one
        try:
            connection = sqlite3.connect(
                self.path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error:
            raise IndexUnavailable() from None
        try:
            connection.execute("PRAGMA query_only = 1")
            token = _token(connection)
        except (sqlite3.Error, IndexUnavailable):
            token = None
        reader = _Reader(connection)
        with self._lock:
            if self.token is None:
                self.token = token
            if token is None or token != self.token or self.closed:
                # Remade since this object first read it: what it remembers is of the old file.
                self.closed = True
                connection.close()
                raise IndexUnavailable()
            self._readers.append(reader)
        self._local.reader = reader
        return reader

    def _query(self, sql: str, parameters: tuple[object, ...]) -> list[tuple[Any, ...]]:
        """All rows of a read; any failure is IndexUnavailable."""
        reader = self._reader()
        with reader.lock:
            if reader.closed:
                raise IndexUnavailable()
            try:
                rows: list[tuple[Any, ...]] = reader.connection.execute(sql, parameters).fetchall()
            except sqlite3.Error:
                raise IndexUnavailable() from None
        return rows

    def stored(self) -> dict[str, int]:
        """The row id of every stored blob, read incrementally (the file only grows)."""
        rows = self._query("SELECT id, oid FROM blobs WHERE id > ? ORDER BY id", (self._last_id,))
        with self._lock:
            self._ids.update((oid, row_id) for row_id, oid in rows)
            if rows:  # in id order: the last is the newest
                self._last_id = max(self._last_id, rows[-1][0])
            return self._ids

    def missing(self, blobs: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
        """The blobs not stored yet, once each."""
        ids = self.stored()
        return list(dict.fromkeys(blob for blob in blobs if blob[0] not in ids))

    def unstored(self, snapshot: Snapshot, head_sha: str) -> list[tuple[str, int]]:
        """The blobs a search of `snapshot` (the tree of `head_sha`) reads that are not stored
        yet, once each; none when the index covers the head (remembered per snapshot, and
        noted in the file per head).

        A head derived from one the file notes complete (`Snapshot.origin`) is checked by the
        blobs of the files that differ from it alone: a service's every new head costs its few
        changes here, not a walk over the tree."""
        if self.noted(snapshot, head_sha):
            return []
        origin = snapshot.origin
        if origin is not None and self._has_head(origin.sha):
            missing = self.missing(origin.blobs())
        else:
            missing = self.missing(snapshot.search_blobs())
        if missing:
            return missing
        with (
            contextlib.suppress(sqlite3.Error, OSError, IndexUnavailable),
            self.writer() as connection,
        ):
            if connection is not None:  # else busy: noted another time
                note_head(connection, head_sha)
        self._remember(snapshot)
        return []

    def noted(self, snapshot: Snapshot, head_sha: str) -> bool:
        """Whether the index is known to cover the head without a look at its blobs: for this
        snapshot already, or because the file notes the head complete."""
        known = self._covered.get(id(snapshot))
        if known is not None and known() is snapshot:
            return True
        if not self._has_head(head_sha):
            return False
        self._remember(snapshot)
        return True

    def _remember(self, snapshot: Snapshot) -> None:
        with self._lock:
            self._covered = {k: ref for k, ref in self._covered.items() if ref() is not None}
            self._covered[id(snapshot)] = weakref.ref(snapshot)

    def covers(self, snapshot: Snapshot, head_sha: str) -> bool:
        """Whether every blob a search of `snapshot` (the tree of `head_sha`) reads is stored."""
        return not self.unstored(snapshot, head_sha)

    def _has_head(self, sha: str) -> bool:
        return bool(self._query("SELECT 1 FROM heads WHERE sha = ?", (sha,)))

    def candidates(self, query: bytes) -> set[str] | None:
        """The blob ids of the text bodies that may hold `query`; None when any may (a literal
        shorter than a trigram)."""
        expression = trigram_query(query)
        if expression is None:
            return None
        rows = self._query(
            "SELECT oid FROM blobs WHERE id IN (SELECT rowid FROM grams WHERE grams MATCH ?)",
            (expression,),
        )
        return {row[0] for row in rows}

    def bodies(self, oids: Collection[str]) -> dict[str, bytes | None]:
        """The stored text of each blob, None for one holding a NUL byte; IndexUnavailable
        when one is not stored (the file was remade, or the caller's head is not covered)."""
        wanted = list(dict.fromkeys(oids))
        found: dict[str, bytes | None] = {}
        for start in range(0, len(wanted), MAX_QUERY_VARIABLES):
            chunk = wanted[start : start + MAX_QUERY_VARIABLES]
            rows = self._query(_BODIES.format(",".join("?" * len(chunk))), tuple(chunk))
            found.update(rows)
        if len(found) != len(wanted):
            raise IndexUnavailable()
        return found

    def lines(
        self, files: Iterable[tuple[str, str | None]], query: bytes
    ) -> Iterator[tuple[str, int, bytes]]:
        """(path, line number, line) of each line holding `query`, as `git grep -F -n` finds
        them, in the order of `files` (path, blob id or None to skip). Bodies are read one
        first, then more at a time: a common literal fills a search's cap in its first files."""
        files, read = iter(files), 0
        # 1, 1, 2, 4, 8...: a chunk never reaches past the next power of two, where a search
        # may switch to asking the trigram index (search.grep_index).
        while part := list(itertools.islice(files, min(max(read, 1), MAX_QUERY_VARIABLES))):
            read += len(part)
            bodies = self.bodies([oid for _, oid in part if oid is not None])
            for path, oid in part:
                data = bodies[oid] if oid is not None else None
                if data is not None:
                    for line, text in matching_lines(data, query):
                        yield path, line, text

    def size(self) -> int:
        """Bytes on disk, the write-ahead log included."""
        total = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                total += os.stat(f"{self.path}{suffix}").st_size
        return total

    @contextlib.contextmanager
    def writer(
        self, *, create: bool = False, wait: float = 0.0
    ) -> Iterator[sqlite3.Connection | None]:
        """A connection to write the file this object reads, holding the build lock; None when
        another writer holds it. Never one to a remade file (its token differs), and (unless
        `create`) never one that makes the file."""
        with write_lock(self.path.parent, wait) as mine:
            if not mine:
                yield None
                return
            if (not create and not self.path.is_file()) or current_index(
                self.path.parent
            ) != self.path:
                raise IndexUnavailable()  # gone, or a newer generation took over
            connection = _writer(self.path)
            try:
                token = _token(connection)
                with self._lock:
                    if self.token is None:
                        self.token = token
                    elif token != self.token:
                        raise IndexUnavailable()
                yield connection
            finally:
                connection.close()

    def close(self) -> None:
        with self._lock:
            self.closed = True
            readers, self._readers = self._readers, []
        for reader in readers:
            with reader.lock, contextlib.suppress(sqlite3.Error):
                reader.closed = True
                reader.connection.close()


# --- writing -------------------------------------------------------------------------------


def _own_file(path: Path) -> bool:
    """Whether `path` is a regular file this user owns and only this user may write: an index
    another user could have written is never read."""
    try:
        status = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_ISREG(status.st_mode)
        and status.st_uid == os.geteuid()
        and not status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def _writer(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(
        FileExistsError
    ):  # private before SQLite opens it (its logs copy the mode)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    if not _own_file(path):
        raise IndexUnavailable()
    connection = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            raise IndexUnavailable()
        if version == 0:
            connection.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA:
                connection.execute(statement)
            connection.execute("INSERT INTO about(token) VALUES (?)", (secrets.token_hex(16),))
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            connection.execute("COMMIT")
    except BaseException:
        connection.close()
        raise
    return connection


def _token(connection: sqlite3.Connection) -> str:
    """The file's random name; IndexUnavailable for a file of another version."""
    if connection.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
        raise IndexUnavailable()
    row = connection.execute("SELECT token FROM about").fetchone()
    if row is None:
        raise IndexUnavailable()
    return str(row[0])


class _Stopped(Exception):
    """A build was asked to stop in the middle of a transaction (rolled back)."""


def write_blobs(
    connection: sqlite3.Connection,
    blobs: Iterable[tuple[str, bytes]],
    stop: threading.Event | None = None,
) -> None:
    """Store blobs in one transaction: all of them or, if anything fails or `stop` is set,
    none (`_Stopped`)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        for oid, data in blobs:
            if stop is not None and stop.is_set():
                raise _Stopped()
            body = None if b"\0" in data else data
            cursor = connection.execute("INSERT OR IGNORE INTO blobs(oid) VALUES (?)", (oid,))
            if cursor.rowcount == 1 and body is not None:
                connection.execute(
                    "INSERT INTO bodies(id, body) VALUES (?, ?)", (cursor.lastrowid, body)
                )
                connection.execute(
                    "INSERT INTO grams(rowid, body) VALUES (?, ?)",
                    (cursor.lastrowid, body.decode("latin-1")),
                )
        connection.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise


def note_head(connection: sqlite3.Connection, head_sha: str) -> None:
    """Note that every searchable blob of `head_sha` is stored."""
    connection.execute("INSERT OR IGNORE INTO heads(sha) VALUES (?)", (head_sha,))


def generations(folder: Path) -> list[tuple[int, Path]]:
    """The index files of a folder, oldest first."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = [
        (int(match[1]), folder / name) for name in names if (match := _GENERATION.fullmatch(name))
    ]
    return sorted(found)


def current_index(folder: Path) -> Path:
    """The file searches read: the newest generation (the first, if there is none yet)."""
    found = generations(folder)
    return found[-1][1] if found else folder / "search-1.sqlite"


def next_index(folder: Path) -> Path:
    """A new generation's file. A remade index never reuses a name: a connection to the old
    file that closes late deletes its write-ahead log by name, which would be the new one's."""
    found = generations(folder)
    return folder / f"search-{(found[-1][0] if found else 0) + 1}.sqlite"


def remove_older(path: Path) -> None:
    """Delete the generations older than `path` (readers keep what they have open)."""
    for _, older in generations(path.parent):
        if older == path:
            return
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{older}{suffix}")


def build_lock(folder: Path) -> contextlib.AbstractContextManager[bool]:
    """Whether this process may build the folder's index now: one build at a time, over every
    process. A build writes its transactions under `write_lock`, between which others write."""
    return _flock(folder, "build.lock", 0.0)


def write_lock(folder: Path, wait: float) -> contextlib.AbstractContextManager[bool]:
    """Whether this process may write the folder's index now, waiting up to `wait` seconds:
    one writer at a time, and no generation removed while one writes."""
    return _flock(folder, "write.lock", wait)


@contextlib.contextmanager
def searching(folder: Path | None) -> Iterator[None]:
    """Held, shared, while a search of the folder's repository runs `git grep` for want of a
    complete index: background work (a build between its transactions, a snapshot's save)
    pauses meanwhile (`yield_to_searches`), so on a small machine the search has the cores."""
    if folder is None:
        yield  # a repository without an index: no build to pause
        return
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        # Made here if need be: the build this search has just started may not have made it
        # yet, and would otherwise find no search to wait for.
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(folder / "searching.lock", flags, 0o600)
    except OSError:
        yield  # an unwritable folder: the search goes on regardless
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_SH)  # a build holds it exclusively only to look
        yield
    finally:
        os.close(fd)


def yield_to_searches(folder: Path, stop: threading.Event, most: float) -> None:
    """Wait, at most `most` seconds, while a search of the repository runs `git grep` (the
    background work of a build or a snapshot's save)."""
    try:
        fd = os.open(folder / "searching.lock", os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return  # no search has made the lock: none runs (or the folder is gone)
    deadline = time.monotonic() + most
    try:
        while not stop.is_set():
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return
                time.sleep(0.05)
                continue
            fcntl.flock(fd, fcntl.LOCK_UN)
            return
    finally:
        os.close(fd)


@contextlib.contextmanager
def _flock(folder: Path, name: str, wait: float) -> Iterator[bool]:
    """An exclusive flock (it dies with its holder) on a lock file of `folder`."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(folder / name, flags, 0o600)
    deadline = time.monotonic() + wait
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.01)
        yield True
    finally:
        os.close(fd)


def _batches(blobs: Iterator[tuple[str, bytes]]) -> Iterator[list[tuple[str, bytes]]]:
    batch: list[tuple[str, bytes]] = []
    size = 0
    for oid, data in blobs:
        batch.append((oid, data))
        size += len(data)
        if size >= BATCH_BYTES or len(batch) >= BATCH_BLOBS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


# --- the indexes of a process ----------------------------------------------------------------


class SearchIndexes:
    """The search indexes of the repositories a `RepositoryStore` reads, and their builds.

    `index_dir` names a repository's index folder (None: this store keeps no indexes, and
    every search runs `git grep`). A head whose blobs are not all stored is searched with
    `git grep` while a background thread (one per repository, lowered in priority, one at a
    time over every process) adds the missing blobs, in transactions of BATCH_BYTES, after
    `before_build(folder)` (the store trims the cache it grows), pausing while such a search
    runs (`searching`). `unfinished()` names what a closing one-shot process leaves undone.
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
        # The head each repository's index was last found short of, until it covers it.
        self._unfinished: dict[str, tuple[Path, str]] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._preparing: dict[str, int] = {}  # prepare() calls queued or running, by repository
        self._prepared = threading.Condition(self._lock)
        self._pid = os.getpid()

    def ready(self, git_dir: Path, snapshot: Snapshot, head_sha: str) -> SearchIndex | None:
        """The repository's index when it holds every blob a search of `snapshot` (the tree of
        `head_sha`) reads; otherwise None, and the missing blobs are added: at once when they
        are few, else in the background."""
        self._after_fork()
        if self._closing.is_set():
            return None
        index = self._index(git_dir)
        with contextlib.suppress(IndexUnavailable):
            if index is not None and index.noted(snapshot, head_sha):
                # Known complete: no need to weigh the head (a walk over a fresh process's
                # 78,000 entries, the larger part of its first search).
                return self._note_short(git_dir, head_sha, index, short=False)
        total = snapshot.search_bytes()
        if not self.min_bytes <= total <= self.max_bytes:
            return self._note_short(git_dir, head_sha, None, short=False)
        with self._lock:
            building_it = self._unfinished.get(str(git_dir), (git_dir, None))[1] == head_sha
        if building_it and self.building(git_dir):
            return None  # this process is building this very head in: no need to look
        if index is None:
            return None
        try:
            missing: list[tuple[str, int]] | None = index.unstored(snapshot, head_sha)
            if not missing:
                return self._note_short(git_dir, head_sha, index, short=False)
        except IndexUnavailable:
            missing = None  # not made yet, or unreadable: a build makes (or remakes) it
        stale = index.size() > STALE_FACTOR * total + STALE_SLACK_BYTES
        # With no index yet every blob is missing: their size is the head's, known already.
        few = (total if missing is None else sum(size for _, size in missing)) <= self.inline_bytes
        if few and not stale:
            wanted = missing if missing is not None else list(dict(snapshot.search_blobs()).items())
            if self._add_inline(git_dir, index, wanted, head_sha):
                with contextlib.suppress(IndexUnavailable):
                    if index.covers(snapshot, head_sha):
                        return self._note_short(git_dir, head_sha, index, short=False)
                return None
        self._note_short(git_dir, head_sha, None, short=True)
        self._start_build(git_dir, index.path.parent, snapshot, head_sha, fresh=stale)
        return None

    def _note_short(
        self, git_dir: Path, head_sha: str, index: SearchIndex | None, *, short: bool
    ) -> SearchIndex | None:
        """Note whether the repository's index still falls short of `head_sha` (see
        `unfinished`); returns `index`."""
        with self._lock:
            if short:
                self._unfinished[str(git_dir)] = (git_dir, head_sha)
            elif self._unfinished.get(str(git_dir), (None, head_sha))[1] == head_sha:
                self._unfinished.pop(str(git_dir), None)
        return index

    def unfinished(self) -> list[tuple[Path, str]]:
        """(git directory, head) of each repository whose index this process last found
        short of a head and has not seen complete since: what a one-shot process that closes
        leaves for a background build (loop.background_index)."""
        with self._lock:
            return list(self._unfinished.values())

    def _index(self, git_dir: Path) -> SearchIndex | None:
        folder = self._index_dir(git_dir)
        if folder is None:
            return None
        key = str(git_dir)
        path = current_index(folder)
        with self._lock:
            index = self._indexes.get(key)
            if index is None or index.closed or index.path != path:
                if index is not None:
                    index.close()  # a newer generation: the old one is left to its readers
                index = self._indexes[key] = SearchIndex(path)
            return index

    def _add_inline(
        self, git_dir: Path, index: SearchIndex, missing: list[tuple[str, int]], head_sha: str
    ) -> bool:
        """Add a head's missing blobs (`missing`, from this file) and note the head complete."""
        try:
            blobs = self._readers.reader(git_dir).read(oid for oid, _ in missing)
            with index.writer(create=True, wait=INLINE_LOCK_WAIT_SECONDS) as connection:
                if connection is None:
                    return False  # writers queue past the wait: git grep answers this once
                write_blobs(connection, blobs.items())
                note_head(connection, head_sha)
        except (sqlite3.Error, OSError, GitError, IndexUnavailable):
            return False
        return True

    def _start_build(
        self,
        git_dir: Path,
        folder: Path,
        snapshot: Snapshot,
        head_sha: str,
        *,
        fresh: bool,
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
                target=self._build,
                args=(git_dir, folder, blobs, head_sha, fresh),
                name="search-index",
                daemon=True,
            )
            self._builds[key] = thread
            thread.start()  # under the lock: a thread not yet started is not yet alive

    def _build(
        self, git_dir: Path, folder: Path, blobs: dict[str, int], head_sha: str, fresh: bool
    ) -> None:
        lower_priority(threading.get_native_id())
        try:
            with build_lock(folder) as mine:
                if not mine:
                    return  # another process builds it; later searches see its progress
                if self._before_build is not None:
                    self._before_build(folder)
                with write_lock(folder, BUSY_SECONDS) as writing:
                    if not writing:
                        return
                    path, connection = self._build_connection(folder, fresh=fresh)
                try:
                    present = {row[0] for row in connection.execute("SELECT oid FROM blobs")}
                    wanted = [oid for oid in blobs if oid not in present]
                    yield_to_searches(folder, self._closing, YIELD_SECONDS)
                    for batch in _batches(stream_blobs(git_dir, wanted)):
                        if self._closing.is_set() or not folder.is_dir():
                            return  # closing, or the repository was evicted
                        yield_to_searches(folder, self._closing, YIELD_SECONDS)
                        with write_lock(folder, BUSY_SECONDS) as writing:
                            if not writing:
                                return
                            write_blobs(connection, batch, self._closing)
                    with write_lock(folder, BUSY_SECONDS) as writing:
                        if writing:
                            note_head(connection, head_sha)
                            remove_older(path)
                            self._note_short(git_dir, head_sha, None, short=False)
                finally:
                    connection.close()
        except (sqlite3.Error, OSError, GitError, ValueError, IndexUnavailable, _Stopped):
            pass  # the index keeps what was committed: searches keep using git grep

    def prepare(self, executor: Executor, git_dir: Path, snapshot: Snapshot, head_sha: str) -> None:
        """Make the head's index ready on `executor`, without waiting for it, after
        `prepare_delay`: the steps up to a review's first model request come first (a search
        before then makes the index ready itself)."""
        key = str(git_dir)

        def done() -> None:
            with self._prepared:
                self._preparing[key] -= 1
                self._prepared.notify_all()

        def run() -> None:
            try:
                self.ready(git_dir, snapshot, head_sha)
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
        if self.prepare_delay <= 0:
            submit()
            return
        timer = threading.Timer(self.prepare_delay, submit)
        timer.daemon = True
        timer.start()

    @staticmethod
    def _build_connection(folder: Path, *, fresh: bool) -> tuple[Path, sqlite3.Connection]:
        """The file a build writes: the current generation, or a new one when the current is
        stale (`fresh`: grown by old heads past the bound), corrupt or of another version."""
        path = next_index(folder) if fresh else current_index(folder)
        try:
            return path, _writer(path)
        except sqlite3.OperationalError:
            raise  # busy or unwritable: not a reason to throw the index away
        except (sqlite3.DatabaseError, IndexUnavailable):
            path = next_index(folder)
            return path, _writer(path)

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
        `git grep` (see `searching`); a repository too small or too large to index has none."""
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
            self._unfinished = {}

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
