"""The note and discussion texts posted on a merge request (specification §§10, 14, 17).

The note holds what GitHub's review body holds, laid out by the same code
(publishing/layout.py) with GitLab's `Layout`: the summary, the counts by severity, the
findings not in a discussion, the notes, the model, rounds and tokens, and the markers. Model
text goes through GitLab's escape (gitlab/markdown.py), never GitHub's: GitLab reads more
references and runs quick actions.

A committable suggestion is GitLab's block, ```` ```suggestion:-N+0 ````, on the discussion of
its last line: N lines above that line and none below are replaced. Its replacement is shown
exactly, so one that holds a line GitLab could read as a quick action is not committable here:
it is shown as a diff, whose lines all start with `+`, `-` or `@@`.

`defused` is the last guard on every text we post: a line that still starts (after blanks) with
`/` and a word gets a word joiner in front, so no quick action runs whatever a bug upstream let
through; nothing this module renders needs it.
"""

from __future__ import annotations

import re

from pr_review_api.gitlab.markdown import escape, escape_inline, starts_quick_action
from pr_review_api.model import ReviewResult, Suggestion
from pr_review_api.output.inert_markdown import WORD_JOINER, code_block
from pr_review_api.publishing.layout import BodyWords, Layout, render_body, render_comment
from pr_review_api.publishing.markers import holds_marker
from pr_review_api.publishing.placement import Placed, Placement

# GitLab refuses a note over 1,000,000 characters; the margin keeps the tail and markers in.
MAX_NOTE_CHARS = 900_000
# Raw text in a code block: every control but tab and line feed goes (a carriage return too,
# which GitLab deletes and a renderer may read as a line break).
_RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# A line's start (after a line feed or a carriage return), its blanks, then `/` and a word.
_COMMAND_LINE = re.compile(r"(?:\A|(?<=[\n\r]))([^\S\n\r]*)(?=/[a-z_])", re.IGNORECASE)


def defused(text: str) -> str:
    """`text` with a word joiner before the `/` of every line that could start a quick action
    (after the line's blanks, which may be a list item's indentation)."""
    return _COMMAND_LINE.sub(lambda m: m[1] + WORD_JOINER, text)


def committable(placed: Placed) -> bool:
    """Whether the finding's suggestion is posted as GitLab's committable block: placement
    said so, and its replacement, shown exactly, holds no line GitLab could run and no marker
    (placement already refuses those; checked again here, where the text is written)."""
    suggestion = placed.suggestion
    return (
        placed.committable
        and suggestion is not None
        and not starts_quick_action(suggestion.replacement)
        and not holds_marker(suggestion.replacement)
    )


def suggestion_block(suggestion: Suggestion) -> str:
    """GitLab's committable block: `-N+0`, N the lines above the commented (last) line."""
    above = suggestion.end_line - suggestion.start_line
    info = f"suggestion:-{above}+0"
    if suggestion.replacement == "":
        fence = "```"
        return f"{fence}{info}\n{fence}"  # no line at all: the lines are deleted
    return code_block(info, suggestion.replacement)


def _gitlab_block(placed: Placed) -> str | None:
    suggestion = placed.suggestion
    return suggestion_block(suggestion) if suggestion is not None and committable(placed) else None


def _raw(text: str) -> str:
    return _RAW_CONTROL.sub("", text)


GITLAB_LAYOUT = Layout(
    escape,
    escape_inline,
    MAX_NOTE_CHARS,
    BodyWords(post="note", inline_where="in threads on the diff", skipped_when="earlier"),
    committable_block=_gitlab_block,
    raw=_raw,
    # An empty list item ("- ") under a paragraph would read as a heading's underline.
    drop_blank_notes=True,
)


def render_discussion(placed: Placed) -> str:
    """The first note of a finding's discussion."""
    return defused(render_comment(placed, GITLAB_LAYOUT))


def render_note(result: ReviewResult, placement: Placement) -> tuple[str, int]:
    """The note and how many of `placement.body` it holds (the rest did not fit)."""
    body, shown = render_body(result, placement, GITLAB_LAYOUT)
    return defused(body), shown
