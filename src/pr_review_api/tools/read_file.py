"""read_repository_file: at most 400 numbered lines of a UTF-8 text file at the head."""

from __future__ import annotations

from typing import Any

from pr_review_api.errors import ToolError
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.jsonutil import compact_size
from pr_review_api.settings import MAX_READ_LINES, MAX_TOOL_RESULT_BYTES
from pr_review_api.tools.arguments import ReadFileArguments
from pr_review_api.tools.budget import cut_to_escaped, escaped_bytes, normalized


def read_repository_file(repo: PinnedRepository, args: ReadFileArguments) -> dict[str, Any]:
    """At most 400 numbered lines of a UTF-8 text file, within 64 KiB of serialized JSON."""
    file = repo.resolve_file(args.path)
    lines = split_lines(repo.read_source(file))
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
        "path": normalized(args.path),
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
        cost = escaped_bytes(line) + (2 if numbered else 0)  # the "\n" separator
        if cost > budget:
            if not numbered:  # one giant line: show its beginning rather than nothing
                numbered.append(cut_to_escaped(line, budget))
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


def split_lines(text: str) -> list[str]:
    """Lines as git and editors number them: split on "\\n" only, CR of CRLF dropped."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]
