"""The child's side of the syntax proof: frames in, one line per parse out."""

from __future__ import annotations

import io
import json
import time

from pr_review_api.loop.syntax_worker import serve, write_frame


def request(language: str, head: bytes, *edits: tuple[int, int, bytes]) -> bytes:
    sink = io.BytesIO()
    header = {"language": language, "edits": [[prefix, suffix] for prefix, suffix, _ in edits]}
    write_frame(sink, json.dumps(header).encode())
    write_frame(sink, head)
    for _, _, middle in edits:
        write_frame(sink, middle)
    return sink.getvalue()


def answers(data: bytes, deadline: float) -> list[bytes]:
    sink = io.BytesIO()
    serve(io.BytesIO(data), sink, deadline)
    return sink.getvalue().splitlines()


def test_each_file_gets_its_heads_count_then_each_edits() -> None:
    head = b"def f(x):\n    return x\n"
    # "def f(x" + "):" + "\n    return x\n": "):" taken out breaks the head.
    data = request("python", head, (7, 14, b""), (7, 14, b"):")) + request("c", b"int x;\n")
    assert answers(data, time.monotonic() + 60) == [b"0", b"1", b"0", b"0"]


def test_a_spent_deadline_answers_not_parsed() -> None:
    data = request("python", b"x = 1\n", (0, 0, b"y = 2\n"))
    assert answers(data, time.monotonic() - 1) == [b"-", b"-"]


def test_a_cut_request_ends_the_child_without_an_answer() -> None:
    data = request("python", b"x = 1\n", (0, 0, b"y = 2\n"))
    assert answers(data[:-3], time.monotonic() + 60) == []
