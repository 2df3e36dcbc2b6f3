"""`GET /v1/review-jobs`: the query of a listing, read strictly, and the page it answers.

The query may hold `repository` (`owner/repo`, any case), `status` (one of the five job
statuses), `limit` (1 to 100, default 20) and `cursor` (the `next_cursor` of the previous
page), each at most once. Anything else (another name, a repeated name, a value out of its
rule, bytes that are not UTF-8) is a 422 `invalid_request` with a fixed sentence that echoes
nothing of the query. The page:

    {"jobs": [<the document of GET /v1/review-jobs/{id}>, ...],   newest first
     "next_cursor": str | null,                                  null on the last page
     "next": "/v1/review-jobs?...&cursor=..." | null}            the same filters, next page
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import parse_qsl, urlencode

from pydantic import BaseModel, Field

from pr_review_api.errors import InvalidRequest
from pr_review_api.forge.urls import is_repository_name
from pr_review_api.jobs.listing import DEFAULT_PAGE_SIZE, JOB_STATUSES, MAX_PAGE_SIZE
from pr_review_api.jobs.records import JobFilter, JobPage

LISTING_PATH = "/v1/review-jobs"
QUERY_NAMES = ("repository", "status", "limit", "cursor")
_MAX_QUERY_BYTES = 2048
_MAX_LIMIT_DIGITS = 3


def parse_listing_query(
    raw: bytes, default_limit: int = DEFAULT_PAGE_SIZE
) -> tuple[JobFilter, int]:
    """The filter and page size a raw query string asks for; `InvalidRequest` otherwise."""
    values = _query_values(raw)
    owner = repo = None
    if "repository" in values:
        owner, repo = parse_repository(values["repository"])
    status = values.get("status")
    if status is not None and status not in JOB_STATUSES:
        raise InvalidRequest("status must be one of " + ", ".join(JOB_STATUSES) + ".")
    limit = default_limit
    if "limit" in values:
        limit = parse_limit(values["limit"])
    after = None
    if "cursor" in values:
        after = parse_cursor(values["cursor"])
    return JobFilter(owner=owner, repo=repo, status=status, after=after), limit


def _query_values(raw: bytes) -> dict[str, str]:
    if len(raw) > _MAX_QUERY_BYTES:
        raise InvalidRequest("The query string is too long.")
    try:
        text = raw.decode("utf-8")
        pairs = parse_qsl(
            text,
            keep_blank_values=True,
            strict_parsing=bool(text),
            errors="strict",
            max_num_fields=len(QUERY_NAMES),
        )
    except (UnicodeDecodeError, ValueError):
        raise InvalidRequest(
            "The query may hold only repository, status, limit and cursor, each once."
        ) from None
    values: dict[str, str] = {}
    for name, value in pairs:
        if name not in QUERY_NAMES or name in values:
            raise InvalidRequest(
                "The query may hold only repository, status, limit and cursor, each once."
            )
        values[name] = value
    return values


def parse_repository(value: str) -> tuple[str, str]:
    """`owner/repo` with GitHub's rules for both names."""
    owner, slash, repo = value.partition("/")
    if not slash or not is_repository_name(owner, repo):
        raise InvalidRequest("repository must be owner/repo.")
    return owner, repo


def parse_limit(value: str) -> int:
    """A page size from 1 to `MAX_PAGE_SIZE`, written in ASCII digits."""
    if not (value.isascii() and value.isdigit() and len(value) <= _MAX_LIMIT_DIGITS):
        raise InvalidRequest(f"limit must be a whole number from 1 to {MAX_PAGE_SIZE}.")
    limit = int(value)
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise InvalidRequest(f"limit must be a whole number from 1 to {MAX_PAGE_SIZE}.")
    return limit


def parse_cursor(value: str) -> uuid.UUID:
    """A cursor is a job id in its canonical form."""
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        raise InvalidRequest("cursor is not a cursor this listing gave.") from None
    if str(parsed) != value.lower():
        raise InvalidRequest("cursor is not a cursor this listing gave.")
    return parsed


def page_document(page: JobPage, where: JobFilter, limit: int) -> dict[str, Any]:
    """The listing's answer (see the module docstring)."""
    next_cursor = None if page.next_after is None else str(page.next_after)
    next_link = None
    if next_cursor is not None:
        query: dict[str, str] = {}
        if where.owner is not None and where.repo is not None:
            query["repository"] = f"{where.owner}/{where.repo}"
        if where.status is not None:
            query["status"] = where.status
        query["limit"] = str(limit)
        query["cursor"] = next_cursor
        next_link = LISTING_PATH + "?" + urlencode(query)
    return {
        "jobs": [record.document() for record in page.jobs],
        "next_cursor": next_cursor,
        "next": next_link,
    }


class JobPageDocument(BaseModel):
    """A page of `GET /v1/review-jobs` (for the OpenAPI document; the route builds dicts)."""

    jobs: list[dict[str, Any]] = Field(
        description="Newest first; each one the document of GET /v1/review-jobs/{id}."
    )
    next_cursor: str | None = Field(description="The next page's cursor; null on the last page.")
    next: str | None = Field(description="The next page with the same filters, or null.")


LISTING_PARAMETERS: list[dict[str, Any]] = [
    {
        "name": "repository",
        "in": "query",
        "required": False,
        "description": "Only jobs of this repository, `owner/repo` (any case).",
        "schema": {"type": "string"},
    },
    {
        "name": "status",
        "in": "query",
        "required": False,
        "description": "Only jobs in this status.",
        "schema": {"type": "string", "enum": list(JOB_STATUSES)},
    },
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "description": "Jobs on one page.",
        "schema": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_PAGE_SIZE,
            "default": DEFAULT_PAGE_SIZE,
        },
    },
    {
        "name": "cursor",
        "in": "query",
        "required": False,
        "description": "The `next_cursor` of the previous page.",
        "schema": {"type": "string", "format": "uuid"},
    },
]
