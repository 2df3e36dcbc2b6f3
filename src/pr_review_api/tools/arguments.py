"""The strict argument models of the four tools, one per schema in `schemas.py`.

Each model mirrors its schema and is strict: extra properties, wrong types (no `"5"` or
`true` for an integer) and out-of-range values are protocol errors, caught before anything
runs (seed checks 7-8).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from pr_review_api.settings import (
    DEFAULT_DIFF_BYTES,
    MAX_DIFF_BYTES,
    MAX_DIFF_PATHS,
    MAX_LIST_PAGE,
    MAX_SEARCH_MATCHES,
    MAX_SEARCH_QUERY_CHARS,
)


class ToolArguments(BaseModel):
    """Base of the argument models: no extra fields, no coercion, immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ListFilesArguments(ToolArguments):
    """Arguments of list_repository_files."""

    path: str = ""
    limit: Annotated[int, Field(ge=1, le=MAX_LIST_PAGE)] = 100
    cursor: str | None = None


class ReadFileArguments(ToolArguments):
    """Arguments of read_repository_file."""

    path: str
    start_line: Annotated[int, Field(ge=1)] = 1
    end_line: Annotated[int, Field(ge=1)] | None = None


class SearchArguments(ToolArguments):
    """Arguments of search_repository."""

    query: Annotated[str, Field(min_length=1, max_length=MAX_SEARCH_QUERY_CHARS)]
    path: str = ""
    limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_MATCHES)] = 50


class DiffArguments(ToolArguments):
    """Arguments of inspect_git_diff."""

    paths: Annotated[list[str], Field(max_length=MAX_DIFF_PATHS)] = []
    max_bytes: Annotated[int, Field(ge=1, le=MAX_DIFF_BYTES)] = DEFAULT_DIFF_BYTES
