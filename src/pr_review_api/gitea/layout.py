"""Gitea's `Layout` of the review texts (publishing/layout.py): our first review's body, a later
head's short review, and each inline comment (specification §§10, 19).

Model text goes through gitea/markdown.py's escape (Gitea's post-processors read the rendered
text, so a backslash escape would hide nothing). Suggestions are never committable on Gitea:
each is shown as a `diff` block, which the post-processors skip. Gitea's API cannot edit a
review's body, so a later head's short review says where the summary is: in our first review,
as it stood at its head.
"""

from __future__ import annotations

from pr_review_api.gitea.markdown import code_text, escape, escape_inline
from pr_review_api.model import ReviewResult
from pr_review_api.publishing.layout import (
    REVIEW_WORDS,
    Layout,
    render_body,
    render_comment,
    render_short_body,
)
from pr_review_api.publishing.placement import Placed, Placement

# Gitea keeps a review's body as TEXT with no limit of its own; escaped model text grows up to
# six times, and a page this size still renders quickly.
MAX_BODY_CHARS = 100_000
SUMMARY_WHERE = "the summary of the first reviewed head is in our first review"


def _not_committable(placed: Placed) -> str | None:
    del placed
    return None  # Gitea has no committable suggestion: a `diff` block instead


GITEA_LAYOUT = Layout(
    escape,
    escape_inline,
    MAX_BODY_CHARS,
    REVIEW_WORDS,
    committable_block=_not_committable,
    raw=code_text,
    drop_blank_notes=True,
)


def render_review_body(result: ReviewResult, placement: Placement) -> tuple[str, int]:
    """Our first review's body, and how many body findings it holds."""
    return render_body(result, placement, GITEA_LAYOUT)


def render_later_body(result: ReviewResult, placement: Placement) -> tuple[str, int]:
    """A later head's short review, and how many body findings it holds."""
    return render_short_body(result, placement, GITEA_LAYOUT, summary_where=SUMMARY_WHERE)


def render_inline(placed: Placed) -> str:
    """An inline comment's body."""
    return render_comment(placed, GITEA_LAYOUT)
