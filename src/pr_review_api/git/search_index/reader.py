"""`SearchIndex`: one generation of a repository's search index, as searches read it.

Reads never write the file: what they learn (the stored blob ids, the snapshots known
complete) is cached in memory, and marking a head complete is the caller's command
(search_index/build.py). Any failure to read is `IndexUnavailable`. The vocabulary is the
package's (search_index/__init__.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import weakref
import zlib
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pr_review_api.git.search_index.schema import IndexUnavailable, file_token, open_reader

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from pr_review_api.git.tree import Snapshot

# Blob ids bound in one query (SQLite allows 999 or more).
MAX_QUERY_VARIABLES = 512
_BODIES = (
    "SELECT blobs.oid, bodies.body, bodies.packed FROM blobs "
    "LEFT JOIN bodies ON bodies.id = blobs.id "
    "WHERE blobs.oid IN ({})"  # one "?" a blob id: the ids themselves are bound
)
_SEGMENTS = "SELECT id, blobs FROM segments WHERE id > ? ORDER BY id"
_POSTINGS = "SELECT key, ids FROM postings WHERE key IN ({}) ORDER BY key"  # a "?" a key
_POSTING_SIZES = (
    "SELECT key, length(ids) FROM postings WHERE key IN (SELECT value FROM json_each(?))"
)
# Reading one candidate body costs a search about as much as decoding this many list bytes.
DECODED_PER_BODY_READ = 1024
# The blob ids of the candidates, bound as one JSON array: one query however many they are.
_OIDS = "SELECT oid FROM blobs WHERE id IN (SELECT value FROM json_each(?))"
_TAIL = "SELECT blobs.oid FROM tail JOIN blobs ON blobs.id = tail.id ORDER BY tail.id"
_TAIL_SIZE = "SELECT count(*), coalesce(sum(length(body)), 0) FROM tail JOIN bodies USING (id)"


def _text(body: bytes | None, packed: int | None) -> bytes | None:
    """A stored body's text (None: the blob holds a NUL byte)."""
    if body is None:
        return None
    return zlib.decompress(body) if packed else bytes(body)


