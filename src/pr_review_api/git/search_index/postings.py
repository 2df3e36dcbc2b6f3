"""The trigram index's posting lists: which stored blobs hold each trigram of bytes.

A trigram is three bytes read as one 24-bit number (`b"abc"` is 0x616263), case-sensitive
and whatever the encoding. Each write of blobs (one transaction, search_index/schema.py) is a
*segment*: for every trigram found in its bodies, one row holding the ids of the blobs that
contain it, ascending, each stored as its difference from the one before (the first as
itself) in LEB128, 7 bits a byte: a trigram most bodies share costs about a byte a blob.
This is zoekt's way (sourcegraph/zoekt: a shard's posting lists, delta-coded varints) with
blob ids for positions, since a search reads the bodies it is pointed to and finds the
literal in them itself.

The work is in bulk (numpy), never a Python step a byte: a body's distinct trigrams are
found by writing each position into a table indexed by its trigram, and keeping the positions
that read themselves back (one per distinct trigram, whichever wrote last); a segment's
(trigram, blob id) pairs are then sorted once and cut into rows. On the kernel's 946 MB of
text that is 127 million pairs, against 946 million positions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

# Every 24-bit trigram; the table that finds a body's distinct ones has an entry for each
# (numpy's zeroed memory is mapped lazily: only the pages of trigrams met are touched).
GRAM_SPACE = 1 << 24
GRAM_MASK = GRAM_SPACE - 1  # a posting key's trigram
# Positions written into that table are numbered from 1 within a segment; past this many the
# table is made anew rather than let a number wrap.
_MAX_POSITION = (1 << 32) - 1
_ID_BITS = 32  # a pair is (trigram << _ID_BITS) | blob id
_ID_MASK = (1 << _ID_BITS) - 1
_VARINT_BYTES = 5  # a 32-bit difference takes at most five 7-bit bytes


def posting_key(segment: int, gram: int) -> int:
    """The key of a segment's row for a trigram: by segment, then trigram (`rows` makes
    them in bulk)."""
    return (segment << 24) | gram  # 24: GRAM_SPACE's bits


class SegmentGrams:
    """The distinct trigrams of each body of one segment, gathered body by body (a body's
    number is its place among them), then sorted in bulk; the blob ids come last, once
    the bodies are stored (`rows`)."""

    def __init__(self) -> None:
        self._table = np.zeros(GRAM_SPACE, dtype=np.uint32)
        self._next = 1  # the number the next body's first position gets
        self._grams: list[NDArray[np.uint32]] = []
        self._counts: list[int] = []
        self._pairs = np.empty(0, dtype=np.uint64)

    def __len__(self) -> int:
        """How many bodies were added."""
        return len(self._counts)

    def add(self, body: bytes) -> None:
        """Gather the distinct trigrams of the next body."""
        grams = body_grams(body)
        if self._next + len(grams) > _MAX_POSITION:
            self._table = np.zeros(GRAM_SPACE, dtype=np.uint32)
            self._next = 1
        positions = np.arange(self._next, self._next + len(grams), dtype=np.uint32)
        self._next += len(grams)
        self._table[grams] = positions  # one position a trigram stays: whichever wrote last
        distinct = grams[self._table[grams] == positions]
        self._grams.append(distinct)
        self._counts.append(len(distinct))

    def sort(self) -> None:
        """Sort the (trigram, body) pairs of the bodies added, by trigram then body: the
        work of a segment that needs no blob id, done before its transaction."""
        bodies = np.repeat(np.arange(len(self._counts), dtype=np.uint64), self._counts)
        grams = np.concatenate([*self._grams, np.empty(0, dtype=np.uint32)])
        self._grams = []
        self._table = np.empty(0, dtype=np.uint32)  # no more bodies: its memory back
        pairs = grams.astype(np.uint64) << np.uint64(_ID_BITS)
        pairs |= bodies
        pairs.sort()
        self._pairs = pairs

    def rows(self, segment: int, ids: Sequence[int]) -> list[tuple[int, bytes]]:
        """(posting_key, encoded blob ids) of every trigram of the sorted bodies, by
        trigram; `ids` holds each body's blob id, ascending, or 0 for one not to list."""
        pairs = self._pairs
        blob_ids = np.asarray(ids, dtype=np.int64)[(pairs & np.uint64(_ID_MASK)).astype(np.int64)]
        listed = blob_ids > 0
        grams = (pairs[listed] >> np.uint64(_ID_BITS)).astype(np.int64)
        values = blob_ids[listed].astype(np.uint32)
        if not len(values):
            return []
        starts = np.flatnonzero(np.r_[True, grams[1:] != grams[:-1]])
        deltas = values.copy()
        deltas[1:] -= values[:-1]
        deltas[starts] = values[starts]  # each list's first id is stored as itself
        encoded, ends = _encode(deltas)
        data = encoded.tobytes()
        bounds = [0, *ends[starts[1:] - 1].tolist(), len(data)]
        keys = ((segment << 24) | grams[starts]).tolist()
        return [(key, data[bounds[n] : bounds[n + 1]]) for n, key in enumerate(keys)]


