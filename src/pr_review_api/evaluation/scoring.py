"""Matching findings with golden issues, and precision, recall and F1 (CONTRACT section 13).

A finding matches a golden issue when the paths are equal and the finding's line lies within
the issue's lines widened by `LINE_SLACK` on each side; a null line never matches. Each golden
issue is matched at most once and each finding counts for at most one issue; among the ways
to pair them, the largest is taken (a maximum bipartite matching), so the order in which a
model lists its findings never changes a score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pr_review_api.evaluation.corpus import GoldenIssue

LINE_SLACK = 3


@dataclass(frozen=True)
class Located:
    """What scoring needs of a finding: where it points."""

    path: str
    line: int | None


def matches(finding: Located, issue: GoldenIssue) -> bool:
    """Same path, and a line within the issue's lines widened by LINE_SLACK."""
    if finding.line is None or finding.path != issue.path:
        return False
    return issue.start - LINE_SLACK <= finding.line <= issue.end + LINE_SLACK


def match_count(findings: Sequence[Located], golden: Sequence[GoldenIssue]) -> int:
    """The number of (finding, issue) pairs in a largest one-to-one matching."""
    owner: dict[int, int] = {}  # golden index -> finding index

    def place(finding: int, seen: set[int]) -> bool:
        for index, issue in enumerate(golden):
            if index in seen or not matches(findings[finding], issue):
                continue
            seen.add(index)
            if index not in owner or place(owner[index], seen):
                owner[index] = finding
                return True
        return False

    return sum(1 for finding in range(len(findings)) if place(finding, set()))


@dataclass(frozen=True)
class Counts:
    """Sums over reviews: findings, matched findings, golden issues, matched golden issues."""

    findings: int = 0
    matched_findings: int = 0
    golden: int = 0
    matched_golden: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.findings + other.findings,
            self.matched_findings + other.matched_findings,
            self.golden + other.golden,
            self.matched_golden + other.matched_golden,
        )

    @property
    def precision(self) -> float | None:
        """Matched findings over findings; None when there were no findings."""
        return self.matched_findings / self.findings if self.findings else None

    @property
    def recall(self) -> float | None:
        """Matched golden issues over golden issues; None when there were none."""
        return self.matched_golden / self.golden if self.golden else None

    @property
    def f1(self) -> float | None:
        """The harmonic mean of precision and recall.

        None without golden issues (a clean case has no recall); 0 when golden issues were
        all missed, with or without findings.
        """
        if self.recall is None:
            return None
        precision, recall = self.precision or 0.0, self.recall
        return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def score_review(findings: Sequence[Located], golden: Sequence[GoldenIssue]) -> Counts:
    """One review's counts. A review that ended without a final review has no findings, and
    still counts its case's golden issues (they were all missed)."""
    matched = match_count(findings, golden)
    return Counts(len(findings), matched, len(golden), matched)
