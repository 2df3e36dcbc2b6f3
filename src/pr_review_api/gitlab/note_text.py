"""The note and discussion texts posted on a merge request (CONTRACT 10, 14, 17).

The note holds what GitHub's review body holds (github/review_text.py): the summary, the counts
by severity, the findings not in a discussion, the notes, the model, rounds and tokens, and the
markers. Model text goes through GitLab's escape (gitlab/markdown.py), never GitHub's: GitLab
reads more references and runs quick actions.

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
from collections import Counter

from pr_review_api.github.markers import finding_marker, head_marker, holds_marker
from pr_review_api.github.placement import Placed, Placement
from pr_review_api.gitlab.markdown import escape, escape_inline, starts_quick_action
from pr_review_api.model import SEVERITIES, ReviewResult, Suggestion
from pr_review_api.output.common import coverage_line, suggestion_diff, suggestion_heading
from pr_review_api.output.inert_markdown import WORD_JOINER, code_block

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


def render_discussion(placed: Placed) -> str:
    """The first note of a finding's discussion."""
    finding = placed.finding
    parts = [
        f"**{finding.severity}** · {escape_inline(finding.title)}",
        escape(finding.explanation),
        f"**Evidence:** {escape(finding.evidence)}",
        f"**Recommendation:** {escape(finding.recommendation)}",
        finding_marker(placed.fingerprint),
    ]
    suggestion = placed.suggestion
    if suggestion is not None and committable(placed):
        parts.append(suggestion_block(suggestion))
    elif suggestion is not None:
        parts += _diff_block(placed)
    return defused("\n\n".join(parts))


def _diff_block(placed: Placed, indent: str = "") -> list[str]:
    """A suggestion that is not committable here, as a diff in a code block."""
    suggestion = placed.suggestion
    assert suggestion is not None
    where = suggestion_heading(suggestion)
    # One diff line per line, each starting with `@@`, `-` or `+`: no break inside a line.
    replaced = None if placed.replaced is None else [_one_line(x) for x in placed.replaced]
    diff = _RAW_CONTROL.sub("", suggestion_diff(suggestion, replaced))
    # Shown raw, text that would read as one of our markers is broken (github/markers.py).
    diff = diff.replace("<!--", "<" + WORD_JOINER + "!--")
    return [
        f"{indent}**Suggested change** ({where}, not committable here):",
        code_block("diff", diff, indent),
    ]


def _one_line(text: str) -> str:
    return _RAW_CONTROL.sub("", text).replace("\n", " ")


def _note_entry(placed: Placed) -> str:
    finding = placed.finding
    where = escape_inline(finding.path) + ("" if finding.line is None else f" line {finding.line}")
    return "\n".join(
        [
            f"- **{finding.severity}** · {where} · {escape_inline(finding.title)}",
            "",
            "  " + escape(finding.explanation).replace("\n", "\n  "),
            "",
            "  **Recommendation:** " + escape(finding.recommendation).replace("\n", "\n  "),
            "  " + finding_marker(placed.fingerprint),
            *(["", *_diff_block(placed, "  ")] if placed.suggestion is not None else []),
        ]
    )


def render_note(result: ReviewResult, placement: Placement) -> tuple[str, int]:
    """The note and how many of `placement.body` it holds (the rest did not fit)."""
    review = result.review
    counts = Counter(f.severity for f in review.findings)
    tally = ", ".join(f"{counts[s]} {s}" for s in SEVERITIES if counts[s]) or "none"
    parts = ["### pr-review", "", escape(review.summary), "", f"**Findings:** {tally}"]
    parts += ["", coverage_line(result.coverage, escape_inline)]
    if placement.inline:
        parts += ["", f"{len(placement.inline)} of them in threads on the diff."]
    if placement.skipped:
        parts += ["", f"{placement.skipped} already posted earlier, not repeated."]
    tail = _tail(result)
    size = sum(len(p) + 1 for p in parts) + len(tail) + 200
    shown = 0
    if placement.body:
        parts += ["", "#### Findings not on the diff's lines", ""]
        for placed in placement.body:
            entry = _note_entry(placed)
            if size + len(entry) > MAX_NOTE_CHARS:
                break
            parts += [entry, ""]
            size += len(entry) + 2
            shown += 1
        if shown < len(placement.body):
            parts += [f"{len(placement.body) - shown} more findings did not fit in this note."]
    # An empty list item ("- ") under a paragraph would read as a heading's underline.
    notes = [escape(note.strip()).replace("\n", "\n  ") for note in review.notes if note.strip()]
    if notes:
        parts += ["", "#### Notes", ""]
        for note in notes:
            if size + len(note) > MAX_NOTE_CHARS:
                parts.append("(more notes did not fit)")
                break
            parts.append("- " + note)
            size += len(note) + 3
    parts += ["", tail]
    return defused("\n".join(parts)), shown


def _tail(result: ReviewResult) -> str:
    usage = result.usage
    return (
        f"<sub>{escape_inline(result.model)} · {result.rounds} "
        f"{'round' if result.rounds == 1 else 'rounds'} · "
        f"{usage.total_tokens} tokens</sub>\n\n{head_marker(result.revisions.head_sha)}"
    )
