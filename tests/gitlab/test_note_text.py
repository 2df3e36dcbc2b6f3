"""The texts posted on a merge request (gitlab/note_text.py): whatever the model wrote, the note
and each discussion render only our own layout, no line can start a quick action, and the only
markers in them are the ones we put there."""

from __future__ import annotations

from functools import partial
from typing import Any

from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from pr_review_api.gitlab.note_text import (
    committable,
    defused,
    render_discussion,
    render_note,
    suggestion_block,
)
from pr_review_api.model import (
    SEVERITIES,
    FinalReview,
    Finding,
    ReviewResult,
    Revisions,
    Suggestion,
    Usage,
)
from pr_review_api.output.inert_markdown import WORD_JOINER
from pr_review_api.publishing.markers import Post, finding_marker, head_marker, read_markers
from pr_review_api.publishing.placement import Placed, Placement
from tests import builders
from tests.conftest import examples
from tests.gitlab.support import QUICK_ACTION_PATTERN, active_parts

HEAD = "d" * 40
_PIECES = st.sampled_from(
    [
        "/merge",
        "/close",
        "/APPROVE",
        "@all",
        "@alice",
        "!1",
        "#2",
        "~bug",
        "%v1",
        "$3",
        "&4",
        "*iteration:5",
        "[[wiki]]",
        ":smile:",
        "[x](http://evil.example)",
        "<img src=x>",
        "<!-- pr-review:head=" + "e" * 40 + " -->",
        "<!-- pr-review:finding=" + "f" * 16 + " -->",
        "```",
        "````",
        "\n",
        "\r",
        "\r\n",
        "  ",
        "\t",
        "> ",
        "- ",
        "text",
        "\u2028",
    ]
)
TEXT = st.one_of(st.text(max_size=60), st.lists(_PIECES, max_size=12).map("".join))


def make_finding(draw: Any, index: int) -> Placed:
    replacement = draw(st.one_of(st.none(), TEXT))
    suggestion = None
    if replacement is not None:
        start = draw(st.integers(1, 5))
        suggestion = Suggestion(
            start_line=start, end_line=start + draw(st.integers(0, 3)), replacement=replacement
        )
    finding = Finding(
        severity=draw(st.sampled_from(SEVERITIES)),
        title=draw(TEXT),
        explanation=draw(TEXT),
        path=draw(st.one_of(st.just("src/a.py"), TEXT)),
        line=draw(st.one_of(st.none(), st.integers(1, 9))),
        evidence=draw(TEXT),
        recommendation=draw(TEXT),
        suggestion=suggestion,
    )
    replaced = None if suggestion is None else tuple(draw(st.lists(TEXT, max_size=4)))
    return Placed(finding, f"{index:016x}", replaced, committable=draw(st.booleans()))


@st.composite
def placements(draw: Any) -> tuple[ReviewResult, Placement]:
    placed = [make_finding(draw, i) for i in range(draw(st.integers(0, 4)))]
    split = draw(st.integers(0, len(placed)))
    review = FinalReview(
        summary=draw(TEXT),
        findings=[p.finding for p in placed],
        notes=draw(st.lists(TEXT, max_size=3)),
    )
    result = ReviewResult(
        pull_request=None,
        revisions=Revisions(base_sha="a" * 40, head_sha=HEAD, merge_base_sha="b" * 40),
        model=draw(TEXT),
        review=review,
        usage=Usage(),
        rounds=1,
        tool_calls=0,
        trace=None,
    )
    return result, Placement(inline=placed[:split], body=placed[split:], skipped=0)


@hypothesis_settings(max_examples=examples(300))
@given(placements())
def test_no_model_text_makes_anything_active_or_forges_a_marker(
    case: tuple[ReviewResult, Placement],
) -> None:
    result, placement = case
    note, shown = render_note(result, placement)
    assert shown == len(placement.body)
    assert active_parts(note) == []
    discussions = [render_discussion(p) for p in placement.inline]
    for body in discussions:
        assert active_parts(body) == []
    # The markers read back are exactly ours: this head's, and one per finding.
    posts = [Post("bot", text) for text in [note, *discussions]]
    state = read_markers(posts, "bot", reviews=True)
    assert [sha for sha, _, _ in state.heads] == [HEAD]
    assert state.fingerprints == {p.fingerprint for p in [*placement.inline, *placement.body]}


suggested = partial(builders.finding_model, path="a.py", **builders.TERSE)


def test_a_committable_suggestion_names_the_lines_above_its_line() -> None:
    suggestion = suggested(line=5, suggestion=builders.suggestion(3, 5, "x\ny")).offered()
    assert suggestion is not None
    assert suggestion_block(suggestion) == "```suggestion:-2+0\nx\ny\n```"


def test_a_replacement_that_could_run_a_command_is_never_committable() -> None:
    for replacement in ("/merge", "ok\n  /close", "ok\r/approve", "\t/Lock"):
        placed = Placed(
            suggested(line=4, suggestion=builders.suggestion(3, 4, replacement)),
            "0" * 16,
            ("a", "b"),
            committable=True,
        )
        assert not committable(placed)
        body = render_discussion(placed)
        assert "suggestion:" not in body
        assert QUICK_ACTION_PATTERN.search(body.replace("\r", "")) is None
    fine = Placed(
        suggested(line=4, suggestion=builders.suggestion(3, 4, "// a comment\n/* b */")),
        "0" * 16,
        ("a", "b"),
        committable=True,
    )
    assert committable(fine)
    assert render_discussion(fine).endswith("```suggestion:-1+0\n// a comment\n/* b */\n```")


def test_defused_puts_a_joiner_before_every_line_that_could_start_a_command() -> None:
    text = "/merge\nok\n  /close\r/lock\n// fine\n/* fine */"
    assert defused(text) == (
        f"{WORD_JOINER}/merge\nok\n  {WORD_JOINER}/close\r{WORD_JOINER}/lock\n// fine\n/* fine */"
    )
    assert QUICK_ACTION_PATTERN.search(defused(text).replace("\r", "\n")) is None


def test_the_note_lists_what_is_not_in_a_discussion_with_its_place() -> None:
    inline = Placed(suggested(line=4, suggestion=builders.suggestion(3, 4, "z")), "1" * 16)
    outside = Placed(
        Finding(
            severity="low",
            title="Off the diff",
            explanation="e",
            path="b.py",
            line=40,
            evidence="v",
            recommendation="r",
        ),
        "2" * 16,
    )
    result = ReviewResult(
        pull_request=None,
        revisions=Revisions(base_sha="a" * 40, head_sha=HEAD, merge_base_sha="b" * 40),
        model="m",
        review=FinalReview(summary="S", findings=[inline.finding, outside.finding], notes=["n"]),
        usage=Usage(total_tokens=7),
        rounds=1,
        tool_calls=0,
        trace=None,
    )
    note, shown = render_note(result, Placement(inline=[inline], body=[outside], skipped=2))
    assert shown == 1
    assert "**Findings:** 1 high, 1 low" in note
    assert "1 of them in threads on the diff." in note
    assert "2 already posted earlier, not repeated." in note
    assert "- **low** · b\\.py line 40 · Off the diff" in note
    assert finding_marker("2" * 16) in note
    assert finding_marker("1" * 16) not in note
    assert note.endswith(f"<sub>m · 1 round · 7 tokens</sub>\n\n{head_marker(HEAD)}")
