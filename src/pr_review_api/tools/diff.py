"""inspect_git_diff: the merge-base-to-head diff, optionally narrowed to paths, byte-capped."""

from __future__ import annotations

from typing import Any

from pr_review_api.errors import ToolError
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git_runner import GitError
from pr_review_api.tools.arguments import DiffArguments
from pr_review_api.tools.budget import cut_to_escaped, normalized


def inspect_git_diff(repo: PinnedRepository, args: DiffArguments) -> dict[str, Any]:
    """The merge-base-to-head diff, optionally narrowed to paths, within `max_bytes`."""
    paths = list(dict.fromkeys(normalized(path) for path in args.paths))
    if "" in paths:
        raise ToolError("invalid_path", "A diff path must name a file or directory.")
    try:
        raw, more = repo.diff(paths, args.max_bytes, check=True)
    except GitError:
        # git could not finish the diff. A blob the head's index already treats as absent
        # (missing from the object store) explains it: the model cannot read that file
        # either, so it gets what git could show, as before. Anything else (a corrupt
        # object) is a repository problem for the one git error edge (execute.py).
        if not _absent_changes(repo, paths):
            raise
        raw, more = repo.diff(paths, args.max_bytes)
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


def _absent_changes(repo: PinnedRepository, paths: list[str]) -> bool:
    """Whether a path the diff covers changed at the head yet is absent from its index."""
    entries = repo.snapshot.entries
    for status, path in repo.changed_files():
        inside = not paths or any(path == p or path.startswith(p + "/") for p in paths)
        if inside and status != "D" and path not in entries:
            return True
    return False
