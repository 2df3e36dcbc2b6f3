"""github/checks.py: GitHub's annotation batches and levels, as properties.

For generated finding sets, dismissed sets and `fail_on` values, every request's annotations
number at most 50, and all of them together are the undismissed findings, once each, in order.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pr_review_api.github.checks import MAX_ANNOTATIONS_PER_REQUEST, annotation, batches
from pr_review_api.model import SEVERITIES, Coverage
from pr_review_api.output.gate_outcome import FailOn, GateFinding, review_outcome
from tests.conftest import examples
from tests.output.test_gate_outcome import FAIL_ON, findings_strategy


@settings(max_examples=examples(400), deadline=None)
@given(
    findings=findings_strategy,
    fail_on=st.sampled_from(FAIL_ON),
    dismissed=st.sets(st.text("0123456789abcdef", min_size=4, max_size=4), max_size=20),
)
def test_the_undismissed_findings_are_annotated_50_a_request(
    findings: list[GateFinding], fail_on: FailOn, dismissed: set[str]
) -> None:
    outcome = review_outcome(findings, fail_on, dismissed, Coverage(), None)
    sent = batches([annotation(f) for f in outcome.findings])
    assert all(len(batch) <= MAX_ANNOTATIONS_PER_REQUEST for batch in sent)
    kept = [f for f in findings if f.fingerprint not in dismissed]
    assert [a["path"] for batch in sent for a in batch] == [f.path for f in kept]
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
    annotations = [annotation(f) for f in outcome.findings]
    levels = [a["annotation_level"] for a in annotations]
    assert levels == ["failure", "failure", "warning", "notice", "notice"]
    assert {a["start_line"] for a in annotations} == {1}  # no line: the file's top
