"""Our first review on a pull request: the one place its summary is kept current
(specification §10).

The first review we publish on a pull request is the full one (publishing/layout.py). A later
head posts no second full review: its new findings go in a short review
(`review_text.render_short_body`), and whatever it found, the first review's body is rewritten
(`PUT .../reviews/{id}`, github/publish.py) by `updated_body`:

- the current summary, counts by severity and coverage, and one line saying which head it is
  for and what that head posted;
- the list of findings the first review holds in its body, kept as it was posted;
- the current notes, model, rounds and tokens;
- every head marker the body had, this head's appended (so a head with nothing new is known as
  published, and the order of the markers is the order the heads were reviewed), and every
  finding marker it had, with the fingerprints of findings this head reported again in an open
  thread of ours (github/threads.py).

Model text is escaped as everywhere; the body we parse is our own (read only from reviews of the
publishing identity), and every line of it that starts at the margin is ours: model text in it
is escaped and indented.
"""

from __future__ import annotations

from collections.abc import Collection

from pr_review_api.github.layout import GITHUB_LAYOUT
from pr_review_api.model import ReviewResult
from pr_review_api.output.inert_markdown import escape
from pr_review_api.publishing.layout import (
    BODY_FINDINGS_HEADING,
    NOTES_HEADING,
    summary_lines,
    usage_line,
)
from pr_review_api.publishing.markers import (
    SUMMARY_HEADING,
    finding_marker,
    head_marker,
    ordered_markers,
)
from pr_review_api.publishing.placement import Placement

MAX_EDITED_BODY_CHARS = 65_000  # GitHub refuses bodies over 65,536 characters
DROPPED_FINDINGS = "The findings this review listed in its body no longer fit here."
CUT = " (cut to fit)"


def updated_body(
    old: str,
    result: ReviewResult,
    placement: Placement,
    *,
    new_review: bool,
    matched: Collection[str] = (),
) -> str | None:
    """The first review's body `old`, rewritten for `result`'s head (module docstring); None
    when even its markers do not fit in a body GitHub takes."""
    head = result.revisions.head_sha
    heads, fingerprints = ordered_markers(old)
    kept = _kept_findings(old)
    _, in_kept = ordered_markers(kept)
    loose = [f for f in dict.fromkeys([*fingerprints, *matched]) if f not in set(in_kept)]
    tail = ["", usage_line(result, GITHUB_LAYOUT), ""]
    tail += [head_marker(h) for h in dict.fromkeys([*heads, head])]
    tail += [finding_marker(f) for f in loose]
    top = [
        *summary_lines(result, GITHUB_LAYOUT),
        "",
        _status(result, placement, new_review=new_review),
    ]
    notes = _notes(result)
    body = _joined(top, kept, notes, tail)
    if len(body) <= MAX_EDITED_BODY_CHARS:
        return body
    body = _joined(top, kept, [], tail)
    if len(body) > MAX_EDITED_BODY_CHARS and kept:
        # The kept list's markers stay, invisible; its text gives way to the current summary.
        tail += [finding_marker(f) for f in in_kept]
        kept = f"\n{DROPPED_FINDINGS}"
        body = _joined(top, kept, [], tail)
    if len(body) <= MAX_EDITED_BODY_CHARS:
        return body
    # Still too long: the summary (top[2], see review_text.summary_lines) is cut to fit.
    summary = result.review.summary
    room = MAX_EDITED_BODY_CHARS - (len(body) - len(top[2])) - len(CUT)
    keep = room
    while keep > 0 and len(escape(summary[:keep])) > room:
        keep = keep * 3 // 4  # escaping lengthens text by up to three times
    if keep <= 0:
        return None
    top[2] = escape(summary[:keep]) + CUT
    return _joined(top, kept, [], tail)


def _joined(top: list[str], kept: str, notes: list[str], tail: list[str]) -> str:
    return "\n".join([*top, *([kept] if kept else []), *notes, *tail])


def _status(result: ReviewResult, placement: Placement, *, new_review: bool) -> str:
    short = result.revisions.head_sha[:7]
    new = len(placement.inline) + len(placement.body)
    posted = (
        f"{new} new findings are in that head's review"
        if new_review and new
        else "no new finding to post"
    )
    repeated = f"; {placement.skipped} already posted, not repeated" if placement.skipped else ""
    return f"Updated for head `{short}`: {posted}{repeated}."


def _notes(result: ReviewResult) -> list[str]:
    notes = [escape(note).replace("\n", "\n  ") for note in result.review.notes]
    return ["", NOTES_HEADING, "", *("- " + note for note in notes)] if notes else []


def _kept_findings(old: str) -> str:
    """The list of findings of `old`'s body (its heading to the notes, the small print or the
    markers), with the blank line before it; "" when it has none."""
    lines = old.split("\n")
    if not lines or lines[0] != SUMMARY_HEADING or BODY_FINDINGS_HEADING not in lines:
        return ""
    start = lines.index(BODY_FINDINGS_HEADING)
    end = start + 1
    while end < len(lines) and not _ends_findings(lines[end]):
        end += 1
    kept = lines[start:end]
    while kept and not kept[-1]:
        kept.pop()
    return "\n" + "\n".join(kept)


def _ends_findings(line: str) -> bool:
    return line == NOTES_HEADING or line.startswith(("<sub>", "<!-- pr-review:"))
