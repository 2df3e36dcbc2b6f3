"""The review body and inline comment texts as posted (specification §10); model text is escaped.

The layout is one for every forge: GitLab's note and discussions (gitlab/note_text.py) are
these texts with GitLab's `Layout`, which names its escapers, its size limit, its few words
and its committable block; GitHub's is github/layout.py's. Every function takes the forge's
`Layout`: none is any forge's default.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from pr_review_api.model import (
    SEVERITIES,
    ReviewResult,
)
from pr_review_api.output import custom_checks
from pr_review_api.output.common import coverage_line, suggestion_diff, suggestion_heading
from pr_review_api.output.inert_markdown import WORD_JOINER, code_block
from pr_review_api.output.understanding import markdown_sections
from pr_review_api.publishing.markers import (
    SUMMARY_HEADING,
    finding_marker,
    head_marker,
)
from pr_review_api.publishing.placement import Placed, Placement


@dataclass(frozen=True)
class BodyWords:
    """How a body names itself and the findings it does not hold."""

    post: str  # what a body is called: "review"
    inline_where: str  # where the inline findings are: "inline on the diff"
    skipped_when: str  # when the skipped ones were posted: "on an earlier head"


# The words of a forge whose review holds its inline comments (GitHub's and Gitea's): each such
# forge names them in its `Layout`.
REVIEW_WORDS = BodyWords("review", "inline on the diff", "on an earlier head")


@dataclass(frozen=True)
class Layout:
    """What one forge's texts differ in; the layout itself is this module's."""

    escape: Callable[[str], str]  # model text in a paragraph
    escape_inline: Callable[[str], str]  # model text within a line
    max_chars: int  # a body's size, its tail and markers included
    words: BodyWords
    # A suggestion's committable block, or None where it is not committable here.
    committable_block: Callable[[Placed], str | None]
    # What raw text in a diff block loses (a replaced line its line breaks too); None: none.
    raw: Callable[[str], str] | None = None
    drop_blank_notes: bool = False  # notes stripped, and a blank one left out


def render_comment(placed: Placed, layout: Layout) -> str:
    """The body of an inline comment; a committable suggestion's ends with its block."""
    finding = placed.finding
    parts = [
        f"**{finding.severity}** · {layout.escape_inline(finding.title)}",
        layout.escape(finding.explanation),
        f"**Evidence:** {layout.escape(finding.evidence)}",
        f"**Recommendation:** {layout.escape(finding.recommendation)}",
        finding_marker(placed.fingerprint),
    ]
    if placed.suggestion is not None:
        block = layout.committable_block(placed)
        parts += _diff_block(placed, layout) if block is None else [block]
    return "\n\n".join(parts)


def _diff_block(placed: Placed, layout: Layout, indent: str = "") -> list[str]:
    """A suggestion that is not committable here, as a diff in a code block."""
    suggestion = placed.suggestion
    assert suggestion is not None
    where = suggestion_heading(suggestion)
    replaced, raw = placed.replaced, layout.raw
    if raw is not None and replaced is not None:
        # One diff line per line, each starting with `@@`, `-` or `+`: no break inside a line.
        replaced = tuple(raw(line).replace("\n", " ") for line in replaced)
    diff = suggestion_diff(suggestion, replaced)
    if raw is not None:
        diff = raw(diff)
    # Shown raw, text that would read as one of our markers is broken (publishing/markers.py).
    diff = diff.replace("<!--", "<" + WORD_JOINER + "!--")
    return [
        f"{indent}**Suggested change** ({where}, not committable here):",
        code_block("diff", diff, indent),
    ]


def _body_entry(placed: Placed, layout: Layout) -> str:
    finding = placed.finding
    escape_line, escape_text = layout.escape_inline, layout.escape
    where = escape_line(finding.path) + ("" if finding.line is None else f" line {finding.line}")
    return "\n".join(
        [
            f"- **{finding.severity}** · {where} · {escape_line(finding.title)}",
            "",
            "  " + escape_text(finding.explanation).replace("\n", "\n  "),
            "",
            "  **Recommendation:** " + escape_text(finding.recommendation).replace("\n", "\n  "),
            "  " + finding_marker(placed.fingerprint),
            *(["", *_diff_block(placed, layout, "  ")] if placed.suggestion is not None else []),
        ]
    )


BODY_FINDINGS_HEADING = "#### Findings not on the diff's lines"
NOTES_HEADING = "#### Notes"


