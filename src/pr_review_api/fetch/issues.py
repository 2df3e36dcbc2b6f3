"""What every forge's reader of a linked issue shares (specification §21): an answer's body when the
forge answered 200, else nothing (github/issues.py, gitlab/issues.py)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pr_review_api.errors import ReviewError

MAX_ISSUE_RESPONSE_BYTES = 1024 * 1024  # GitHub's body limit is 65,536 characters
# (title, body) of an issue, a number that names a pull request, or nothing readable.
IssueRead = tuple[str, str] | Literal["pull_request", "unreadable"]


class Answer(Protocol):
    """A forge client's answer: its status and (for a 2xx) its capped body."""

    @property
    def status(self) -> int: ...
    @property
    def body(self) -> bytes: ...


async def answered_body(answer: Awaitable[Answer]) -> bytes | None:
    """A 200 answer's body, or None: refused, missing, or the host failed (never an error:
    an issue that cannot be read is a note, specification §21). Every forge's issue reader shares
    it."""
    try:
        response = await answer
    except ReviewError:
        return None
    return response.body if response.status == 200 else None


class _IssueWire(BaseModel):
    """An issue where every pull request is an issue too (GitHub's and Gitea's REST APIs): a
    pull request's answer carries a non-null `pull_request`."""

    model_config = ConfigDict(extra="ignore", strict=True)

    number: Annotated[int, Field(ge=1)]
    title: str
    body: str | None = None
    pull_request: object = None


def issue_of(body: bytes | None) -> IssueRead:
    """What an issue endpoint's 200 body says (`answered_body`'s), validated: (title, body),
    "pull_request", or "unreadable" (no answer, or not an issue document)."""
    try:
        issue = None if body is None else _IssueWire.model_validate_json(body)
    except ValidationError:
        issue = None
    if issue is None:
        return "unreadable"
    if issue.pull_request is not None:
        return "pull_request"
    return issue.title, issue.body or ""
