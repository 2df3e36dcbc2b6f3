"""GitHub's `Layout` of the review texts (publishing/layout.py), and the short body of a later
head's review (github/summary.py keeps the summary in our first review)."""

from __future__ import annotations

from pr_review_api.model import ReviewResult
from pr_review_api.output.inert_markdown import code_block, escape, escape_inline
from pr_review_api.publishing.layout import (
    Layout,
    checks_lines,
    findings_section,
    render_body,
    tally,
)
from pr_review_api.publishing.markers import head_marker
from pr_review_api.publishing.placement import Placed, Placement

MAX_BODY_CHARS = 60_000  # GitHub refuses bodies over 65,536 characters


def _github_block(placed: Placed) -> str | None:
    suggestion = placed.suggestion
    if suggestion is None or not placed.committable:
        return None
    # Exact: GitHub commits this text as is (CONTRACT 14); the fence keeps it in the block.
    return code_block("suggestion", suggestion.replacement)


GITHUB_LAYOUT = Layout(
    escape,
    escape_inline,
    MAX_BODY_CHARS,
    post="review",
    inline_where="inline on the diff",
    skipped_when="on an earlier head",
    committable_block=_github_block,
)


def render_review_body(result: ReviewResult, placement: Placement) -> tuple[str, int]:
    """Our first review's body on GitHub, and how many body findings it holds."""
    return render_body(result, placement, GITHUB_LAYOUT)


def render_short_body(result: ReviewResult, placement: Placement) -> tuple[str, int]:
    """A later head's review (github/summary.py keeps the summary in our first review): one
    line, with the counts of the whole review at this head as the first review states them
    (a run of this head again completes its check from them), then the findings that cannot
    go inline, and the head's marker."""
    head = result.revisions.head_sha
    new = len(placement.inline) + len(placement.body)
    what = f"{new} of them new" if new else "none of them new"
    counts = tally(result)
    line = (
        f"**Findings:** {counts} at `{head[:7]}`"
        + ("" if counts == "none" else f", {what}")
        + "; the summary is kept in the first review."
    )
    size = len(line) + 200
    section, shown, _ = findings_section(placement, size, GITHUB_LAYOUT)
    checks = checks_lines(result, GITHUB_LAYOUT)  # this head's: a run again reads them back
    return "\n".join([line, *checks, *section, "", head_marker(head)]), shown