def body_grams(body: bytes) -> NDArray[np.uint32]:
    """The trigram at each position of `body` (none for a body under three bytes)."""
    if len(body) < 3:
        return np.empty(0, dtype=np.uint32)
    raw = np.frombuffer(body, dtype=np.uint8).astype(np.uint32)
    grams: NDArray[np.uint32] = raw[:-2] << np.uint32(16)
    grams |= raw[1:-1] << np.uint32(8)
    grams |= raw[2:]
    return grams


def query_grams(query: bytes) -> list[int]:
    """The distinct trigrams of a literal, in the order they first occur."""
    return list(dict.fromkeys(body_grams(query).tolist()))


def _encode(values: NDArray[np.uint32]) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """`values` in LEB128 (7 bits a byte, low first, the top bit set on all but a value's
    last byte), and where each value's bytes end."""
    lengths = np.ones(len(values), dtype=np.int64)
    for step in range(1, _VARINT_BYTES):
        lengths += values >= (1 << (7 * step))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    encoded = np.empty(int(ends[-1]) if len(ends) else 0, dtype=np.uint8)
    # Most differences take one byte: the first is written for every value at once, and
    # the few values with more bytes are picked out for the others.
    first = (values & 0x7F).astype(np.uint8)
    first[lengths > 1] |= 0x80
    encoded[starts] = first
    for step in range(1, _VARINT_BYTES):
        here = np.flatnonzero(lengths > step)
        if not len(here):
            break
        chunk = (values[here] >> (7 * step)) & 0x7F
        chunk |= (lengths[here] > step + 1).astype(np.uint32) << 7
        encoded[starts[here] + step] = chunk
    return encoded, ends


def decode_ids(payloads: Sequence[bytes]) -> NDArray[np.int64]:
    """The blob ids of a trigram's rows (one a segment, in segment order), ascending:
    decoded in one pass over all the rows, each row's sums started afresh."""
    raw = np.frombuffer(b"".join(payloads), dtype=np.uint8)
    if not len(raw):
        return np.empty(0, dtype=np.int64)
    last = raw < 0x80  # a value's last byte
    ends = np.flatnonzero(last)
    starts = np.concatenate(([0], ends[:-1] + 1))
    value_of: NDArray[np.int64] = np.cumsum(last, dtype=np.int64) - last  # each byte's value
    shift = (np.arange(len(raw)) - starts[value_of]) * 7
    deltas = np.add.reduceat((raw & 0x7F).astype(np.int64) << shift, starts)
    sums = np.cumsum(deltas)
    # Each row's first value is an id, not a difference: take off what came before the row.
    row_bytes = np.fromiter(map(len, payloads), dtype=np.int64, count=len(payloads))
    row_starts = np.cumsum(row_bytes) - row_bytes
    per_row = np.add.reduceat(last.astype(np.int64), row_starts[row_bytes > 0])
    firsts = np.cumsum(per_row) - per_row
    ids: NDArray[np.int64] = sums - np.repeat(sums[firsts] - deltas[firsts], per_row)
    return ids


def intersect(ordered: NDArray[np.int64], other: NDArray[np.int64]) -> NDArray[np.int64]:
    """The ids of `ordered` also in `other` (both ascending, each id once)."""
    if not len(other):
        return other
    found = np.searchsorted(other, ordered)
    found[found == len(other)] = 0
    both: NDArray[np.int64] = ordered[other[found] == ordered]
    return both
