"""Where each finding goes: inline on a hunk line of its file, or in the body (CONTRACT 10).

A finding is inline when its line is an added or context line of a hunk of its file's diff
from the merge base to the head; at most `max_inline` are, most severe first, then path, then
line. Its fingerprint uses the text of its line at the head, so it survives lines moving.
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
)

RANK = {severity: rank for rank, severity in enumerate(SEVERITIES)}


@dataclass(frozen=True)
class Placed:
    """A finding, its fingerprint and, when inline, nothing more: the line is its own."""

    finding: Finding
    fingerprint: str


@dataclass
class Placement:
    inline: list[Placed] = field(default_factory=list)
    body: list[Placed] = field(default_factory=list)
    skipped: int = 0


def line_texts(git_dir: Path, head: str, findings: Sequence[Finding]) -> dict[str, list[str]]:
    texts: dict[str, list[str]] = {}
    for path in {f.path for f in findings if f.line is not None}:
        try:
            blob = run_git(git_dir, ["cat-file", "blob", f"{head}:{path}"], timeout=60).stdout
        except (GitError, OSError, subprocess.SubprocessError):
            continue
        texts[path] = blob.decode("utf-8", "replace").splitlines()
    return texts


def fingerprint_of(finding: Finding, texts: dict[str, list[str]]) -> str:
    """The finding's fingerprint with the text of its line at the head (CONTRACT 10)."""
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
) -> Placement:
    """Which findings go inline, which in the body, how many were posted before."""
    placement = Placement()
    candidates: list[Placed] = []
    seen: set[str] = set()
    for finding, fingerprint in zip(findings, fingerprints, strict=True):
        if fingerprint in already or fingerprint in seen:
            placement.skipped += 1
            continue
        seen.add(fingerprint)
        placed = Placed(finding, fingerprint)
        file = hunks.get(finding.path)
        if finding.line is not None and file is not None and file.anchors(finding.line):
            candidates.append(placed)
        else:
            placement.body.append(placed)
    candidates.sort(key=lambda p: (RANK[p.finding.severity], p.finding.path, p.finding.line))
    placement.inline = candidates[:max_inline]
    placement.body = sorted(
        [*candidates[max_inline:], *placement.body],
        key=lambda p: (RANK[p.finding.severity], p.finding.path, p.finding.line or 0),
    )
    return placement
