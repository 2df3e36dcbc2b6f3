"""Whether a line a review comment was anchored on changed between two commits (specification §15).

A thread of ours is resolved as fixed only when the line it was posted on changed since the
head it was posted on (github/resolve.py, gitlab/resolve.py): `git diff -U0` of that file
between the two commits, read for a hunk that covers the line in the old commit's numbering,
or inserts lines right at it. Any failure of git (a commit the cache no longer has) is "not
changed": a thread is never resolved on a guess.
"""

from __future__ import annotations

import re
from pathlib import Path

from pr_review_api.git_runner import GIT_FAILURES, run_git

_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", re.MULTILINE)


def line_changed(git_dir: Path, path: str, line: int, posted_on: str, head_sha: str) -> bool:
    """Whether line `line` of `path` at `posted_on` changed between `posted_on` and the head."""
    if posted_on == head_sha:
        return False
    try:
        done = run_git(git_dir, ["diff", "--no-ext-diff", "-U0", posted_on, head_sha, "--", path])
    except GIT_FAILURES:
        return False
    for match in _HUNK.finditer(done.stdout):
        start = int(match[1])
        count = 1 if match[2] is None else int(match[2])
        if count == 0 and start in (line - 1, line):
            return True  # lines inserted right at it
        if start <= line < start + count:
            return True
    return False
