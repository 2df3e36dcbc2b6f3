"""A re-review's first message (specification §10): our last reviewed head, read from our markers on
any forge, and the files changed since it, when it is an ancestor of this head."""

from __future__ import annotations

import asyncio
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pr_review_api.git_runner import GitError, run_git
from pr_review_api.publishing.markers import PriorState


@dataclass(frozen=True)
class ReReview:
    """Our last reviewed head, an ancestor of this one, and the files changed since."""

    last_head: str
    changed: tuple[str, ...]


async def re_review_of(state: PriorState, git_dir: Path, head_sha: str) -> ReReview | None:
    """`re_review` from markers already read (the caller also wants them for other ends)."""
    last = state.last_head
    if last is None or last == head_sha:
        return None
    return await asyncio.to_thread(_changed_since, git_dir, last, head_sha)


def _changed_since(git_dir: Path, last: str, head: str) -> ReReview | None:
    try:
        ancestor = run_git(
            git_dir, ["merge-base", "--is-ancestor", last, head], timeout=60, check=False
        )
        if ancestor.returncode != 0:
            return None
        names = run_git(
            git_dir,
            ["diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", last, head],
            timeout=120,
        ).stdout
    except (GitError, OSError, subprocess.SubprocessError):
        return None
    paths = [p.decode("utf-8", "replace") for p in names.split(b"\0") if p]
    return ReReview(last, tuple(sorted(paths)))
