"""The child process that parses one review's files for the suggestion check (specification §14).

`python -I -m pr_review_api.loop.syntax_worker SECONDS BYTES` limits its own address space to
BYTES before it parses anything, then answers requests from its standard input until it ends.
Every parse stops SECONDS after the start (`loop/syntax.py`'s deadline). One file's tree is
alive at a time: it is dropped before the next request is read. Past the memory limit the
process dies (tree-sitter aborts when an allocation fails); the parent reads the end of its
output as "not parsed" (`loop/syntax_process.py`).

The wire, parent to child: frames of a 4-byte big-endian length and that many bytes. Per file,
a JSON header `{"language": str, "edits": [[prefix, suffix], ...]}`, the head's bytes, then one
frame per edit holding the bytes that replace the head's between `prefix` and the last `suffix`
bytes. Child to parent: one line per parse, the head's then each edit's, each an error count
or `-` for a parse that did not finish.

This module imports nothing but the parser, so that the child starts in tens of milliseconds.
"""

from __future__ import annotations

import json
import resource
import struct
import sys
import time
from collections.abc import Iterator
from typing import IO

from pr_review_api.loop.syntax import ParseTooSlow, SyntaxBaseline

_LENGTH = struct.Struct(">I")
NOT_PARSED = b"-"


def write_frame(sink: IO[bytes], data: bytes) -> None:
    """One frame: its length, then its bytes."""
    sink.write(_LENGTH.pack(len(data)))
    sink.write(data)


def _read_exactly(source: IO[bytes], size: int) -> bytes | None:
    data = source.read(size)
    return data if len(data) == size else None


def _read_frame(source: IO[bytes]) -> bytes | None:
    """The next frame's bytes, or None at the end of the input."""
    length = _read_exactly(source, _LENGTH.size)
    return None if length is None else _read_exactly(source, _LENGTH.unpack(length)[0])


def _counts(
    language: str, head: bytes, edits: list[tuple[int, int, bytes]], deadline: float
) -> Iterator[int | None]:
    """The head's error count, then each edit's; None for a parse that did not finish."""
    try:
        baseline = SyntaxBaseline(language, head, deadline)
    except ParseTooSlow:
        yield from [None] * (len(edits) + 1)
        return
    yield baseline.errors
    for prefix, suffix, middle in edits:
        try:
            yield baseline.errors_with(
                head[:prefix] + middle + head[len(head) - suffix :], deadline
            )
        except ParseTooSlow:
            yield None


def serve(source: IO[bytes], sink: IO[bytes], deadline: float) -> None:
    """Answer each file's request until the input ends."""
    while (header := _read_frame(source)) is not None:
        request = json.loads(header)
        head = _read_frame(source)
        middles = [_read_frame(source) for _ in request["edits"]]
        if head is None or None in middles:
            return
        edits = [
            (int(prefix), int(suffix), middle)
            for (prefix, suffix), middle in zip(request["edits"], middles, strict=True)
            if middle is not None
        ]
        for count in _counts(str(request["language"]), head, edits, deadline):
            sink.write(NOT_PARSED if count is None else str(count).encode())
            sink.write(b"\n")
        sink.flush()


def main() -> None:
    seconds, memory = float(sys.argv[1]), int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    serve(sys.stdin.buffer, sys.stdout.buffer, time.monotonic() + seconds)


if __name__ == "__main__":
    main()
