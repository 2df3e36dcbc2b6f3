"""Which finding one of our threads stands for, and when a new head fixed it, on any forge
(specification §§10, 15).

A finding stands for a thread of ours when it has the same path, the same title as the thread's
first comment shows it, and a line within `NEAR_LINES` of the comment's (`same_finding`). Such
a finding is not posted again while its thread is open. `resolve_fixed_threads` resolves the
threads a new head fixed: the new review reports neither its fingerprint nor the same finding
near its line, nobody else's reply in it waits for an answer of ours, and its anchored line
changed between the head it was posted on and the new head (git/line_changes.py). Each forge
reads its threads into `OpenThread`s (github/, gitlab/ and gitea/'s `resolve`) and resolves
one its own way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from pr_review_api.git.line_changes import line_changed
from pr_review_api.model import Finding, ReviewResult

# A finding reported again after its line's text changed moved at most this many lines.
NEAR_LINES = 3

H = TypeVar("H")


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


@dataclass(frozen=True)
class Anchor:
    """Where a comment of ours was posted: its path, its line, the head it was posted on."""

    path: str
    line: int
    posted_on: str

    @classmethod
    def of(cls, path: str | None, line: int | None, posted_on: str | None) -> Anchor | None:
        """The anchor, or None when the forge does not say one of its parts."""
        if path is None or line is None or posted_on is None:
            return None
        return cls(path, line, posted_on)

    def changed(self, git_dir: Path, head_sha: str) -> bool:
        """Whether the anchored line changed between the head it was posted on and `head_sha`."""
        return line_changed(git_dir, self.path, self.line, self.posted_on, head_sha)


@dataclass(frozen=True)
class NewHead:
    """A re-review's head as resolving reads it: the repository, the head, and what its
    review reports (its findings' fingerprints, and its findings)."""

    git_dir: Path
    head_sha: str
    reported: Collection[str]
    findings: Sequence[Finding]

    @classmethod
    def of(cls, result: ReviewResult, git_dir: Path, reported: Collection[str]) -> NewHead:
        """The head `result` reviewed, its fingerprints `reported`."""
        return cls(git_dir, result.revisions.head_sha, reported, result.review.findings)


@dataclass(frozen=True)
class OpenThread(Generic[H]):
    """An unresolved thread of one of our findings, as `resolve_fixed_threads` reads it; `handle` is
    what its forge resolves it by."""

    handle: H
    fingerprint: str
    path: str | None
    line: int | None  # where the forge shows its first comment now (`same_finding`)
    body: str  # its first comment's
    anchor: Anchor | None  # None: never resolved
    question_waits: bool = False  # someone else wrote after our last comment in it


async def resolve_fixed_threads(
    threads: Iterable[OpenThread[H]],
    new_head: NewHead,
    *,
    shown_as: Callable[[str], str],
    resolve: Callable[[H], Awaitable[bool | None]],
) -> int | None:
    """Resolve the threads `new_head` fixed (module docstring) with the forge's `resolve`; how
    many. `resolve` says None when the forge cannot resolve a thread at all: then, before any
    was resolved, the answer is None."""
    git_dir, head_sha = new_head.git_dir, new_head.head_sha
    reported, findings = new_head.reported, new_head.findings
    resolved = 0
    for thread in threads:
        if thread.fingerprint in reported or thread.question_waits:
            continue
        if any(
            same_finding(f, thread.path, thread.line, thread.body, shown_as=shown_as)
            for f in findings
        ):
            continue  # reported again, its line's text changed
        anchor = thread.anchor
        if anchor is None or not await asyncio.to_thread(anchor.changed, git_dir, head_sha):
            continue
        answer = await resolve(thread.handle)
        if answer is None and resolved == 0:
            return None
        resolved += bool(answer)
    return resolved
