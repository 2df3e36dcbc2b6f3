"""The trigram index's posting lists: which stored blobs hold each trigram of bytes.

A trigram is three bytes read as one 24-bit number (`b"abc"` is 0x616263), case-sensitive
and whatever the encoding. Each write of blobs (one transaction, search_index/schema.py) is a
*segment*: its text bodies are numbered from 0, the segment keeps the blob id of each number,
and for every trigram found in its bodies one row lists the numbers of the bodies holding
it, ascending, each stored as its difference from the one before (the first as itself) in
LEB128, 7 bits a byte: a trigram most bodies share costs about a byte a body. This is
zoekt's way (sourcegraph/zoekt: a shard's documents numbered within it, its posting lists
delta-coded varints), with bodies for positions, since a search reads the bodies it is
pointed to and finds the literal in them itself. Numbers within a segment need no blob id,
so a segment is made whole before its transaction, in another process (prepare.py).

The work is in bulk (numpy), never a Python step a byte: a body's distinct trigrams are
found by writing each position into a table indexed by its trigram, and keeping the positions
that read themselves back (one per distinct trigram, whichever wrote last); a segment's
(trigram, body) pairs are then sorted once and cut into rows. On the kernel's 946 MB of
text that is 127 million pairs, against 946 million positions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

# Every 24-bit trigram; the table that finds a body's distinct ones has an entry for each
# (numpy's zeroed memory is mapped lazily: only the pages of trigrams met are touched).
GRAM_SPACE = 1 << 24
# A segment sorts its bodies' trigrams out until it holds this much text, and only then makes
# the table: a page of it holds 1,024 trigrams, so 34 KB of C source touch 27 MB of it, which
# a worker adding a head's missing blobs inline would otherwise hold at its peak. A build's
# own process (prepare.py), whose memory goes back when it exits, makes it at once.
TABLE_MIN_BYTES = 1024**2
GRAM_MASK = GRAM_SPACE - 1  # a posting key's trigram
_ID_BITS = 32  # a pair is (trigram << _ID_BITS) | body number
_ID_MASK = (1 << _ID_BITS) - 1
_VARINT_BYTES = 5  # a 32-bit difference takes at most five 7-bit bytes
# Pairs encoded at a time: the temporaries stay a few MB whatever the segment's size.
_ROWS_PAIRS = 1 << 18


def posting_key(segment: int, gram: int) -> int:
    """The key of a segment's row for a trigram: by segment, then trigram."""
    return (segment << 24) | gram  # 24: GRAM_SPACE's bits


class SegmentGrams:
    """The distinct trigrams of each body of one segment, gathered body by body (a body's
    number is its place among them, from 0), then sorted and encoded in bulk (`postings`)."""

    def __init__(self, table_min_bytes: int = TABLE_MIN_BYTES) -> None:
        self._table: NDArray[np.uint32] | None = None  # made once table_min_bytes are added
        self._table_min_bytes = table_min_bytes
        self._bytes = 0
        self._grams: list[NDArray[np.uint32]] = []
        self._counts: list[int] = []

    def __len__(self) -> int:
        """How many bodies were added."""
        return len(self._counts)

    def add(self, body: bytes) -> None:
        """Gather the distinct trigrams of the next body: sorted out while the segment is
        small, then through the table. The table keeps what earlier bodies wrote: only this
        body's trigrams are read back, after it wrote each of them."""
        grams = body_grams(body)
        self._bytes += len(body)
        if self._table is None and self._bytes >= self._table_min_bytes:
            self._table = np.zeros(GRAM_SPACE, dtype=np.uint32)
        if self._table is None:
            distinct = np.unique(grams)
        else:
            positions = np.arange(len(grams), dtype=np.uint32)
            self._table[grams] = positions  # one position a trigram stays: whichever wrote last
            distinct = grams[self._table[grams] == positions]
        self._grams.append(distinct)
        self._counts.append(len(distinct))

    def postings(self) -> Postings:
        """The posting lists of the bodies added: their pairs sorted once, then encoded a
        few hundred thousand at a time, each time up to a trigram's first, so the
        temporaries stay small whatever the segment's size."""
        self._table = None  # no more bodies: its memory back
        pairs = np.concatenate([*self._grams, np.empty(0, dtype=np.uint32)]).astype(np.uint64)
        self._grams = []
        pairs <<= np.uint64(_ID_BITS)  # in place: a segment's pairs are tens of MB
        pairs |= np.repeat(np.arange(len(self._counts), dtype=np.uint64), self._counts)
        pairs.sort()
        parts: list[Postings] = []
        start = 0
        while start < len(pairs):
            end = start + _ROWS_PAIRS
            if end < len(pairs):  # back to where the last trigram of the chunk begins
                last = pairs[end] >> np.uint64(_ID_BITS)
                end = int(np.searchsorted(pairs[start:end] >> np.uint64(_ID_BITS), last)) + start
                if end == start:  # one trigram, longer than a chunk: all of it
                    rest = pairs[start:] >> np.uint64(_ID_BITS)
                    end = start + int(np.searchsorted(rest, rest[0], side="right"))
            parts.append(_postings(pairs[start:end]))
            start = end
        return Postings(
            np.concatenate([np.empty(0, dtype=np.uint32), *(part.grams for part in parts)]),
            np.concatenate([np.empty(0, dtype=np.uint32), *(part.lengths for part in parts)]),
            b"".join(part.data for part in parts),
        )


