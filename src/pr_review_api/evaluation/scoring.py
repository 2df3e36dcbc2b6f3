"""Matching findings with golden issues, and precision, recall and F1 (specification §13).

Suggestions (specification §14) are counted too: offered, kept, dropped by rule, and fixes: a golden
issue with a `fix` is fixed when a kept suggestion on its file, over lines that meet the issue's,
turns the head's file into the file with the issue's lines replaced by the fix (compared token
by token, whitespace aside), each suggestion fixing at most one issue.

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

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class Kept:
    """A kept suggestion: the lines it replaces in a file at the head, and with what."""

    path: str
    start_line: int
    end_line: int
    replacement: str


def _replaced(lines: Sequence[str], start: int, end: int, text: str) -> list[str]:
    """The file's whitespace-separated tokens once lines start..end become `text`."""
    new = [] if text == "" else text.split("\n")
    return " ".join([*lines[: start - 1], *new, *lines[end:]]).split()


def fix_count(
    kept: Sequence[Kept], golden: Sequence[GoldenIssue], heads: Mapping[str, Sequence[str]]
) -> int:
    """Golden issues with a `fix` that a kept suggestion makes; `heads` is the lines of each
    file at the head (a file missing from it fixes nothing)."""
    used: set[int] = set()
    fixed = 0
    for issue in golden:
        lines = heads.get(issue.path)
        if issue.fix is None or lines is None or issue.end > len(lines):
            continue
        wanted = _replaced(lines, issue.start, issue.end, issue.fix)
        for index, suggestion in enumerate(kept):
            if index in used or suggestion.path != issue.path:
                continue
            if suggestion.start_line > issue.end or suggestion.end_line < issue.start:
                continue
            if suggestion.end_line > len(lines):
                continue
            made = _replaced(
                lines, suggestion.start_line, suggestion.end_line, suggestion.replacement
            )
            if made == wanted:
                used.add(index)
                fixed += 1
                break
    return fixed


@dataclass(frozen=True)
class SuggestionCounts:
    """Sums over reviews: suggestions offered (kept + dropped), kept, dropped by rule, golden
    issues that have a `fix`, and those a kept suggestion fixed."""

    kept: int = 0
    dropped: Mapping[str, int] = field(default_factory=dict)
    golden_with_fix: int = 0
    fixes: int = 0

    @property
    def offered(self) -> int:
        return self.kept + sum(self.dropped.values())

    @property
    def fix_rate(self) -> float | None:
        """Fixed golden issues over golden issues with a fix; None when none has one."""
        return self.fixes / self.golden_with_fix if self.golden_with_fix else None

    def __add__(self, other: SuggestionCounts) -> SuggestionCounts:
        dropped = Counter(self.dropped)
        dropped.update(other.dropped)
        return SuggestionCounts(
            self.kept + other.kept,
            dict(sorted(dropped.items())),
            self.golden_with_fix + other.golden_with_fix,
            self.fixes + other.fixes,
        )
