"""The four read-only repository tools: their schemas, argument models and implementations.

`TOOLS` is the source of truth for what the model is offered; it is sent to the provider
exactly as written here. Each argument model mirrors its schema and is strict: extra
properties, wrong types (no `"5"` or `true` for an integer) and out-of-range values are
protocol errors, caught before anything runs. Implementations read only the pinned head
commit (see repository.py) and return the result documents of CONTRACT section 7.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from pr_review_api.errors import ToolError
from pr_review_api.git.repository import PinnedRepository, split_path
from pr_review_api.jsonutil import compact_size, dumps_compact
from pr_review_api.settings import (
    DEFAULT_DIFF_BYTES,
    MAX_DIFF_BYTES,
    MAX_DIFF_PATHS,
    MAX_LIST_PAGE,
    MAX_READ_LINES,
    MAX_SEARCH_EXCERPT_CHARS,
    MAX_SEARCH_MATCHES,
    MAX_SEARCH_QUERY_CHARS,
    MAX_TOOL_RESULT_BYTES,
)

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "list_repository_files",
            "description": "List repository-relative files in deterministic lexical order.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Repository-relative directory; empty means root.",
                        "default": "",
                    },
                    "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 100},
                    "cursor": {
                        "type": ["string", "null"],
                        "description": "Last path returned by the preceding page.",
                        "default": None,
                    },
                },
                "required": [],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_repository_file",
            "description": "Read at most 400 numbered lines from a repository-relative text file.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "start_line": {"type": "integer", "minimum": 1, "default": 1},
                    "end_line": {"type": ["integer", "null"], "minimum": 1},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_repository",
            "description": "Find case-sensitive literal text in bounded repository source files.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": 512},
                    "path": {"type": "string", "default": ""},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 50},
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "inspect_git_diff",
            "description": (
                "Inspect the immutable base-to-head Git diff, optionally narrowed to paths."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "paths": {
                        "type": "array",
                        "items": {"type": "string"},
                        "maxItems": 50,
                        "default": [],
                    },
                    "max_bytes": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 131072,
                        "default": 65536,
                    },
                },
                "required": [],
                "additionalProperties": False,
            },
        },
    },
]


class ToolArguments(BaseModel):
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


def _escaped_bytes(text: str) -> int:
    """Bytes `text` takes inside a compact JSON string, quotes excluded."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2