@dataclass(frozen=True)
class Postings:
    """A segment's posting lists, compact (a Python object a list would cost more than the
    list): its trigrams ascending, each list's length in bytes, and the lists one after
    another."""

    grams: NDArray[np.uint32]
    lengths: NDArray[np.uint32]
    data: bytes

    def items(self) -> Iterator[tuple[int, memoryview]]:
        """(trigram, its list) of each."""
        view = memoryview(self.data)
        start = 0
        for gram, length in zip(self.grams.tolist(), self.lengths.tolist(), strict=True):
            yield gram, view[start : start + length]
            start += length


def _postings(pairs: NDArray[np.uint64]) -> Postings:
    """The lists of sorted pairs that hold every pair of each of their trigrams."""
    grams = (pairs >> np.uint64(_ID_BITS)).astype(np.uint32)
    values = (pairs & np.uint64(_ID_MASK)).astype(np.uint32)
    starts = np.flatnonzero(np.concatenate(([True], grams[1:] != grams[:-1])))
    deltas = values.copy()
    deltas[1:] -= values[:-1]
    deltas[starts] = values[starts]  # each list's first number is stored as itself
    encoded, ends = _encode(deltas)
    list_ends = ends[np.concatenate((starts[1:] - 1, [len(ends) - 1]))]
    lengths = np.diff(np.concatenate(([0], list_ends))).astype(np.uint32)
    return Postings(grams[starts], lengths, encoded.tobytes())


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


def encode_ids(ids: Sequence[int]) -> bytes:
    """A segment's blob ids, as its row stores them (little-endian uint32)."""
    return np.asarray(ids, dtype="<u4").tobytes()


def decode_rows(payloads: Sequence[bytes]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The body numbers of a trigram's rows, in one pass over all of them (each row's sums
    started afresh), and how many each row holds."""
    raw = np.frombuffer(b"".join(payloads), dtype=np.uint8)
    if not len(raw):
        return np.empty(0, dtype=np.int64), np.zeros(len(payloads), dtype=np.int64)
    last = raw < 0x80  # a value's last byte
    counted = np.cumsum(last, dtype=np.int64)  # values ended up to each byte
    if counted[-1] == len(raw):  # every value one byte: the usual case of a common trigram
        deltas = raw.astype(np.int64)
    else:
        ends = np.flatnonzero(last)
        starts = np.concatenate(([0], ends[:-1] + 1))
        shift = (np.arange(len(raw)) - starts[counted - last]) * 7  # a byte's place in its value
        deltas = np.add.reduceat((raw & 0x7F).astype(np.int64) << shift, starts)
    sums = np.cumsum(deltas)
    # Each row's first value is a number, not a difference: take off what came before it.
    row_ends = np.cumsum(np.fromiter(map(len, payloads), dtype=np.int64, count=len(payloads)))
    per_row = np.diff(counted[row_ends - 1], prepend=0)
    firsts = np.cumsum(per_row) - per_row
    numbers: NDArray[np.int64] = sums - np.repeat(sums[firsts] - deltas[firsts], per_row)
    return numbers, per_row


def intersect(ordered: NDArray[np.int64], other: NDArray[np.int64]) -> NDArray[np.int64]:
    """The ids of `ordered` also in `other` (both ascending, each id once)."""
    if not len(other):
        return other
    found = np.searchsorted(other, ordered)
    found[found == len(other)] = 0
    both: NDArray[np.int64] = ordered[other[found] == ordered]
    return both
