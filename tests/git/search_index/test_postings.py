"""search_index/postings.py, and the segments schema.py writes with it: every trigram of a
stored body lists that body, and no other trigram does.

The lists are checked against the trigrams counted one by one in Python, over bodies of
bytes chosen to repeat trigrams within a body and across bodies; the writes go to a real
SQLite file and are read back through `SearchIndex.candidates`.
"""

from __future__ import annotations

import contextlib
import random
import sqlite3
from pathlib import Path

import numpy as np

from pr_review_api.git.search_index.postings import (
    GRAM_MASK,
    SegmentGrams,
    body_grams,
    decode_ids,
    intersect,
    query_grams,
)
from pr_review_api.git.search_index.reader import SearchIndex
from pr_review_api.git.search_index.schema import open_writer, write_blobs


def trigrams(body: bytes) -> set[int]:
    """The trigrams of `body`, one step a byte: what the bulk code must agree with."""
    return {int.from_bytes(body[i : i + 3], "big") for i in range(len(body) - 2)}


def bodies(count: int, seed: int) -> list[bytes]:
    """Bodies of a few byte values (the high bit among them), 0 to 400 bytes long."""
    chosen = random.Random(seed)
    return [
        bytes(chosen.choice(b"ab\n\x80\xff") for _ in range(chosen.randint(0, 400)))
        for _ in range(count)
    ]


def test_each_trigram_lists_exactly_the_bodies_that_hold_it() -> None:
    expected: dict[int, list[int]] = {}
    stored: dict[int, list[bytes]] = {}
    blob_id = 1
    for segment in (1, 2, 3):
        grams = SegmentGrams()
        ids = []
        for number, body in enumerate(bodies(150, seed=segment)):
            grams.add(body)
            listed = number % 7 != 3  # some bodies were stored before: not listed again
            ids.append(blob_id if listed else 0)
            if listed:
                for gram in trigrams(body):
                    expected.setdefault(gram, []).append(blob_id)
            blob_id += 1 + number % 3  # ids ascend, with gaps (binary blobs, other writes)
        assert len(grams) == 150
        grams.sort()
        for key, payload in grams.rows(segment, ids):
            assert key >> 24 == segment
            stored.setdefault(key & GRAM_MASK, []).append(payload)
    assert sorted(stored) == sorted(expected)
    for gram, payloads in stored.items():
        assert decode_ids(payloads).tolist() == expected[gram]


def test_ids_are_delta_coded_seven_bits_a_byte() -> None:
    grams = SegmentGrams()
    for _ in range(200):
        grams.add(b"abc")
    grams.sort()
    dense = list(range(1000, 1200))
    [(_, payload)] = grams.rows(1, dense)
    assert len(payload) == 2 + 199  # the first id as itself (1000: two bytes), then 1s
    sparse = [2**32 - 1] + [0] * 199
    [(_, payload)] = grams.rows(2, sparse)
    assert len(payload) == 5  # the largest id takes five bytes
    assert decode_ids([payload]).tolist() == [2**32 - 1]


def test_body_and_query_trigrams() -> None:
    assert len(body_grams(b"ab")) == 0
    assert body_grams(b"abcd").tolist() == [0x616263, 0x626364]
    assert query_grams(b"aaaaa") == [0x616161]
    assert query_grams(b"\xff\x00ab") == [0xFF0061, 0x006162]


def test_intersect_keeps_the_ids_in_both() -> None:
    first = np.array([1, 5, 9, 12, 40], dtype=np.int64)
    second = np.array([2, 5, 12, 41], dtype=np.int64)
    assert intersect(first, second).tolist() == [5, 12]
    assert intersect(second, first).tolist() == [5, 12]
    assert intersect(first, np.empty(0, dtype=np.int64)).tolist() == []
    assert intersect(np.array([50], dtype=np.int64), second).tolist() == []


def test_each_write_is_a_segment_and_searches_find_every_body(tmp_path: Path) -> None:
    path = tmp_path / "search-1.sqlite"
    texts = bodies(120, seed=9)
    blobs = [(f"{number:040x}", body) for number, body in enumerate(texts)]
    blobs.append((f"{999:040x}", b"ab\0ab"))  # binary: stored, never listed
    with contextlib.closing(open_writer(path)) as connection:
        write_blobs(connection, blobs[:50])
        write_blobs(connection, blobs[40:])  # ten stored already: listed once, in the first
        write_blobs(connection, blobs[:10])  # nothing new: no segment
    with contextlib.closing(sqlite3.connect(path)) as connection:
        assert connection.execute("SELECT count(*) FROM segments").fetchone() == (2,)
        assert connection.execute("SELECT count(*) FROM blobs").fetchone() == (121,)
        rows = connection.execute("SELECT key FROM postings").fetchall()
    per_segment = [
        len(set().union(*(trigrams(body) for body in texts[:50]))),
        len(set().union(*(trigrams(body) for body in texts[50:]))),
    ]
    assert len(rows) == sum(per_segment)
    index = SearchIndex(path)
    for needle in (b"ab\n", b"\x80\xff\x80", b"a\nb\n\xff"):
        holding = {oid for oid, body in blobs[:120] if needle in body}
        found = index.candidates(query_grams(needle))
        assert holding <= found  # the index narrows, never excludes
        assert found <= {oid for oid, body in blobs[:120] if trigrams(needle) <= trigrams(body)}
    assert index.candidates(query_grams(b"zzz")) == set()
    index.close()
