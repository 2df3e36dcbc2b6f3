"""What every forge's reader of a linked issue shares (CONTRACT 21): an answer's body when the
forge answered 200, else nothing (github/issues.py, gitlab/issues.py)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

from pr_review_api.errors import ReviewError


class Answer(Protocol):
    """A forge client's answer: its status and (for a 2xx) its capped body."""

    @property
    def status(self) -> int: ...
    @property
    def body(self) -> bytes: ...


async def answered_body(answer: Awaitable[Answer]) -> bytes | None:
    """A 200 answer's body, or None: refused, missing, or the host failed (never an error:
    an issue that cannot be read is a note, CONTRACT 21). Every forge's issue reader shares it."""
    try:
        response = await answer
    except ReviewError:
        return None
    return response.body if response.status == 200 else None
