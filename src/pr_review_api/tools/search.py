"""search_repository: case-sensitive literal matches at the head, bounded in count and size."""

from __future__ import annotations

from typing import Any

from pr_review_api.errors import ToolError
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.jsonutil import compact_size
from pr_review_api.settings import MAX_SEARCH_EXCERPT_CHARS, MAX_TOOL_RESULT_BYTES
from pr_review_api.tools.arguments import SearchArguments
from pr_review_api.tools.budget import normalized


def search_repository(repo: PinnedRepository, args: SearchArguments) -> dict[str, Any]:
    """Case-sensitive literal matches at the head commit, bounded in count and size."""
    target = repo.resolve(args.path)
    if target.entry is not None:
        if target.entry.kind != "file":
            raise ToolError("not_a_file", "The search path is not a file or directory.")
        if not repo.is_searchable(target.path):
            raise ToolError("file_too_large", "The file is larger than 1 MiB.")
    result: dict[str, Any] = {
        "ok": True,
        "query": args.query,
        "path": normalized(args.path),
        "matches": [],
        "truncated": False,
    }
    if "\n" in args.query or "\0" in args.query:
        return result  # a literal spanning lines can never match one line
    matches: list[dict[str, Any]] = result["matches"]
    budget = MAX_TOOL_RESULT_BYTES - compact_size(result)
    for hit in repo.grep(args.query, target.path):
        if not repo.is_searchable(hit.path) or repo.is_binary(hit.path):
            continue
        try:
            text = hit.text.decode("utf-8").removesuffix("\r")
        except UnicodeDecodeError:
            continue
        match = {"path": hit.path, "line": hit.line, "excerpt": excerpt(text, args.query)}
        cost = compact_size(match) + 1
        if len(matches) == args.limit or cost > budget:
            result["truncated"] = True
            break
        budget -= cost
        matches.append(match)
    return result


def excerpt(line: str, query: str) -> str:
    """The line, or a window of it around the first match, marked with … where cut."""
    if len(line) <= MAX_SEARCH_EXCERPT_CHARS:
        return line
    width = MAX_SEARCH_EXCERPT_CHARS - 2
    found = max(line.find(query), 0)
    start = max(0, min(found - (width - len(query)) // 2, len(line) - width))
    window = line[start : start + width]
    return ("…" if start > 0 else "") + window + ("…" if start + width < len(line) else "")
