"""The scoring arithmetic of specification §13 on hand-made results."""

from __future__ import annotations

import pytest

from pr_review_api.evaluation.corpus import GoldenIssue
from pr_review_api.evaluation.scoring import Counts, Located, match_count, matches, score_review


def _golden(path: str, start: int, end: int) -> GoldenIssue:
    return GoldenIssue(path=path, lines=(start, end), issue="x")


@pytest.mark.parametrize(
    ("line", "expected"),
    [(None, False), (6, False), (7, True), (10, True), (12, True), (15, True), (16, False)],
)
def test_a_finding_matches_within_the_golden_lines_widened_by_3(
    line: int | None, expected: bool
) -> None:
    assert matches(Located("a.py", line), _golden("a.py", 10, 12)) is expected


def test_a_finding_in_another_file_never_matches() -> None:
    assert not matches(Located("b.py", 10), _golden("a.py", 10, 12))
    assert not matches(Located("./a.py", 10), _golden("a.py", 10, 12))


def test_each_golden_issue_is_matched_at_most_once() -> None:
    golden = [_golden("a.py", 10, 10)]
    findings = [Located("a.py", 10), Located("a.py", 11), Located("a.py", 9)]
    counts = score_review(findings, golden)
    assert counts == Counts(
        findings=3, matched_findings=1, golden=1, matched_golden=1, duplicates=2
    )
    assert counts.precision == pytest.approx(1 / 3)
    assert counts.recall == 1.0
    assert counts.f1 == pytest.approx(0.5)


def test_the_largest_matching_is_found_whatever_the_order_of_findings() -> None:
    # The first finding fits both issues, the second only the first issue: a greedy pass
    # that gave issue 1 to finding 1 would match one pair; two are possible.
    golden = [_golden("a.py", 10, 10), _golden("a.py", 16, 16)]
    findings = [Located("a.py", 13), Located("a.py", 8)]
    assert match_count(findings, golden) == 2
    assert match_count(list(reversed(findings)), golden) == 2


def test_a_review_without_findings_misses_every_golden_issue() -> None:
    counts = score_review([], [_golden("a.py", 1, 1), _golden("b.py", 1, 1)])
    assert counts.precision is None
    assert counts.recall == 0.0
    assert counts.f1 == 0.0


def test_a_clean_case_counts_only_its_findings() -> None:
    clean = score_review([Located("a.py", 1), Located("a.py", None)], [])
    assert clean == Counts(findings=2, matched_findings=0, golden=0, matched_golden=0)
    assert clean.precision == 0.0
    assert clean.recall is None
    assert clean.f1 is None
    assert score_review([], []).precision is None


def test_totals_sum_counts_before_dividing() -> None:
    defect = score_review([Located("a.py", 5)], [_golden("a.py", 5, 5), _golden("a.py", 50, 50)])
    clean = score_review([Located("b.py", 1), Located("b.py", 2), Located("b.py", 3)], [])
    total = defect + clean
    assert total == Counts(findings=4, matched_findings=1, golden=2, matched_golden=1)
    assert total.precision == 0.25
    assert total.recall == 0.5
    assert total.f1 == pytest.approx(2 * 0.25 * 0.5 / 0.75)
