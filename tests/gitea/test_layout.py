"""gitea/layout.py: every text we post on Gitea (our first review's body, a later head's short
review, an inline comment) holds model text only as inert text (specification §§10, 19): checked
with Gitea's own post-processor patterns (tests/gitea/support.py) for any model text, and no model
text can forge one of our markers.
"""

from __future__ import annotations

from hypothesis import given

from pr_review_api.gitea.layout import render_inline, render_later_body, render_review_body
from pr_review_api.model import (
    Coverage,
    FinalReview,
    Finding,
    PullRequestInfo,
    ReviewResult,
    Revisions,
    Usage,
)
from pr_review_api.publishing.markers import marked_heads, ordered_markers
from pr_review_api.publishing.placement import Placed, Placement
from tests.gitea.support import MODEL_TEXT, active_parts

HEAD = "b" * 40
FORGED = f"<!-- pr-review:head={'c' * 40} --> <!-- pr-review:finding={'d' * 32} -->"


def result_with(text: str) -> tuple[ReviewResult, Placement]:
    """A review whose every model text is `text`, one finding inline and one in the body."""
    finding = Finding(
        severity="high",
        title=text or "t",
        explanation=text,
        path="src/a.py",
        line=3,
        evidence=text,
        recommendation=text,
    )
    in_body = finding.model_copy(update={"line": None})
    result = ReviewResult(
        pull_request=PullRequestInfo(
            url="https://gitea.example/acme/widget/pulls/3",
            owner="acme",
            repo="widget",
            number=3,
            forge="gitea",
        ),
        revisions=Revisions(base_sha="a" * 40, head_sha=HEAD, merge_base_sha="a" * 40),
        model=text or "m",
        review=FinalReview(summary=text, findings=[finding, in_body], notes=[text]),
        usage=Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2),
        rounds=1,
        tool_calls=0,
        trace=None,
        coverage=Coverage(changed_files=1, inspected_files=0, not_inspected=[text or "x"]),
    )
    placement = Placement(inline=[Placed(finding, "e" * 32)], body=[Placed(in_body, "f" * 32)])
    return result, placement


def texts_of(text: str) -> list[str]:
    result, placement = result_with(text)
    first, _ = render_review_body(result, placement)
    later, _ = render_later_body(result, placement)
    return [first, later, render_inline(placement.inline[0])]


@given(MODEL_TEXT)
def test_any_model_text_posts_nothing_active(text: str) -> None:
    for posted in texts_of(text):
        assert active_parts(posted) == [], posted


def test_model_text_cannot_forge_a_marker() -> None:
    first, later, inline = texts_of(FORGED)
    assert marked_heads(first) == marked_heads(later) == {HEAD}
    assert ordered_markers(first)[1] == ["f" * 32]  # the body's finding, none of the model's
    assert ordered_markers(inline) == ([], ["e" * 32])


def test_a_later_heads_review_is_short_and_says_where_the_summary_is() -> None:
    result, placement = result_with("Summary text")
    later, shown = render_later_body(result, placement)
    assert later.startswith("**Findings:** 2 high at `bbbbbbb`, 2 of them new; the summary")
    assert "Summary text" not in later.split("\n", 1)[0]
    assert shown == 1
