"""The review body and inline comment texts as posted (CONTRACT 10); model text is escaped."""

from __future__ import annotations

from collections import Counter

from pr_review_api.github.markers import (
    SUMMARY_HEADING,
    finding_marker,
    head_marker,
)
from pr_review_api.github.placement import Placed, Placement
from pr_review_api.model import (
    SEVERITIES,
    ReviewResult,
)
from pr_review_api.output.common import coverage_line, suggestion_diff, suggestion_heading
from pr_review_api.output.inert_markdown import WORD_JOINER, code_block, escape, escape_inline

MAX_BODY_CHARS = 60_000  # GitHub refuses bodies over 65,536 characters


def render_comment(placed: Placed) -> str:
    """The body of an inline comment; a committable suggestion's ends with its block."""
    finding = placed.finding
    parts = [
        f"**{finding.severity}** · {escape_inline(finding.title)}",
        escape(finding.explanation),
        f"**Evidence:** {escape(finding.evidence)}",
        f"**Recommendation:** {escape(finding.recommendation)}",
        finding_marker(placed.fingerprint),
    ]
    suggestion = placed.suggestion
    if suggestion is not None and placed.committable:
        # Exact: GitHub commits this text as is (CONTRACT 14); the fence keeps it in the block.
        parts.append(code_block("suggestion", suggestion.replacement))
    elif suggestion is not None:
        parts += _diff_block(placed)
    return "\n\n".join(parts)


def _diff_block(placed: Placed, indent: str = "") -> list[str]:
    """A suggestion that is not committable here, as a diff in a code block."""
    suggestion = placed.suggestion
    assert suggestion is not None
    where = suggestion_heading(suggestion)
    diff = suggestion_diff(suggestion, placed.replaced)
    # Shown raw, text that would read as one of our markers is broken (github/markers.py).
    diff = diff.replace("<!--", "<" + WORD_JOINER + "!--")
    return [
        f"{indent}**Suggested change** ({where}, not committable here):",
        code_block("diff", diff, indent),
    ]


def _body_entry(placed: Placed) -> str:
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


BODY_FINDINGS_HEADING = "#### Findings not on the diff's lines"
NOTES_HEADING = "#### Notes"


def render_body(result: ReviewResult, placement: Placement) -> tuple[str, int]:
    """The review body and how many body findings it holds (the rest did not fit)."""
    parts = summary_lines(result)
    if placement.inline:
        parts += ["", f"{len(placement.inline)} of them inline on the diff."]
    if placement.skipped:
        parts += ["", f"{placement.skipped} already posted on an earlier head, not repeated."]
    tail = _tail(result)
    size = sum(len(p) + 1 for p in parts) + len(tail) + 200
    section, shown, size = findings_section(placement, size)
    parts += section
    parts += notes_lines(result, size)
    parts += ["", tail]
    return "\n".join(parts), shown


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
    section, shown, _ = findings_section(placement, size)
    return "\n".join([line, *section, "", head_marker(head)]), shown


def tally(result: ReviewResult) -> str:
    """The counts by severity of the review's findings, as `**Findings:**` states them."""
    counts = Counter(f.severity for f in result.review.findings)
    return ", ".join(f"{counts[s]} {s}" for s in SEVERITIES if counts[s]) or "none"


def summary_lines(result: ReviewResult) -> list[str]:
    """The heading, the summary, the counts and the coverage: the top of a full body."""
    parts = [
        SUMMARY_HEADING,
        "",
        escape(result.review.summary),
        "",
        f"**Findings:** {tally(result)}",
    ]
    return [*parts, "", coverage_line(result.coverage, escape_inline)]


def findings_section(placement: Placement, size: int) -> tuple[list[str], int, int]:
    """The body's list of findings not inline, as many as fit after `size` characters: its
    lines, how many it shows, and the size then."""
    if not placement.body:
        return [], 0, size
    parts = ["", BODY_FINDINGS_HEADING, ""]
    shown = 0
    for placed in placement.body:
        entry = _body_entry(placed)
        if size + len(entry) > MAX_BODY_CHARS:
            break
        parts += [entry, ""]
        size += len(entry) + 2
        shown += 1
    if shown < len(placement.body):
        parts += [f"{len(placement.body) - shown} more findings did not fit in this review."]
    return parts, shown, size


def notes_lines(result: ReviewResult, size: int) -> list[str]:
    """The notes section, as many notes as fit after `size` characters."""
    notes = [escape(note).replace("\n", "\n  ") for note in result.review.notes]
    if not notes:
        return []
    parts = ["", NOTES_HEADING, ""]
    for note in notes:
        if size + len(note) > MAX_BODY_CHARS:
            parts.append("(more notes did not fit)")
            break
        parts.append("- " + note)
        size += len(note) + 3
    return parts


def usage_line(result: ReviewResult) -> str:
    """The model, rounds and tokens, in small print."""
    usage = result.usage
    return (
        f"<sub>{escape_inline(result.model)} · {result.rounds} "
        f"{'round' if result.rounds == 1 else 'rounds'} · "
        f"{usage.total_tokens} tokens</sub>"
    )


def _tail(result: ReviewResult) -> str:
    return f"{usage_line(result)}\n\n{head_marker(result.revisions.head_sha)}"
