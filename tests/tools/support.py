"""Helpers the tool tests share: call a tool as the protocol does, read its result."""

from __future__ import annotations

import json
from typing import Any, get_args

from pr_review_api.errors import ToolErrorCode
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.tools import (
    TOOLS_BY_NAME,
    ToolOutcome,
    execute_tool,
)
from tests.hostile.world import (
    GIT_DIR_SENTINEL,
    LOOKALIKE_MARKER,
    OUTSIDE_SENTINEL,
)

TOOL_NAMES = [
    "list_repository_files",
    "read_repository_file",
    "search_repository",
    "inspect_git_diff",
]
ERROR_CODES: set[str] = set(get_args(ToolErrorCode))


def call(repo: PinnedRepository, name: str, **arguments: Any) -> ToolOutcome:
    """Validate arguments as the protocol does (a parsed JSON object), then run the tool."""
    validated = TOOLS_BY_NAME[name].arguments.model_validate(arguments)
    outcome = execute_tool(repo, name, validated)
    assert json.loads(outcome.content) == outcome.result
    for sentinel in (OUTSIDE_SENTINEL, GIT_DIR_SENTINEL, LOOKALIKE_MARKER):
        assert sentinel not in outcome.content
    return outcome


def error_code(outcome: ToolOutcome) -> str:
    assert outcome.result["ok"] is False
    assert set(outcome.result) == {"ok", "error"}
    assert set(outcome.result["error"]) == {"code", "message"}
    return str(outcome.result["error"]["code"])


def size(outcome: ToolOutcome) -> int:
    return len(outcome.content.encode("utf-8"))


def escaped_size(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2


def numbered(text: str, start: int = 1) -> str:
    return "\n".join(f"{n}: {line}" for n, line in enumerate(text.splitlines(), start))


def list_all(repo: PinnedRepository, path: str, limit: int) -> tuple[list[str], list[int]]:
    """Page through a directory until exhaustion; every page's size."""
    paths: list[str] = []
    sizes: list[int] = []
    cursor: str | None = None
    for _ in range(1000):
        outcome = call(repo, "list_repository_files", path=path, limit=limit, cursor=cursor)
        assert outcome.ok, outcome.content
        sizes.append(size(outcome))
        paths += outcome.result["paths"]
        if not outcome.result["truncated"]:
            assert outcome.result["next_cursor"] is None
            return paths, sizes
        cursor = outcome.result["next_cursor"]
        assert cursor == paths[-1]
    raise AssertionError("paging never ended")