def _cut_to_escaped(text: str, budget: int) -> str:
    """The longest prefix of `text` whose escaped form fits in `budget` bytes."""
    if _escaped_bytes(text) <= budget:
        return text
    low, high = 0, len(text)
    while low < high:  # binary search: escaping makes the size non-linear in length
        middle = (low + high + 1) // 2
        if _escaped_bytes(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def _normalized(path: str) -> str:
    return "/".join(split_path(path))


def list_repository_files(repo: PinnedRepository, args: ListFilesArguments) -> dict[str, Any]:
    """One page of the regular files under a directory, in lexical order."""
    directory = repo.resolve_directory(args.path)
    start, end = repo.files_under(directory)
    if args.cursor is not None:
        start = max(start, _cursor_start(repo, directory, args.cursor))
    result: dict[str, Any] = {
        "ok": True,
        "path": _normalized(args.path),
        "paths": [],
        "truncated": False,
        "next_cursor": None,
    }
    budget = MAX_TOOL_RESULT_BYTES - compact_size(result) - 2 * 4096  # room for the cursor
    paths: list[str] = result["paths"]
    for path in repo.snapshot.files[start : min(end, start + args.limit)]:
        cost = _escaped_bytes(path) + 3  # quotes and comma
        if cost > budget:
            break
        budget -= cost
        paths.append(path)
    if start + len(paths) < end:
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


def read_repository_file(repo: PinnedRepository, args: ReadFileArguments) -> dict[str, Any]:
    """At most 400 numbered lines of a UTF-8 text file, within 64 KiB of serialized JSON."""
    file = repo.resolve_file(args.path)
    lines = _split_lines(repo.read_source(file))
    total = len(lines)
    if (args.start_line > max(total, 1)) or (
        args.end_line is not None and args.end_line < args.start_line
    ):
        raise ToolError("invalid_range", "The requested line range is outside the file.")
    last = min(total, args.start_line + MAX_READ_LINES - 1)
    if args.end_line is not None:
        last = min(last, args.end_line)
    result: dict[str, Any] = {
        "ok": True,
        "path": _normalized(args.path),
        "start_line": args.start_line,
        "end_line": total,  # widest number, so the budget below is never optimistic
        "total_lines": total,
        "content": "",
        "truncated": False,
    }
    budget = MAX_TOOL_RESULT_BYTES - compact_size(result)
    numbered: list[str] = []
    cut = False
    for number in range(args.start_line, last + 1):
        line = f"{number}: {lines[number - 1]}"
        cost = _escaped_bytes(line) + (2 if numbered else 0)  # the "\n" separator
        if cost > budget:
            if not numbered:  # one giant line: show its beginning rather than nothing
                numbered.append(_cut_to_escaped(line, budget))
            cut = True
            break
        budget -= cost
        numbered.append(line)
    end_line = args.start_line + len(numbered) - 1 if numbered else args.start_line - 1
    result.update(
        end_line=max(end_line, 0),
        content="\n".join(numbered),
        truncated=cut or end_line < total,
    )
    return result


def _split_lines(text: str) -> list[str]:
    """Lines as git and editors number them: split on "\\n" only, CR of CRLF dropped."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


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
        "path": _normalized(args.path),
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
        match = {"path": hit.path, "line": hit.line, "excerpt": _excerpt(text, args.query)}
        cost = compact_size(match) + 1
        if len(matches) == args.limit or cost > budget:
            result["truncated"] = True
            break
        budget -= cost
        matches.append(match)
    return result


def _excerpt(line: str, query: str) -> str:
    """The line, or a window of it around the first match, marked with … where cut."""
    if len(line) <= MAX_SEARCH_EXCERPT_CHARS:
        return line
    width = MAX_SEARCH_EXCERPT_CHARS - 2
    found = max(line.find(query), 0)
    start = max(0, min(found - (width - len(query)) // 2, len(line) - width))
    window = line[start : start + width]
    return ("…" if start > 0 else "") + window + ("…" if start + width < len(line) else "")


def inspect_git_diff(repo: PinnedRepository, args: DiffArguments) -> dict[str, Any]:
    """The merge-base-to-head diff, optionally narrowed to paths, within `max_bytes`."""
    paths = list(dict.fromkeys(_normalized(path) for path in args.paths))
    if "" in paths:
        raise ToolError("invalid_path", "A diff path must name a file or directory.")
    raw, more = repo.diff(paths, args.max_bytes)
    text = raw.decode("utf-8", "replace")
    if more:
        text = text.removesuffix("\ufffd")  # a character cut in two by the byte cap
    kept = _cut_to_escaped(text, args.max_bytes)
    return {
        "ok": True,
        "paths": paths,
        "diff": kept,
        "bytes": len(kept.encode("utf-8")),
        "truncated": more or len(kept) < len(text),
    }


@dataclass(frozen=True)
class Tool:
    """A tool the model may call: its argument model and implementation."""

    name: str
    arguments: type[ToolArguments]
    run: Callable[[PinnedRepository, Any], dict[str, Any]]


TOOLS_BY_NAME: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool("list_repository_files", ListFilesArguments, list_repository_files),
        Tool("read_repository_file", ReadFileArguments, read_repository_file),
        Tool("search_repository", SearchArguments, search_repository),
        Tool("inspect_git_diff", DiffArguments, inspect_git_diff),
    )
}


@dataclass(frozen=True)
class ToolOutcome:
    """A tool's result document and its compact JSON, as the model will receive it."""

    result: dict[str, Any]
    content: str

    @property
    def ok(self) -> bool:
        return bool(self.result.get("ok"))

    @property
    def truncated(self) -> bool:
        return bool(self.result.get("truncated", False))

    @property
    def preview_text(self) -> str:
        """What a trace shows: the file or diff text, an error's message, else the JSON."""
        if not self.ok:
            return str(self.result["error"]["message"])
        for key in ("content", "diff"):
            if key in self.result:
                return str(self.result[key])
        return self.content


def execute_tool(repo: PinnedRepository, name: str, arguments: ToolArguments) -> ToolOutcome:
    """Run a validated call; a tool-level failure becomes an `ok: false` result."""
    try:
        result = TOOLS_BY_NAME[name].run(repo, arguments)
    except ToolError as error:
        result = error.to_result()
    return ToolOutcome(result, dumps_compact(result))


def tools_json() -> str:
    """The serialized `tools` value, as `pr-review schema tools` prints it."""
    return json.dumps(TOOLS, indent=2)