def render_body(result: ReviewResult, placement: Placement, layout: Layout) -> tuple[str, int]:
    """The review body and how many body findings it holds (the rest did not fit)."""
    parts = summary_lines(result, layout)
    if placement.inline:
        parts += ["", f"{len(placement.inline)} of them {layout.words.inline_where}."]
    if placement.skipped:
        parts += [
            "",
            f"{placement.skipped} already posted {layout.words.skipped_when}, not repeated.",
        ]
    tail = _tail(result, layout)
    size = sum(len(p) + 1 for p in parts) + len(tail) + 200
    section, shown, size = findings_section(placement, size, layout)
    parts += section
    parts += notes_lines(result, size, layout)
    parts += ["", tail]
    return "\n".join(parts), shown


def render_short_body(
    result: ReviewResult, placement: Placement, layout: Layout, *, summary_where: str
) -> tuple[str, int]:
    """A later head's review: one line, with the counts of the whole review at this head as a
    full body states them (a run of this head again completes its check from them), where the
    summary is (`summary_where`), then this head's checks, the findings that cannot go
    inline, and the head's marker; and how many body findings it holds."""
    head = result.revisions.head_sha
    new = len(placement.inline) + len(placement.body)
    what = f"{new} of them new" if new else "none of them new"
    counts = tally(result)
    line = (
        f"**Findings:** {counts} at `{head[:7]}`"
        + ("" if counts == "none" else f", {what}")
        + f"; {summary_where}."
    )
    size = len(line) + 200
    section, shown, _ = findings_section(placement, size, layout)
    checks = checks_lines(result, layout)  # this head's: a run again reads them back
    return "\n".join([line, *checks, *section, "", head_marker(head)]), shown


def tally(result: ReviewResult) -> str:
    """The counts by severity of the review's findings, as `**Findings:**` states them."""
    counts = Counter(f.severity for f in result.review.findings)
    return ", ".join(f"{counts[s]} {s}" for s in SEVERITIES if counts[s]) or "none"


def summary_lines(result: ReviewResult, layout: Layout) -> list[str]:
    """The heading, the summary, the counts and the coverage: the top of a full body."""
    parts = [
        SUMMARY_HEADING,
        "",
        layout.escape(result.review.summary),
        "",
        f"**Findings:** {tally(result)}",
    ]
    parts += ["", coverage_line(result.coverage, layout.escape_inline)]
    # specification §21: the walkthrough and linked issues, within a quarter of the body's size.
    understood = markdown_sections(
        result.review,
        heading="####",
        cell=layout.escape_inline,
        path=layout.escape_inline,
        max_chars=layout.max_chars // 4,
    )
    return [*parts, *understood, *checks_lines(result, layout)]


def checks_lines(result: ReviewResult, layout: Layout) -> list[str]:
    """The custom checks' section (specification §20); nothing when no check applied."""
    checks = result.review.check_results()
    if not checks:
        return []
    inline, block = layout.escape_inline, layout.escape
    return ["", custom_checks.markdown_section(checks, inline, block, heading="####")]


def findings_section(placement: Placement, size: int, layout: Layout) -> tuple[list[str], int, int]:
    """The body's list of findings not inline, as many as fit after `size` characters: its
    lines, how many it shows, and the size then."""
    if not placement.body:
        return [], 0, size
    parts = ["", BODY_FINDINGS_HEADING, ""]
    shown = 0
    for placed in placement.body:
        entry = _body_entry(placed, layout)
        if size + len(entry) > layout.max_chars:
            break
        parts += [entry, ""]
        size += len(entry) + 2
        shown += 1
    if shown < len(placement.body):
        parts += [
            f"{len(placement.body) - shown} more findings did not fit in this {layout.words.post}."
        ]
    return parts, shown, size


def notes_lines(result: ReviewResult, size: int, layout: Layout) -> list[str]:
    """The notes section, as many notes as fit after `size` characters."""
    texts = result.review.notes
    if layout.drop_blank_notes:
        texts = [note.strip() for note in texts if note.strip()]
    notes = [layout.escape(note).replace("\n", "\n  ") for note in texts]
    if not notes:
        return []
    parts = ["", NOTES_HEADING, ""]
    for note in notes:
        if size + len(note) > layout.max_chars:
            parts.append("(more notes did not fit)")
            break
        parts.append("- " + note)
        size += len(note) + 3
    return parts


def usage_line(result: ReviewResult, layout: Layout) -> str:
    """The model, rounds and tokens, in small print."""
    usage = result.usage
    return (
        f"<sub>{layout.escape_inline(result.model)} · {result.rounds} "
        f"{'round' if result.rounds == 1 else 'rounds'} · "
        f"{usage.total_tokens} tokens</sub>"
    )


def _tail(result: ReviewResult, layout: Layout) -> str:
    return f"{usage_line(result, layout)}\n\n{head_marker(result.revisions.head_sha)}"
