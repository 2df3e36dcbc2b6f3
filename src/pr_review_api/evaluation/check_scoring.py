"""Custom checks in the evaluation (specification §20): how often the review's result of a check is
the one its case expects, per expected result kind, beside precision and recall.

A case of kind `check` (evaluation/corpus.py) holds custom checks in its base's
`.pr-review.toml` and names what each should come out as. A review that ended without a final
review, or without a result for an expected check, counts that check as wrong (its result is
`None`). Accuracy is right results over expected results: in total and for each expected kind
(`pass`, `fail`, `inconclusive`), with 95% bootstrap intervals over the cases
(evaluation/bootstrap.py's `ratio_intervals`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pr_review_api.evaluation import bootstrap
from pr_review_api.evaluation.expected_checks import ExpectedCheck
from pr_review_api.model import ReviewResult

ALL = "all"


@dataclass(frozen=True)
class CheckScore:
    """One expected check of one review."""

    name: str
    expected: str
    got: str | None  # None: no result (the review ended without one)

    @property
    def right(self) -> bool:
        return self.got == self.expected


def check_scores(
    expected: Sequence[ExpectedCheck], result: ReviewResult | None
) -> tuple[CheckScore, ...]:
    """Each expected check with the review's result of it (None: no result)."""
    got = {} if result is None else {c.name: c.result for c in result.review.check_results()}
    return tuple(CheckScore(e.name, e.result, got.get(e.name)) for e in expected)


def _tallies(scores: Sequence[CheckScore]) -> dict[str, tuple[int, int]]:
    """(right, expected) in total and per expected kind."""
    tallies = {ALL: (sum(s.right for s in scores), len(scores))}
    for kind in sorted({s.expected for s in scores}):
        of_kind = [s for s in scores if s.expected == kind]
        tallies[kind] = (sum(s.right for s in of_kind), len(of_kind))
    return tallies


def check_figures(scores: Sequence[CheckScore]) -> dict[str, Any]:
    """Accuracy in total and per expected kind, and what the results were."""
    accuracy = {
        name: {"expected": total, "right": right, "accuracy": round(right / total, 4)}
        for name, (right, total) in _tallies(scores).items()
        if total
    }
    results = Counter("none" if s.got is None else s.got for s in scores)
    return {"accuracy": accuracy, "results": dict(sorted(results.items()))}


def check_intervals(per_case: Sequence[Sequence[CheckScore]]) -> dict[str, list[float] | None]:
    """The 95% interval of each accuracy, resampling the cases that expect checks."""
    cases = [_tallies(scores) for scores in per_case if scores]
    found = bootstrap.ratio_intervals(cases)
    return {name: None if i is None else i.rounded() for name, i in found.items()}


def checks_line(figures: dict[str, Any], intervals: dict[str, list[float] | None]) -> str:
    """One line of the text report."""
    parts = []
    for name, tally in figures["accuracy"].items():
        interval = intervals.get(name)
        shown = "" if interval is None else f", 95% {interval[0]:.2f}-{interval[1]:.2f}"
        label = "all checks" if name == ALL else f"expected {name}"
        right = f"{tally['right']}/{tally['expected']}"
        parts.append(f"{label} {right} ({tally['accuracy']:.2f}{shown})")
    results = ", ".join(f"{kind} {n}" for kind, n in figures["results"].items())
    return f"Custom checks right: {'; '.join(parts)}. Results given: {results}."
