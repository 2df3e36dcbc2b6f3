"""The search index's file format: its tables, opening a generation, and its two writes.

    blobs(id INTEGER PRIMARY KEY, oid TEXT UNIQUE)   every stored blob, small rows
    bodies(id INTEGER PRIMARY KEY, body BLOB,        the text of each (none: holds a NUL
           packed INTEGER)                           byte), zlib-compressed when packed
    segments(id INTEGER PRIMARY KEY,          each write of blobs that stored text, in order:
             blobs BLOB)                      the blob id of each body number (uint32, little-
                                              endian; 0: stored before, listed there)
    postings(key INTEGER PRIMARY KEY,         for each trigram of a segment's bodies, the
             ids BLOB)                        numbers of the bodies holding it (postings.py),
                                              keyed by segment and trigram (posting_key)
    tail(id INTEGER PRIMARY KEY)  text bodies stored with no posting lists yet (an inline
                                  add's): every search reads those of its head
    heads(sha TEXT PRIMARY KEY)   the heads marked complete
    about(token)                  the generation's token: a remade file has another

Each blob is stored once, by id, so every head of the repository shares the file and a new
head adds only its missing blobs. Trigrams are of bytes, so a byte string and its trigrams map
one to one whatever the file's encoding. Each write (one transaction) is a segment, numbered
in order, as its blobs' ids are: a trigram's rows read in segment order list its blobs
ascending, but for a tail's blobs (below), listed by a later segment than stored them.

The tail: an inline add stores a new head's few changed files without posting lists, since
making them took most of its time (some 12,000 rows for a dozen source files) and each
segment it left made every later search ask one more row a trigram. A search reads its
head's tail bodies whole, as few as the files the head changed; once the tail holds a build's
batch, it is posted (build.post_tail) as one segment: the write that lists a tail blob in a
segment takes it out of the tail, in one transaction, so a reader that reads the tail before
the segments meets each blob at least once.

Why SQLite (in the standard library): transactions make a killed build leave whole blobs or
none, and WAL lets any number of processes read while one writes. The trigram index is our
own (postings.py), not SQLite's FTS5: FTS5 indexed the kernel's text at about 12 MB/s, most
of a build's time, where sorting the pairs in bulk is several times faster and the file no
larger. The vocabulary is the package's (search_index/__init__.py).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import stat
import threading
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pr_review_api.git.search_index.postings import Postings

# 4: large bodies compressed; 5: our own posting lists, not FTS5; 6: the tail
SCHEMA_VERSION = 6
# Bodies of at least this size are compressed, at zlib's fastest level (source text shrinks
# about 3x there). On the kernel tree they are 8% of the files and 53% of the text: the file
# halves, and a search, whose first windows read mostly small files in path order, inflates
# little of what it reads.
PACKED_BODY_BYTES = 32 * 1024
BODY_COMPRESSION_LEVEL = 1
# How long a connection waits for another process's transaction before it fails.
BUSY_SECONDS = 5.0

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS blobs(id INTEGER PRIMARY KEY, oid TEXT UNIQUE NOT NULL)",
    "CREATE TABLE IF NOT EXISTS bodies("
    "id INTEGER PRIMARY KEY, body BLOB NOT NULL, packed INTEGER NOT NULL)",
    # Keyed by segment, then trigram, in one integer (`posting_key`): a write appends its rows
    # at the end of the table, and a rowid table keeps lists of up to 4 KB in its pages,
    # where a WITHOUT ROWID one sends all past 1 KB to overflow pages, a third of them empty.
    "CREATE TABLE IF NOT EXISTS postings(key INTEGER PRIMARY KEY, ids BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS segments(id INTEGER PRIMARY KEY, blobs BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS tail(id INTEGER PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS heads(sha TEXT PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS about(token TEXT NOT NULL)",
)


class IndexUnavailable(Exception):
    """The index file could not be opened or read (absent, corrupt, another version)."""


class BuildStopped(Exception):
    """A build was asked to stop in the middle of a transaction (rolled back)."""


def own_file(path: Path) -> bool:
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


def open_reader(path: Path) -> sqlite3.Connection:
    """A read-only connection to a generation (shared across threads by its caller's lock);
    IndexUnavailable when the file is not one to read. Never creates the file."""
    if not own_file(path):
        raise IndexUnavailable()  # sqlite would make an empty one
    try:
        connection = sqlite3.connect(
            path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error:
        raise IndexUnavailable() from None
    return connection


def open_writer(path: Path) -> sqlite3.Connection:
    """A connection to write a generation, made (private, with its tables) if need be;
    IndexUnavailable for a file of another version or another user."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(FileExistsError):  # private before SQLite opens it (its logs copy
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    if not own_file(path):
        raise IndexUnavailable()
    connection = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            raise IndexUnavailable()
        if version == 0:
            _create_tables(connection)
    except BaseException:
        connection.close()
        raise
    return connection


def _create_tables(connection: sqlite3.Connection) -> None:
    connection.execute("BEGIN IMMEDIATE")
    for statement in _SCHEMA:
        connection.execute(statement)
    connection.execute("INSERT INTO about(token) VALUES (?)", (secrets.token_hex(16),))
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    connection.execute("COMMIT")


def file_token(connection: sqlite3.Connection) -> str:
    """The generation's token; IndexUnavailable for a file of another version."""
    if connection.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
        raise IndexUnavailable()
    row = connection.execute("SELECT token FROM about").fetchone()
    if row is None:
        raise IndexUnavailable()
    return str(row[0])


@dataclass(frozen=True)
class PreparedBlobs:
    """Blobs made ready to store: each (blob id, its stored body or None when it holds a
    NUL byte, whether that body is compressed), and the posting lists of their segment."""

    blobs: list[tuple[str, bytes | None, bool]]
    postings: Postings


def prepare_blobs(
    blobs: Iterable[tuple[str, bytes]],
    stop: threading.Event | None = None,
    *,
    table_min_bytes: int | None = None,
) -> PreparedBlobs:
    """The work of storing blobs that needs no connection (compressing, finding trigrams,
    the posting lists): a build has it done in another process (prepare.py).
    `table_min_bytes`: see postings.TABLE_MIN_BYTES (None: that)."""
    from pr_review_api.git.search_index.postings import (  # noqa: PLC0415  (numpy)
        TABLE_MIN_BYTES,
        SegmentGrams,
    )

    prepared: list[tuple[str, bytes | None, bool]] = []
    grams = SegmentGrams(TABLE_MIN_BYTES if table_min_bytes is None else table_min_bytes)
    for oid, data in blobs:
        if stop is not None and stop.is_set():
            raise BuildStopped()
        if b"\0" in data:
            prepared.append((oid, None, False))  # binary: no text to search
            continue
        packed = len(data) >= PACKED_BODY_BYTES
        body = zlib.compress(data, BODY_COMPRESSION_LEVEL) if packed else data
        prepared.append((oid, body, packed))
        grams.add(data)
    return PreparedBlobs(prepared, grams.postings())


def write_blobs(
    connection: sqlite3.Connection,
    blobs: Iterable[tuple[str, bytes]] | PreparedBlobs,
    stop: threading.Event | None = None,
) -> None:
    """Store blobs in one transaction, one segment of posting lists: all of them or, if
    anything fails or `stop` is set, none (`BuildStopped`). A blob in the tail is listed by
    this segment and leaves the tail."""
    from pr_review_api.git.search_index.postings import encode_ids, posting_key  # noqa: PLC0415

    prepared = blobs if isinstance(blobs, PreparedBlobs) else prepare_blobs(blobs, stop)
    connection.execute("BEGIN IMMEDIATE")
    try:
        ids: list[int] = []  # of each text body by its number: 0 for one listed before
        for oid, body, packed in prepared.blobs:
            if stop is not None and stop.is_set():
                raise BuildStopped()
            stored = _insert_blob(connection, oid, body, packed)
            if body is not None:
                ids.append(stored or _leave_tail(connection, oid, body, packed))
        if any(ids):
            segment = connection.execute(
                "INSERT INTO segments(blobs) VALUES (?)", (encode_ids(ids),)
            ).lastrowid
            assert segment is not None
            connection.executemany(
                "INSERT INTO postings(key, ids) VALUES (?, ?)",
                ((posting_key(segment, gram), ids) for gram, ids in prepared.postings.items()),
            )
        connection.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise


def write_tail(connection: sqlite3.Connection, blobs: Iterable[tuple[str, bytes]]) -> None:
    """Store blobs in one transaction with no posting lists: their text bodies join the
    tail, uncompressed (a search reads its head's whole; they are compressed when listed)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        for oid, data in blobs:
            body = None if b"\0" in data else data
            stored = _insert_blob(connection, oid, body, False)
            if stored is not None and body is not None:
                connection.execute("INSERT INTO tail(id) VALUES (?)", (stored,))
        connection.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise


def _insert_blob(
    connection: sqlite3.Connection, oid: str, body: bytes | None, packed: bool
) -> int | None:
    """Store a blob and its body (if it has text); its new row id, None when stored before."""
    cursor = connection.execute("INSERT OR IGNORE INTO blobs(oid) VALUES (?)", (oid,))
    if cursor.rowcount != 1:
        return None
    assert cursor.lastrowid is not None
    if body is not None:
        connection.execute(
            "INSERT INTO bodies(id, body, packed) VALUES (?, ?, ?)",
            (cursor.lastrowid, body, packed),
        )
    return cursor.lastrowid


def _leave_tail(connection: sqlite3.Connection, oid: str, body: bytes, packed: bool) -> int:
    """The row id of a stored blob taken out of the tail (its body stored as a segment's
    are), to be listed by the segment being written; 0 when it was not in the tail (a
    segment lists it already)."""
    (row_id,) = connection.execute("SELECT id FROM blobs WHERE oid = ?", (oid,)).fetchone()
    if connection.execute("DELETE FROM tail WHERE id = ?", (row_id,)).rowcount != 1:
        return 0
    connection.execute(
        "UPDATE bodies SET body = ?, packed = ? WHERE id = ?", (body, packed, row_id)
    )
    return int(row_id)


def truncate_log(connection: sqlite3.Connection) -> None:
    """Copy the write-ahead log into the file and empty it, if no reader holds it: a build's
    last transactions would otherwise leave it as large as the largest (tens of MB)."""
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def mark_complete(connection: sqlite3.Connection, head_sha: str) -> None:
    """Mark `head_sha` complete: every one of its search blobs is stored."""
    connection.execute("INSERT OR IGNORE INTO heads(sha) VALUES (?)", (head_sha,))
