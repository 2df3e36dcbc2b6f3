"""output/gate_outcome.py: what the merge gate says of a review, as properties.

For generated finding sets, dismissed sets and `fail_on` values, the conclusion is `failure`
exactly when an undismissed finding is at or above `fail_on`; an operator's override never
relaxes the base's `fail_on`; counts are read back only from our body's findings line; the
brief (a commit status's description) is one line of ours.
"""

from __future__ import annotations

from collections import Counter
from typing import get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pr_review_api.model import SEVERITIES, Coverage, Severity
from pr_review_api.output.gate_outcome import (
    FAILING,
    FailOn,
    GateFinding,
    conclusion_of,
    ended_outcome,
    review_outcome,
    severity_counts,
    skipped_outcome,
    stricter,
    unknown_outcome,
)
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
    assert list(outcome.findings) == [f for f in findings if f.fingerprint not in dismissed]
    # The brief holds no model text: no finding's title reaches it.
    assert outcome.brief.startswith(outcome.title + "; ")
    assert "\n" not in outcome.brief


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


def test_posted_counts_decide_the_conclusion_when_the_findings_are_not_at_hand() -> None:
    counts: Counter[Severity] = Counter({"high": 1, "low": 2})
    outcome = review_outcome(
        [], "high", (), Coverage(changed_files=3, inspected_files=3), None, counts
    )
    assert outcome.conclusion == "failure"
    assert outcome.brief == (
        "Findings at or above high: 1 high, 2 low; inspected 3 of 3 changed files; "
        "the gate fails on high or above."
    )
    assert review_outcome([], "critical", (), Coverage(), None, counts).conclusion == "success"


def test_the_summary_keeps_repository_paths_inert() -> None:
    coverage = Coverage(
        changed_files=2, inspected_files=0, not_inspected=["[x](https://e.x)", "@org/team.py"]
    )
    outcome = review_outcome([], "high", (), coverage, None)
    assert "](https://e.x)" not in outcome.summary
    assert "@org" not in outcome.summary
    assert "e.x" not in outcome.brief  # the brief counts files, it names none
    assert (
        outcome.brief
        == "0 findings; inspected 0 of 2 changed files; the gate fails on high or above."
    )


def test_neutral_outcomes_say_why_in_their_brief() -> None:
    skipped = skipped_outcome("the author matches skip_authors", "high", author_controlled=False)
    assert skipped.conclusion == "neutral"
    assert skipped.brief.startswith("Neutral, skipped: the author matches skip_authors")
    ended = ended_outcome("review_timeout", "none")
    assert ended.conclusion == "neutral"
    assert "(review_timeout)" in ended.brief
    assert unknown_outcome("none").brief.startswith("Neutral")
    untouched = skipped_outcome("the title contains a skip_title string", "none", True)
    assert untouched.conclusion == "neutral"


@pytest.mark.parametrize("code", ["max_tool_calls", "max_rounds", "invalid_model_response"])
def test_with_fail_on_set_a_review_without_a_final_review_fails_closed(code: str) -> None:
    ended = ended_outcome(code, "high")
    assert ended.conclusion == "failure"
    assert code in ended.title
    assert "Re-run the check" in ended.title
    assert "/pr-review review" in ended.summary
    assert ended.brief.startswith("Failed closed")
    assert ended_outcome("review_timeout", "critical").conclusion == "timed_out"
    assert unknown_outcome("info").conclusion == "failure"


def test_a_skip_by_the_title_or_labels_requires_action_while_fail_on_is_set() -> None:
    skipped = skipped_outcome("a label matches skip_labels", "medium", author_controlled=True)
    assert skipped.conclusion == "action_required"
    assert skipped.title.startswith("Action required, skipped: a label matches skip_labels")
    assert skipped.brief.startswith("Action required (failing)")
    assert "change the title or labels" in skipped.summary
    assert {"failure", "timed_out", "action_required"} == FAILING
