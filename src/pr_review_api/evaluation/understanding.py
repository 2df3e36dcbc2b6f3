"""What the evaluation measures of understanding the change (specification §21;
docs/walkthrough.md).

- Walkthrough coverage: the share of a case's changed files (git's list: a rename by its new
  path, a deletion by its old one) that the review's walkthrough names; a review that ended
  without a final review, or without a walkthrough, covers 0. Only with the walkthrough on
  (`REVIEW_WALKTHROUGH`).
- Linked-issue accuracy: on cases that carry an issue and the verdict a review should give
  (`[linked_issue]` in the case file), the share of reviews whose verdict is that one; a review
  without a verdict is wrong.

A report carries these figures only when they were measured, so one without them reads as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pr_review_api.evaluation.corpus import BuiltCase
from pr_review_api.git_runner import GIT_FAILURES
from pr_review_api.loop.linked_issues import LinkedIssues, ReadIssue
from pr_review_api.loop.walkthrough import coverage_share, walkthrough_files
from pr_review_api.model import ReviewResult

# The ref an evaluation case's issue is given with: the case's repository is the issue's.
CASE_ISSUE_REF = "#1"


@dataclass(frozen=True)
class Understood:
    """One review's walkthrough and linked-issue verdict, as the evaluation scores them."""

    walkthrough: float | None = None  # covered share of changed files; None: not measured
    entries: tuple[tuple[tuple[str, ...], str], ...] = ()  # (paths, summary), for the page
    expected: str | None = None  # the case's verdict; None: the case has no issue
    verdict: str | None = None  # the review's; None: it gave none

    @property
    def correct(self) -> bool:
        return self.expected is not None and self.verdict == self.expected


def case_issues(case: BuiltCase) -> LinkedIssues:
    """The case's issue as the review is given it (`LocalTarget.linked`)."""
    issue = case.linked_issue
    if issue is None:
        return LinkedIssues()
    return LinkedIssues((ReadIssue(CASE_ISSUE_REF, issue.title, issue.body),))


def understood(
    case: BuiltCase, repository: Path, result: ReviewResult | None, *, walkthrough: bool
) -> Understood:
    """What one review (None: it ended without a final review) understood of its case."""
    expected = None if case.linked_issue is None else case.linked_issue.expected
    review = None if result is None else result.review
    verdicts = [] if review is None else review.linked_issue_verdicts()
    verdict = next((v.addressed for v in verdicts if v.ref == CASE_ISSUE_REF), None)
    if not walkthrough:
        return Understood(expected=expected, verdict=verdict)
    entries = [] if review is None else review.walkthrough_entries()
    try:
        changed = walkthrough_files(repository / ".git", case.base, case.head)
    except GIT_FAILURES:
        changed = ()
    shown = tuple((tuple(e.paths), e.summary) for e in entries)
    return Understood(coverage_share(entries, changed), shown, expected, verdict)


def understanding_figures(outcomes: Sequence[Understood]) -> dict[str, Any]:
    """The report's figures: `walkthrough_coverage` (mean over reviews) when measured, and
    `linked_issues` (`reviews`, `correct`, `accuracy`) on cases with an issue."""
    figures: dict[str, Any] = {}
    shares = [o.walkthrough for o in outcomes if o.walkthrough is not None]
    if shares:
        figures["walkthrough_coverage"] = round(sum(shares) / len(shares), 4)
    judged = [o for o in outcomes if o.expected is not None]
    if judged:
        correct = sum(1 for o in judged if o.correct)
        figures["linked_issues"] = {
            "reviews": len(judged),
            "correct": correct,
            "accuracy": round(correct / len(judged), 4),
        }
    return figures


def run_figures(outcome: Understood) -> dict[str, Any]:
    """What one run's entry of the report adds (nothing when nothing was measured)."""
    figures: dict[str, Any] = {}
    if outcome.walkthrough is not None:
        figures["walkthrough_coverage"] = round(outcome.walkthrough, 4)
        figures["walkthrough"] = [
            {"paths": list(paths), "summary": summary} for paths, summary in outcome.entries
        ]
    if outcome.expected is not None:
        figures["linked_issue"] = {"expected": outcome.expected, "verdict": outcome.verdict}
    return figures


def understanding_line(total: dict[str, Any]) -> str | None:
    """The text report's line, or None when nothing was measured."""
    parts = []
    if "walkthrough_coverage" in total:
        parts.append(f"walkthrough coverage {total['walkthrough_coverage']:.2f}")
    linked = total.get("linked_issues")
    if linked is not None:
        parts.append(
            f"linked-issue verdicts as expected {linked['correct']} of {linked['reviews']} "
            f"(accuracy {linked['accuracy']:.2f})"
        )
    return "Understanding the change: " + "; ".join(parts) + "." if parts else None
