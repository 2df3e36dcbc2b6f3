"""The search index's file format: its tables, opening a generation, and its two writes.

    blobs(id INTEGER PRIMARY KEY, oid TEXT UNIQUE)   every stored blob, small rows
    bodies(id INTEGER PRIMARY KEY, body BLOB,        the text of each (none: holds a NUL
           packed INTEGER)                           byte), zlib-compressed when packed
    grams   FTS5, trigram tokenizer, case-sensitive, contentless, by blobs.id
    heads(sha TEXT PRIMARY KEY)   the heads marked complete
    about(token)                  the generation's token: a remade file has another

Each blob is stored once, by id, so every head of the repository shares the file and a new
head adds only its missing blobs. Bodies are indexed as Latin-1 text, one character per
byte, so a byte string and its trigrams map one to one whatever the file's encoding.

Why SQLite (in the standard library): transactions make a killed build leave whole blobs or
none, WAL lets any number of processes read while one writes, and FTS5 is the trigram index we
would otherwise write by hand. The vocabulary is the package's (search_index/__init__.py).
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
from pathlib import Path

SCHEMA_VERSION = 4  # 4: large bodies compressed
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
    "CREATE VIRTUAL TABLE IF NOT EXISTS grams USING fts5("
    "body, tokenize='trigram case_sensitive 1', detail='none', content='')",
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


def write_blobs(
    connection: sqlite3.Connection,
    blobs: Iterable[tuple[str, bytes]],
    stop: threading.Event | None = None,
) -> None:
    """Store blobs in one transaction: all of them or, if anything fails or `stop` is set,
    none (`BuildStopped`)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        for oid, data in blobs:
            if stop is not None and stop.is_set():
                raise BuildStopped()
            body = None if b"\0" in data else data
            cursor = connection.execute("INSERT OR IGNORE INTO blobs(oid) VALUES (?)", (oid,))
            if cursor.rowcount == 1 and body is not None:
                packed = len(body) >= PACKED_BODY_BYTES
                stored = zlib.compress(body, BODY_COMPRESSION_LEVEL) if packed else body
                connection.execute(
                    "INSERT INTO bodies(id, body, packed) VALUES (?, ?, ?)",
                    (cursor.lastrowid, stored, packed),
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


def mark_complete(connection: sqlite3.Connection, head_sha: str) -> None:
    """Mark `head_sha` complete: every one of its search blobs is stored."""
    connection.execute("INSERT OR IGNORE INTO heads(sha) VALUES (?)", (head_sha,))
