"""GitHub's `Layout` of the review texts (publishing/layout.py), and the short body of a later
head's review (github/summary.py keeps the summary in our first review)."""

from __future__ import annotations

from pr_review_api.model import ReviewResult
from pr_review_api.output.inert_markdown import code_block, escape, escape_inline
from pr_review_api.publishing.layout import REVIEW_WORDS, Layout, render_body
from pr_review_api.publishing.layout import render_short_body as render_short
from pr_review_api.publishing.placement import Placed, Placement

MAX_BODY_CHARS = 60_000  # GitHub refuses bodies over 65,536 characters


def _github_block(placed: Placed) -> str | None:
    suggestion = placed.suggestion
    if suggestion is None or not placed.committable:
        return None
    # Exact: GitHub commits this text as is (specification §14); the fence keeps it in the block.
    return code_block("suggestion", suggestion.replacement)


GITHUB_LAYOUT = Layout(
    escape, escape_inline, MAX_BODY_CHARS, REVIEW_WORDS, committable_block=_github_block
)


def render_review_body(result: ReviewResult, placement: Placement) -> tuple[str, int]:
    """Our first review's body on GitHub, and how many body findings it holds."""
    return render_body(result, placement, GITHUB_LAYOUT)


def render_short_body(result: ReviewResult, placement: Placement) -> tuple[str, int]:
    """A later head's review (github/summary.py keeps the summary in our first review)."""
    return render_short(
        result, placement, GITHUB_LAYOUT, summary_where="the summary is kept in the first review"
    )
