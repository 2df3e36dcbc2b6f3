"""Which finding one of our threads stands for, on any forge (specification §§10, 15): same path,
same title as the thread's first comment shows it, a line within `NEAR_LINES` of the
comment's. Such a finding is not posted again while its thread is open, and its thread is not
resolved as fixed (github/resolve.py, gitlab/resolve.py)."""

from __future__ import annotations

from collections.abc import Callable

from pr_review_api.model import Finding

# A finding reported again after its line's text changed moved at most this many lines.
NEAR_LINES = 3


def same_finding(
    finding: Finding,
    path: str | None,
    line: int | None,
    body: str,
    *,
    shown_as: Callable[[str], str],
) -> bool:
    """Whether `finding` is the one our comment (`path`, `line`, `body`) was posted for: same
    path, same title as the comment's first line shows it (`**severity** · title`, escaped as
    the forge's `Layout` escapes it: `shown_as`), a line within `NEAR_LINES`."""
    if path != finding.path or line is None or finding.line is None:
        return False
    if abs(finding.line - line) > NEAR_LINES:
        return False
    first = body.lstrip().split("\n", 1)[0]
    _, separator, shown = first.partition(" · ")
    return bool(separator) and shown == shown_as(finding.title)