class _Reader:
    """A thread's read-only connection, and the lock that `close` takes so it never closes a
    connection in the middle of a query (closing one in use from another thread crashes)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.lock = threading.Lock()
        self.closed = False


class SearchIndex:
    """One generation of a repository's index. Safe to share across threads: each thread
    reads through a connection of its own."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._readers: list[_Reader] = []
        self._ids: dict[str, int] = {}  # stored blobs (text or binary), by blob id
        self._last_id = 0
        self._complete: dict[int, weakref.ref[Snapshot]] = {}  # snapshots known complete
        self._segment_at: dict[int, tuple[int, int]] = {}  # see _segments
        self._segment_ids: NDArray[np.int64] | None = None  # made by the first search
        self._lock = threading.Lock()
        self.token: str | None = None  # of the generation this object reads
        self.closed = False

    def _reader(self) -> _Reader:
        reader: _Reader | None = getattr(self._local, "reader", None)
        if reader is not None:
            return reader
        if self.closed:
            raise IndexUnavailable()
        connection = open_reader(self.path)
        try:
            connection.execute("PRAGMA query_only = 1")
            token: str | None = file_token(connection)
        except (sqlite3.Error, IndexUnavailable):
            token = None
        reader = _Reader(connection)
        with self._lock:
            if token is None or not self._same_file(token) or self.closed:
                # Remade since this object first read it: what it remembers is of the old file.
                self.closed = True
                connection.close()
                raise IndexUnavailable()
            self._readers.append(reader)
        self._local.reader = reader
        return reader

    def _same_file(self, token: str) -> bool:
        """Whether `token` is the generation's this object reads (the first one seen is);
        called under the lock."""
        if self.token is None:
            self.token = token
        return token == self.token

    def is_same_file(self, token: str) -> bool:
        """Whether a connection whose file has `token` opened the generation this object
        reads, and not one remade under the same name."""
        with self._lock:
            return self._same_file(token)

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

    def stored_ids(self) -> dict[str, int]:
        """The row id of every stored blob, read incrementally (the file only grows)."""
        rows = self._query("SELECT id, oid FROM blobs WHERE id > ? ORDER BY id", (self._last_id,))
        with self._lock:
            self._ids.update((oid, row_id) for row_id, oid in rows)
            if rows:  # in id order: the last is the newest
                self._last_id = max(self._last_id, rows[-1][0])
            return self._ids

    def not_stored(self, blobs: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
        """The blobs of `blobs` (blob id, size) that are not stored, once each."""
        ids = self.stored_ids()
        return list(dict.fromkeys(blob for blob in blobs if blob[0] not in ids))

    def missing_blobs(self, snapshot: Snapshot) -> list[tuple[str, int]]:
        """The missing blobs of the head `snapshot` is the tree of, once each.

        A head derived from one marked complete (`Snapshot.origin`) is checked by the blobs
        of the files that differ from it alone: a service's every new head costs its few
        changes here, not a walk over the tree."""
        origin = snapshot.origin
        if origin is not None and self.is_marked_complete(origin.sha):
            return self.not_stored(origin.blobs())
        return self.not_stored(snapshot.search_blobs())

    def known_complete(self, snapshot: Snapshot, head_sha: str) -> bool:
        """Whether the head (`snapshot` is its tree) is known complete without a look at its
        blobs: remembered for this snapshot, or marked complete in the file."""
        known = self._complete.get(id(snapshot))
        if known is not None and known() is snapshot:
            return True
        if not self.is_marked_complete(head_sha):
            return False
        self.remember_complete(snapshot)
        return True

    def remember_complete(self, snapshot: Snapshot) -> None:
        """Remember, in this process, that `snapshot`'s head is complete."""
        with self._lock:
            self._complete = {k: ref for k, ref in self._complete.items() if ref() is not None}
            self._complete[id(snapshot)] = weakref.ref(snapshot)

    def is_marked_complete(self, head_sha: str) -> bool:
        return bool(self._query("SELECT 1 FROM heads WHERE sha = ?", (head_sha,)))

    def candidates(self, grams: Sequence[int]) -> set[str]:
        """The blob ids of the text bodies holding every trigram of `grams` (search.py takes
        them from a literal), or a few more: every blob of the tail (schema.py), and, as the
        lists are met shortest first, once the blobs left are far fewer than the next list
        is long, those few (reading them costs the search less than decoding the rest)."""
        # The tail first: a blob leaves it in the write that lists it in a later segment.
        tail = set(self.tail_oids())
        return tail | self._posted(grams, self.posting_sizes(grams))

    def posting_sizes(self, grams: Sequence[int], sample: int = 0) -> dict[int, int]:
        """The bytes of each trigram's posting lists over every segment, or (`sample`) an
        estimate from that many segments spread over them: a look-up a segment and trigram,
        each on a page of its own, so a few segments cost a search a few pages."""
        from pr_review_api.git.search_index.postings import (  # noqa: PLC0415  (numpy)
            GRAM_MASK,
            posting_key,
        )

        segments = sorted(self._segments())
        asked = segments
        if 0 < sample < len(segments):
            asked = [segments[i * len(segments) // sample] for i in range(sample)]
        keys = [posting_key(segment, gram) for gram in grams for segment in asked]
        sizes = dict.fromkeys(grams, 0)
        for key, size in self._query(_POSTING_SIZES, (json.dumps(keys),)):
            sizes[key & GRAM_MASK] += size
        if asked is not segments:
            sizes = {gram: size * len(segments) // len(asked) for gram, size in sizes.items()}
        return sizes

    def tail_oids(self) -> list[str]:
        """The blob ids of the tail, in the order they were stored."""
        return [row[0] for row in self._query(_TAIL, ())]

    def tail_size(self) -> tuple[int, int]:
        """The tail's count of blobs and bytes stored."""
        count, size = self._query(_TAIL_SIZE, ())[0]
        return int(count), int(size)

    def _posted(self, grams: Sequence[int], sizes: dict[int, int]) -> set[str]:
        """The blob ids the posting lists name for every trigram of `grams` (see
        `candidates`), their lists met in the order of `sizes`. The segments are read again:
        a segment written since `sizes` were asked is read all the same."""
        import numpy as np  # noqa: PLC0415  (see the package's "numpy" note)

        from pr_review_api.git.search_index.postings import (  # noqa: PLC0415
            decode_rows,
            intersect,
            posting_key,
        )

        segments = self._segments()
        found: NDArray[np.int64] | None = None
        for gram in sorted(sizes, key=sizes.__getitem__):
            if found is not None and len(found) * DECODED_PER_BODY_READ < sizes[gram]:
                break
            keys = [posting_key(segment, gram) for segment in segments]
            rows = self._query(_POSTINGS.format(",".join("?" * len(keys))), tuple(keys))
            numbers, per_row = decode_rows([row[1] for row in rows])
            # A body's number within its segment, to its blob id (0: listed elsewhere).
            offsets = np.array([segments[row[0] >> 24][1] for row in rows], dtype=np.int64)
            assert self._segment_ids is not None  # set by _segments()
            ids = self._segment_ids[np.repeat(offsets, per_row) + numbers]
            ids = ids[ids > 0]
            if len(ids) > 1 and bool((ids[1:] <= ids[:-1]).any()):
                ids = np.unique(ids)  # a posted tail: older blobs listed by a later segment
            found = ids if found is None else intersect(found, ids)
            if not len(found):
                return set()
        if found is None:
            return set()
        return {row[0] for row in self._query(_OIDS, (json.dumps(found.tolist()),))}

    def _segments(self) -> dict[int, tuple[int, int]]:
        """Each segment's (count of bodies, where its blob ids start in `_segment_ids`), read
        incrementally: a segment never changes once written."""
        import numpy as np  # noqa: PLC0415  (see the package's "numpy" note)

        last = max(self._segment_at, default=0)
        rows = self._query(_SEGMENTS, (last,))
        with self._lock:
            if self._segment_ids is None:
                self._segment_ids = np.empty(0, dtype=np.int64)
            for segment, blobs in rows:
                if segment in self._segment_at:
                    continue
                ids = np.frombuffer(blobs, dtype="<u4").astype(np.int64)
                self._segment_at[segment] = (len(ids), len(self._segment_ids))
                self._segment_ids = np.concatenate((self._segment_ids, ids))
            return dict(self._segment_at)

    def bodies(self, oids: Collection[str]) -> dict[str, bytes | None]:
        """The stored text of each blob, None for one holding a NUL byte; IndexUnavailable
        when one is not stored (the file was remade, or the caller's head is not complete)."""
        wanted = list(dict.fromkeys(oids))
        found: dict[str, bytes | None] = {}
        for start in range(0, len(wanted), MAX_QUERY_VARIABLES):
            chunk = wanted[start : start + MAX_QUERY_VARIABLES]
            rows = self._query(_BODIES.format(",".join("?" * len(chunk))), tuple(chunk))
            try:
                found.update((oid, _text(body, packed)) for oid, body, packed in rows)
            except (zlib.error, TypeError):
                raise IndexUnavailable() from None  # a damaged body: git grep answers instead
        if len(found) != len(wanted):
            raise IndexUnavailable()
        return found

    def size(self) -> int:
        """Bytes on disk, the write-ahead log included."""
        total = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                total += os.stat(f"{self.path}{suffix}").st_size
        return total

    def close(self) -> None:
        with self._lock:
            self.closed = True
            readers, self._readers = self._readers, []
        for reader in readers:
            with reader.lock, contextlib.suppress(sqlite3.Error):
                reader.closed = True
                reader.connection.close()
