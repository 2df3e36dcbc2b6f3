"""What the tools share: sizes inside compact JSON, cutting to a byte budget, echoed paths."""

from __future__ import annotations

import json

from pr_review_api.git.paths import split_path


def escaped_bytes(text: str) -> int:
    """Bytes `text` takes inside a compact JSON string, quotes excluded."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2


def cut_to_escaped(text: str, budget: int) -> str:
    """The longest prefix of `text` whose escaped form fits in `budget` bytes."""
    if escaped_bytes(text) <= budget:
        return text
    low, high = 0, len(text)
    while low < high:  # binary search: escaping makes the size non-linear in length
        middle = (low + high + 1) // 2
        if escaped_bytes(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def normalized(path: str) -> str:
    """A requested path as results echo it: components joined by single slashes."""
    return "/".join(split_path(path))
