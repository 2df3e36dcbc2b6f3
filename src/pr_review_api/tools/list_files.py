"""list_repository_files: one page of the regular files under a directory, in lexical order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pr_review_api.errors import ToolError
from pr_review_api.git.paths import split_path
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.jsonutil import compact_size
from pr_review_api.settings import MAX_TOOL_RESULT_BYTES
from pr_review_api.tools.arguments import ListFilesArguments
from pr_review_api.tools.budget import escaped_bytes, normalized


def list_repository_files(repo: PinnedRepository, args: ListFilesArguments) -> dict[str, Any]:
    """One page of the regular files under a directory, in lexical order."""
    early = repo.first_listed(args.path, args.limit + 1) if args.cursor is None else None
    if early is not None:  # the index is still being made: its first page, read from the tree
        listed = early[1]
        return _page(args, listed[: args.limit], lambda taken: taken < len(listed))
    directory = repo.resolve_directory(args.path)
    start, end = repo.files_under(directory)
    if args.cursor is not None:
        start = max(start, _cursor_start(repo, directory, args.cursor))
    candidates = repo.snapshot.files[start : min(end, start + args.limit)]
    return _page(args, candidates, lambda taken: start + taken < end)


def _page(
    args: ListFilesArguments, candidates: list[str], more_after: Callable[[int], bool]
) -> dict[str, Any]:
    """The page of the listable paths `candidates` (the next ones in order) that fits the
    result's bytes; `more_after(n)` says whether listable paths follow the first n."""
    result: dict[str, Any] = {
        "ok": True,
        "path": normalized(args.path),
        "paths": [],
        "truncated": False,
        "next_cursor": None,
    }
    budget = MAX_TOOL_RESULT_BYTES - compact_size(result) - 2 * 4096  # room for the cursor
    paths: list[str] = result["paths"]
    for path in candidates:
        cost = escaped_bytes(path) + 3  # quotes and comma
        if cost > budget:
            break
        budget -= cost
        paths.append(path)
    if more_after(len(paths)):
        result["truncated"] = True
        result["next_cursor"] = paths[-1] if paths else args.cursor
    return result


def _cursor_start(repo: PinnedRepository, directory: str, cursor: str) -> int:
    try:
        parts = split_path(cursor)
    except ToolError:
        raise ToolError(
            "invalid_cursor", "The cursor is not a path from a preceding page."
        ) from None
    inside = not directory or parts[: directory.count("/") + 1] == directory.split("/")
    if not parts or not inside:
        raise ToolError("invalid_cursor", "The cursor is not a path from a preceding page.")
    return repo.page_start(directory, "/".join(parts))
