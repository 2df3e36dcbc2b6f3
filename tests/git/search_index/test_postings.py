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
import pytest

from pr_review_api.git.search_index import postings
from pr_review_api.git.search_index.postings import (
    SegmentGrams,
    body_grams,
    decode_rows,
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


@pytest.mark.parametrize("chunk", [1 << 18, 5])  # rows made a chunk of pairs at a time
# Each body's trigrams sorted out, through the table from the first body, and from midway.
@pytest.mark.parametrize("table_from", [1 << 40, 0, 10_000])
def test_each_trigram_lists_exactly_the_bodies_that_hold_it(
    chunk: int, table_from: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postings, "_ROWS_PAIRS", chunk)
    expected: dict[int, list[int]] = {}
    stored: dict[int, list[bytes]] = {}
    offset = 0
    for segment in (1, 2, 3):
        grams = SegmentGrams(table_from)
        texts = bodies(150, seed=segment)
        for number, body in enumerate(texts):
            grams.add(body)
            for gram in trigrams(body):
                expected.setdefault(gram, []).append(offset + number)
        assert len(grams) == 150
        found = [(gram, bytes(ids)) for gram, ids in grams.postings().items()]
        assert [gram for gram, _ in found] == sorted({gram for gram, _ in found})  # one each
        for gram, payload in found:
            stored.setdefault(gram, []).append(payload)
        offset += 1000
    assert sorted(stored) == sorted(expected)
    for gram, payloads in stored.items():
        numbers, per_row = decode_rows(payloads)
        assert len(per_row) == len(payloads)
        rows = np.repeat(np.arange(len(payloads)), per_row)
        segments = sorted({n // 1000 for n in expected[gram]})
        assert [segments[row] * 1000 + n for row, n in zip(rows, numbers, strict=True)] == (
            expected[gram]
        )


def test_numbers_are_delta_coded_seven_bits_a_byte() -> None:
    grams = SegmentGrams()
    for _ in range(200):
        grams.add(b"abc")
    [(gram, payload)] = grams.postings().items()
    assert gram == 0x616263
    assert bytes(payload) == b"\0" + b"\1" * 199  # the first number as itself, then differences
    grams = SegmentGrams()
    for number in range(300):
        grams.add(b"abc" if number in (0, 299) else b"")
    [(_, payload)] = grams.postings().items()
    assert bytes(payload) == b"\0\xab\x02"  # 299 takes two bytes
    assert decode_rows([bytes(payload), b"\x05"])[0].tolist() == [0, 299, 5]


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


def test_a_small_segment_never_makes_the_trigram_table() -> None:
    """The table's touched pages are megabytes for a few KB of text: a segment makes it only
    once it holds TABLE_MIN_BYTES (an inline add of a new head's few files never does)."""
    grams = SegmentGrams()
    grams.add(b"int main(void) { return 0; }\n" * 100)
    assert grams._table is None
    grams.add(b"x" * postings.TABLE_MIN_BYTES)
    assert grams._table is not None
