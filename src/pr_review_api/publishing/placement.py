"""Where each finding goes: inline on a hunk line of its file, or in the body (specification §10).

A finding is inline when its line is an added or context line of a hunk of its file's diff
from the merge base to the head; at most `max_inline` are, most severe first, then path, then
line. Its fingerprint uses the text of its line at the head, so it survives lines moving.

A finding with a suggestion (specification §14) whose whole range lies in one hunk is committable:
inline over that range (`start_line`..`line`, `line` its last line), its body ending with a
`suggestion` block. Any other suggestion is shown as a diff, clearly not committable.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pr_review_api.git.hunks import FileHunks
from pr_review_api.git_runner import GitError, run_git
from pr_review_api.model import (
    SEVERITIES,
    Finding,
    Suggestion,
)
from pr_review_api.publishing.markers import holds_marker

RANK = {severity: rank for rank, severity in enumerate(SEVERITIES)}


@dataclass(frozen=True)
class Placed:
    """A finding, its fingerprint and, with a suggestion, what it replaces and whether it is
    committable (its range inside one hunk)."""

    finding: Finding
    fingerprint: str
    # The head's text of the suggestion's lines (None: no suggestion, or its file unread).
    replaced: tuple[str, ...] | None = None
    committable: bool = False

    @property
    def suggestion(self) -> Suggestion | None:
        return self.finding.offered()

    @property
    def line(self) -> int | None:
        """The comment's line: a committable suggestion's last line, else the finding's."""
        suggestion = self.suggestion
        if self.committable and suggestion is not None:
            return suggestion.end_line
        return self.finding.line

    @property
    def start_line(self) -> int | None:
        """A committable suggestion's first line, when its range spans more than one."""
        suggestion = self.suggestion
        if self.committable and suggestion is not None:
            return suggestion.start_line if suggestion.start_line < suggestion.end_line else None
        return None


def placed_order(placed: Placed) -> tuple[int, str, int]:
    """Most severe first, then path, then line (no line first)."""
    return (RANK[placed.finding.severity], placed.finding.path, placed.line or 0)


@dataclass
class Placement:
    inline: list[Placed] = field(default_factory=list)
    body: list[Placed] = field(default_factory=list)
    skipped: int = 0


def moved_to_body(placement: Placement, inline: list[Placed], moved: Sequence[Placed]) -> Placement:
    """`placement` with `inline` left inline and `moved` (findings the forge would not take
    inline) in the body, in the body's order."""
    body = sorted([*moved, *placement.body], key=placed_order)
    return Placement(inline=inline, body=body, skipped=placement.skipped)


def carried(placement: Placement, shown: int) -> list[str]:
    """The fingerprints a publication carries: its inline findings', and its body's first
    `shown` (those that fit)."""
    return [p.fingerprint for p in [*placement.inline, *placement.body[:shown]]]


def _blob_texts(git_dir: Path, head: str, paths: set[str]) -> dict[str, str]:
    texts: dict[str, str] = {}
    for path in paths:
        try:
            blob = run_git(git_dir, ["cat-file", "blob", f"{head}:{path}"], timeout=60).stdout
        except (GitError, OSError, subprocess.SubprocessError):
            continue
        texts[path] = blob.decode("utf-8", "replace")
    return texts


def line_texts(git_dir: Path, head: str, findings: Sequence[Finding]) -> dict[str, list[str]]:
    """The lines of each file a finding names a line of (for fingerprints)."""
    texts = _blob_texts(git_dir, head, {f.path for f in findings if f.line is not None})
    return {path: text.splitlines() for path, text in texts.items()}


def suggestion_texts(git_dir: Path, head: str, findings: Sequence[Finding]) -> dict[str, list[str]]:
    """The lines, as an editor numbers them, of each file a suggestion replaces lines of."""
    paths = {f.path for f in findings if f.offered() is not None}
    texts = _blob_texts(git_dir, head, paths)
    return {path: _editor_lines(text) for path, text in texts.items()}


def _editor_lines(text: str) -> list[str]:
    lines = text.replace("\r\n", "\n").split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def fingerprint_of(finding: Finding, texts: dict[str, list[str]]) -> str:
    """The finding's fingerprint with the text of its line at the head (specification §10)."""
    lines = texts.get(finding.path)
    if finding.line is None or lines is None or finding.line > len(lines):
        return finding.fingerprint()
    return finding.fingerprint(lines[finding.line - 1])


def place(
    findings: Sequence[Finding],
    hunks: dict[str, FileHunks],
    fingerprints: Sequence[str],
    already: set[str],
    max_inline: int,
    *,
    texts: dict[str, list[str]] | None = None,
) -> Placement:
    """Which findings go inline, which in the body, how many were posted before.

    `texts` (`suggestion_texts`) gives the lines suggestions replace; a suggestion whose
    file is not in it is shown as its replacement alone, never committable."""
    placement = Placement()
    candidates: list[Placed] = []
    seen: set[str] = set()
    for finding, fingerprint in zip(findings, fingerprints, strict=True):
        if fingerprint in already or fingerprint in seen:
            placement.skipped += 1
            continue
        seen.add(fingerprint)
        file = hunks.get(finding.path)
        placed = _placed(finding, fingerprint, file, (texts or {}).get(finding.path))
        if placed.line is not None and file is not None and file.anchors(placed.line):
            candidates.append(placed)
        else:
            placement.body.append(placed)
    candidates.sort(key=placed_order)
    placement.inline = candidates[:max_inline]
    placement.body = sorted([*candidates[max_inline:], *placement.body], key=placed_order)
    return placement


def _placed(
    finding: Finding, fingerprint: str, file: FileHunks | None, lines: list[str] | None
) -> Placed:
    suggestion = finding.offered()
    if suggestion is None:
        return Placed(finding, fingerprint)
    start, end = suggestion.start_line, suggestion.end_line
    if lines is None or end > len(lines):
        return Placed(finding, fingerprint)  # the head's text is unknown: a replacement only
    committable = (
        file is not None
        and file.spans(start, end)
        # Shown exactly, a marker in it would read as ours (publishing/markers.py).
        and not holds_marker(suggestion.replacement)
    )
    return Placed(finding, fingerprint, tuple(lines[start - 1 : end]), committable)
