"""inspect_git_diff: the merge-base-to-head diff, optionally narrowed to paths, byte-capped."""

from __future__ import annotations

from typing import Any

from pr_review_api.errors import ToolError
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.tools.arguments import DiffArguments
from pr_review_api.tools.budget import cut_to_escaped, normalized


def inspect_git_diff(repo: PinnedRepository, args: DiffArguments) -> dict[str, Any]:
    """The merge-base-to-head diff, optionally narrowed to paths, within `max_bytes`."""
    paths = list(dict.fromkeys(normalized(path) for path in args.paths))
    if "" in paths:
        raise ToolError("invalid_path", "A diff path must name a file or directory.")
    raw, more = repo.diff(paths, args.max_bytes, check=True)  # a failed git is no diff
    text = raw.decode("utf-8", "replace")
    if more:
        text = text.removesuffix("\ufffd")  # a character cut in two by the byte cap
    kept = cut_to_escaped(text, args.max_bytes)
    return {
        "ok": True,
        "paths": paths,
        "diff": kept,
        "bytes": len(kept.encode("utf-8")),
        "truncated": more or len(kept) < len(text),
    }
