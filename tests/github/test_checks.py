"""github/checks.py: the check's conclusion and its annotation batches, as properties.

For generated finding sets, dismissed sets and `fail_on` values, the conclusion is `failure`
exactly when an undismissed finding is at or above `fail_on`; every request's annotations
number at most 50, and all of them together are the undismissed findings, once each.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, get_args

from hypothesis import given, settings
from hypothesis import strategies as st

from pr_review_api.github.checks import (
    MAX_ANNOTATIONS_PER_REQUEST,
    FailOn,
    GateFinding,
    batches,
    conclusion_of,
    review_outcome,
    severity_counts,
    stricter,
)
from pr_review_api.model import SEVERITIES, Coverage, Severity
from tests.conftest import examples

FAIL_ON: tuple[FailOn, ...] = get_args(FailOn)
RANK = {severity: index for index, severity in enumerate(SEVERITIES)}

findings_strategy = st.lists(
    st.builds(
        GateFinding,
        severity=st.sampled_from(SEVERITIES),
        path=st.sampled_from(["a.py", "b/c.py"]),
        line=st.one_of(st.none(), st.integers(1, 500)),
        title=st.text(max_size=300),
        message=st.text(max_size=50),
        fingerprint=st.text("0123456789abcdef", min_size=4, max_size=4),
    ),
    max_size=180,
)


def at_or_above(severity: Severity, fail_on: FailOn) -> bool:
    return fail_on != "none" and RANK[severity] <= RANK[fail_on]


@settings(max_examples=examples(400), deadline=None)
@given(
    findings=findings_strategy,
    fail_on=st.sampled_from(FAIL_ON),
    dismissed=st.sets(st.text("0123456789abcdef", min_size=4, max_size=4), max_size=20),
)
def test_failure_exactly_when_an_undismissed_finding_reaches_fail_on(
    findings: list[GateFinding], fail_on: FailOn, dismissed: set[str]
) -> None:
    expected = any(
        at_or_above(f.severity, fail_on) for f in findings if f.fingerprint not in dismissed
    )
    assert (conclusion_of(findings, fail_on, dismissed) == "failure") == expected
    outcome = review_outcome(findings, fail_on, dismissed, Coverage(), None)
    assert (outcome.conclusion == "failure") == expected
    sent = batches(outcome.annotations)
    assert all(len(batch) <= MAX_ANNOTATIONS_PER_REQUEST for batch in sent)
    assert sum(len(batch) for batch in sent) == len(
        [f for f in findings if f.fingerprint not in dismissed]
    )
    assert all(len(a["title"]) <= 255 for batch in sent for a in batch)


@given(items=st.lists(st.integers(), max_size=400))
def test_batches_keep_order_and_never_exceed_50(items: list[int]) -> None:
    annotations: list[dict[str, Any]] = [{"n": n} for n in items]
    sent = batches(annotations)
    assert all(0 < len(batch) <= 50 for batch in sent) or sent == [[]]
    assert [a for batch in sent for a in batch] == annotations


def test_annotation_levels_follow_the_severity() -> None:
    findings = [GateFinding(severity, "a.py", None, "t", "m", severity) for severity in SEVERITIES]
    outcome = review_outcome(findings, "none", (), Coverage(), None)
    levels = [a["annotation_level"] for a in outcome.annotations]
    assert levels == ["failure", "failure", "warning", "notice", "notice"]
    assert {a["start_line"] for a in outcome.annotations} == {1}  # no line: the file's top


@given(base=st.sampled_from(FAIL_ON), override=st.one_of(st.none(), st.sampled_from(FAIL_ON)))
def test_an_override_never_relaxes_the_base(base: FailOn, override: FailOn | None) -> None:
    chosen = stricter(base, override)
    for severity in SEVERITIES:
        if at_or_above(severity, base) or (
            override is not None and at_or_above(severity, override)
        ):
            assert at_or_above(severity, chosen)
        else:
            assert not at_or_above(severity, chosen)


def test_counts_are_read_back_from_our_posted_body_only_from_its_findings_line() -> None:
    body = "### pr-review\n\nx \\*\\*Findings:\\*\\* 9 critical\n\n**Findings:** 2 high, 1 low\n"
    assert severity_counts(body) == Counter({"high": 2, "low": 1})
    assert severity_counts("**Findings:** none\n") == Counter()
    assert severity_counts("no such line") == Counter()


def test_the_summary_keeps_repository_paths_inert() -> None:
    coverage = Coverage(
        changed_files=2, inspected_files=0, not_inspected=["[x](https://e.x)", "@org/team.py"]
    )
    summary = review_outcome([], "high", (), coverage, None).summary
    assert "](https://e.x)" not in summary
    assert "@org" not in summary
