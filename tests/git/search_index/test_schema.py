"""search_index/schema.py: the tail, written with no posting lists, and listed later.

A real SQLite file written through the schema's own writes, read through `SearchIndex`.
"""

from __future__ import annotations

import contextlib
import sqlite3
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.git.search import trigram_query
from pr_review_api.git.search_index.reader import SearchIndex
from pr_review_api.git.search_index.schema import (
    PACKED_BODY_BYTES,
    open_writer,
    write_blobs,
    write_tail,
)


def oid(name: str) -> str:
    return name.encode().hex().ljust(40, "0")


@pytest.fixture
def connection(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    with contextlib.closing(open_writer(tmp_path / "search-1.sqlite")) as opened:
        yield opened


def rows(connection: sqlite3.Connection, sql: str) -> list[Any]:
    return [row[0] if len(row) == 1 else row for row in connection.execute(sql)]


def holding(index: SearchIndex, literal: bytes) -> set[str]:
    grams = trigram_query(literal)
    assert grams is not None
    return index.candidates(grams)


def test_the_tail_is_stored_whole_with_no_segment_and_always_a_candidate(
    connection: sqlite3.Connection, tmp_path: Path
) -> None:
    large = b"needle tail\n" * (PACKED_BODY_BYTES // 12 + 1)
    write_blobs(connection, [(oid("a"), b"needle posted\n")])
    write_tail(connection, [(oid("t"), large), (oid("bin"), b"needle\0"), (oid("a"), b"again")])
    assert rows(connection, "SELECT count(*) FROM segments") == [1]
    assert rows(connection, "SELECT blobs.oid FROM tail JOIN blobs USING (id)") == [oid("t")]
    # Not compressed while in the tail: a search reads its head's tail whole.
    assert rows(connection, "SELECT packed FROM bodies JOIN tail USING (id)") == [0]
    index = SearchIndex(tmp_path / "search-1.sqlite")
    assert holding(index, b"absent") == {oid("t")}  # a tail blob is named whatever the literal
    assert holding(index, b"posted") == {oid("a"), oid("t")}
    assert index.bodies([oid("t")]) == {oid("t"): large}
    assert index.tail_size() == (1, len(large))
    index.close()


def test_listing_a_tail_blob_in_a_segment_takes_it_out_of_the_tail(
    connection: sqlite3.Connection, tmp_path: Path
) -> None:
    large = b"needle tail\n" * (PACKED_BODY_BYTES // 12 + 1)
    write_tail(connection, [(oid("t"), large)])
    (tail_id,) = rows(connection, "SELECT id FROM tail")
    index = SearchIndex(tmp_path / "search-1.sqlite")
    assert holding(index, b"absent") == {oid("t")}
    write_blobs(connection, [(oid("t"), large), (oid("n"), b"needle new\n")])
    assert rows(connection, "SELECT count(*) FROM tail") == [0]
    assert rows(connection, "SELECT count(*) FROM segments") == [1]
    (body, packed) = connection.execute(
        "SELECT body, packed FROM bodies WHERE id = ?", (tail_id,)
    ).fetchone()
    assert packed == 1  # stored as a segment's bodies are
    assert zlib.decompress(body) == large
    assert holding(index, b"absent") == set()
    assert holding(index, b"tail") == {oid("t")}
    assert holding(index, b"needle") == {oid("t"), oid("n")}
    write_blobs(connection, [(oid("t"), large)])  # listed already: no second segment
    assert rows(connection, "SELECT count(*) FROM segments") == [1]
    index.close()


def test_a_blob_listed_after_later_ones_is_found_by_every_trigram(
    connection: sqlite3.Connection, tmp_path: Path
) -> None:
    """A tail blob keeps its older id in a later segment: a trigram's lists read in segment
    order are then not ascending, and intersecting them must still find it."""
    write_blobs(connection, [(oid("a"), b"alpha beta\n"), (oid("x"), b"beta only\n")])
    write_tail(connection, [(oid("t"), b"alpha beta tail\n")])
    write_blobs(connection, [(oid("b"), b"alpha beta later\n"), (oid("y"), b"alpha\n")])
    write_blobs(connection, [(oid("t"), b"alpha beta tail\n")])
    assert rows(connection, "SELECT count(*) FROM tail") == [0]
    index = SearchIndex(tmp_path / "search-1.sqlite")
    assert holding(index, b"alpha beta") == {oid("a"), oid("t"), oid("b")}
    assert holding(index, b"tail") == {oid("t")}
    index.close()


def test_a_search_meets_a_blob_listed_between_its_reads(
    connection: sqlite3.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tail is read before the segments: a write that lists a tail blob and takes it
    out of the tail, committed between a search's reads, cannot hide it."""
    write_blobs(connection, [(oid("a"), b"needle a\n")])
    write_tail(connection, [(oid("t"), b"needle t\n")])
    index = SearchIndex(tmp_path / "search-1.sqlite")
    assert holding(index, b"needle") == {oid("a"), oid("t")}  # the segments are now cached
    real_tail = SearchIndex.tail_oids

    def listed_first(self: SearchIndex) -> list[str]:
        write_blobs(connection, [(oid("t"), b"needle t\n")])  # another process, just before
        return real_tail(self)

    monkeypatch.setattr(SearchIndex, "tail_oids", listed_first)
    assert holding(index, b"needle") == {oid("a"), oid("t")}
    assert rows(connection, "SELECT count(*) FROM tail") == [0]
    index.close()


def test_posting_sizes_are_summed_over_every_segment_or_estimated_from_a_few(
    connection: sqlite3.Connection, tmp_path: Path
) -> None:
    for segment in range(6):  # segment n + 1 lists n + 1 bodies: a byte each
        write_blobs(
            connection,
            [(oid(f"s{segment}.{n}"), b"needle\n" * (n + 1)) for n in range(segment + 1)],
        )
    grams = trigram_query(b"needle")
    assert grams is not None
    index = SearchIndex(tmp_path / "search-1.sqlite")
    assert set(index.posting_sizes(grams).values()) == {21}
    assert set(index.posting_sizes(grams, 10).values()) == {21}  # more asked than there are
    # Segments 1, 3 and 5 (1 + 3 + 5 bytes), scaled to the six.
    assert set(index.posting_sizes(grams, 3).values()) == {18}
    index.close()
