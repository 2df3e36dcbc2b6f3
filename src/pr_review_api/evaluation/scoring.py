"""Matching findings with golden issues, and precision, recall and F1 (CONTRACT section 13).

A finding matches a golden issue when the paths are equal and the finding's line lies within
the issue's lines widened by `LINE_SLACK` on each side; a null line never matches. Each golden
issue is matched at most once and each finding counts for at most one issue; among the ways
to pair them, the largest is taken (a maximum bipartite matching), so the order in which a
model lists its findings never changes a score.

A finding left out of that matching that still matches a golden issue is a **duplicate**: a
second finding on an issue already matched (had the issue been free, the matching would have
taken it). Duplicates stay findings, so precision ("matched findings over findings") counts
them in its denominator as the contract says; they are counted apart from the other unmatched
findings, the false positives, so a report can say which of the two a model's noise is.
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
    return len(largest_matching(findings, golden))


def largest_matching(findings: Sequence[Located], golden: Sequence[GoldenIssue]) -> dict[int, int]:
    """A largest one-to-one matching, as golden index -> finding index."""
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

    for finding in range(len(findings)):
        place(finding, set())
    return owner


@dataclass(frozen=True)
class Counts:
    """Sums over reviews: findings, matched findings, golden issues, matched golden issues,
    and the unmatched findings that duplicate a matched issue."""

    findings: int = 0
    matched_findings: int = 0
    golden: int = 0
    matched_golden: int = 0
    duplicates: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.findings + other.findings,
            self.matched_findings + other.matched_findings,
            self.golden + other.golden,
            self.matched_golden + other.matched_golden,
            self.duplicates + other.duplicates,
        )

    @property
    def false_positives(self) -> int:
        """Findings that match no golden issue at all (neither matched nor duplicates)."""
        return self.findings - self.matched_findings - self.duplicates

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
    owner = largest_matching(findings, golden)
    matched = set(owner.values())
    duplicates = sum(
        1
        for index, finding in enumerate(findings)
        if index not in matched and any(matches(finding, issue) for issue in golden)
    )
    return Counts(len(findings), len(owner), len(golden), len(owner), duplicates)
