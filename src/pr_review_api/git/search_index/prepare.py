"""A build's other process: it reads the blobs, compresses them and makes their posting lists.

`python -m pr_review_api.git.search_index.prepare GIT_DIR BATCH_BYTES BATCH_BLOBS [INDEX]` reads
blob ids on its standard input (one a line, to its end), streams those blobs from the
repository (or, for the tail's, from the index file INDEX, which stores their text whole
whatever git has since pruned) in batches and writes each batch, prepared
(`schema.prepare_blobs`), on its standard output; the build (build.py) stores each in one
transaction meanwhile. The work a batch needs no connection for is most of a build's: in a
process of its own it runs beside the writes on a second core, without the GIL, and its
memory (a segment's pairs, tens of MB) is returned when it exits rather than left to the
worker's heap.

A batch on the pipe, every number a little-endian uint32:

    blob count, then each blob: id length, id (ASCII), kind (0: holds a NUL byte, no
    body; 1: body; 2: compressed body), body length, body
    row count, then the rows' trigrams, then their lengths, then their bytes, concatenated
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from pr_review_api.git.blobs import stream_blobs
from pr_review_api.git.search_index.reader import MAX_QUERY_VARIABLES, SearchIndex
from pr_review_api.git.search_index.schema import PreparedBlobs, prepare_blobs

_COUNT = struct.Struct("<I")
_BLOB = struct.Struct("<BI")  # after its id: kind, body length
_KINDS = {None: 0, False: 1, True: 2}  # no body / plain / compressed


def batches(
    blobs: Iterator[tuple[str, bytes]], most_bytes: int, most_blobs: int
) -> Iterator[list[tuple[str, bytes]]]:
    """`blobs` in lists of about `most_bytes`, at most `most_blobs` blobs each."""
    batch: list[tuple[str, bytes]] = []
    size = 0
    for oid, data in blobs:
        batch.append((oid, data))
        size += len(data)
        if size >= most_bytes or len(batch) >= most_blobs:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def write_batch(stream: IO[bytes], prepared: PreparedBlobs) -> None:
    stream.write(_COUNT.pack(len(prepared.blobs)))
    for oid, body, packed in prepared.blobs:
        name = oid.encode("ascii")
        stream.write(_COUNT.pack(len(name)) + name)
        kind = _KINDS[packed if body is not None else None]
        stream.write(_BLOB.pack(kind, len(body or b"")))
        stream.write(body or b"")
    postings = prepared.postings
    stream.write(_COUNT.pack(len(postings.grams)))
    stream.write(postings.grams.astype("<u4").tobytes())
    stream.write(postings.lengths.astype("<u4").tobytes())
    stream.write(postings.data)
    stream.flush()


def read_batch(stream: IO[bytes]) -> PreparedBlobs | None:
    """The next batch on `stream`; None at its end. ValueError when it is cut short."""
    import numpy as np  # noqa: PLC0415  (see the package's "numpy" note)

    from pr_review_api.git.search_index.postings import Postings  # noqa: PLC0415

    head = stream.read(_COUNT.size)
    if not head:
        return None
    blobs: list[tuple[str, bytes | None, bool]] = []
    for _ in range(_read_count(head)):
        oid = _read(stream, _read_count(_read(stream, _COUNT.size))).decode("ascii")
        kind, length = _BLOB.unpack(_read(stream, _BLOB.size))
        body = _read(stream, length)
        blobs.append((oid, body if kind else None, kind == 2))
    count = _read_count(_read(stream, _COUNT.size))
    grams = np.frombuffer(_read(stream, 4 * count), dtype="<u4").astype(np.uint32)
    lengths = np.frombuffer(_read(stream, 4 * count), dtype="<u4").astype(np.uint32)
    data = _read(stream, int(lengths.sum(dtype=np.int64)))
    return PreparedBlobs(blobs, Postings(grams, lengths, data))


def _read_count(data: bytes) -> int:
    count: int = _COUNT.unpack(data)[0]
    return count


def _read(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise ValueError("the preparing process's output ended early")
    return data


def stored_blobs(path: Path, oids: list[str]) -> Iterator[tuple[str, bytes]]:
    """The text of each of `oids` an index file stores (IndexUnavailable when one is not)."""
    index = SearchIndex(path)
    try:
        for start in range(0, len(oids), MAX_QUERY_VARIABLES):
            for oid, data in index.bodies(oids[start : start + MAX_QUERY_VARIABLES]).items():
                if data is not None:
                    yield oid, data
    finally:
        index.close()


def main() -> None:
    git_dir, most_bytes, most_blobs = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    oids = sys.stdin.read().split()
    out = sys.stdout.buffer
    blobs = (
        stored_blobs(Path(sys.argv[4]), oids) if len(sys.argv) > 4 else stream_blobs(git_dir, oids)
    )
    for batch in batches(blobs, most_bytes, most_blobs):
        # The trigram table at once: this process's memory goes back when it exits.
        write_batch(out, prepare_blobs(batch, table_min_bytes=0))


if __name__ == "__main__":
    main()
