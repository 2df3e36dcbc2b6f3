"""The walkthrough and the linked issues (specification §21) as each destination shows them: tables
in Markdown (the report, the published body on every forge, the gate's summary) and indented
lines in the text report. Each destination passes its own escapers and size; a review without
them shows nothing, so its outputs are as before.

Model text (a walkthrough's summary, a verdict's explanation) is escaped by the caller's
escaper; a long walkthrough folds into a collapsed `<details>`, and what does not fit in the
size given is counted, never cut mid-row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pr_review_api.model import FinalReview
from pr_review_api.output.gate_outcome import CheckOutcome

# A walkthrough of more rows than this is folded into a collapsed <details>.
MAX_OPEN_WALKTHROUGH_ROWS = 8
WALKTHROUGH_TITLE = "Walkthrough"
LINKED_ISSUES_TITLE = "Linked issues"
_ADDRESSED = {"yes": "yes", "partly": "partly", "no": "no", "unclear": "unclear"}

Escaper = Callable[[str], str]


def markdown_sections(
    review: FinalReview,
    *,
    heading: str,
    cell: Escaper,
    path: Escaper,
    max_chars: int,
) -> list[str]:
    """Lines for a Markdown body: the walkthrough table (folded when long), then the linked
    issues table, within `max_chars`; none when the review has neither. `heading` is the
    destination's heading mark ("###"), `cell` escapes model text for one table cell, `path`
    shows a repository path."""
    parts: list[str] = []
    entries = review.walkthrough_entries()
    if entries:
        rows = [
            f"| {', '.join(path(p) for p in entry.paths)} | {cell(entry.summary)} |"
            for entry in entries
        ]
        table = _fitted(["| Files | Change |", "|---|---|"], rows, max_chars // 2)
        files = sum(len(entry.paths) for entry in entries)
        if len(entries) > MAX_OPEN_WALKTHROUGH_ROWS:
            summary = f"{WALKTHROUGH_TITLE}: {files} changed files in {len(entries)} entries"
            parts += ["", f"<details>\n<summary>{summary}</summary>", "", table, "", "</details>"]
        else:
            parts += ["", f"{heading} {WALKTHROUGH_TITLE}", "", table]
    verdicts = review.linked_issue_verdicts()
    if verdicts:
        rows = [
            f"| {cell(v.ref)} | {_ADDRESSED[v.addressed]} | {cell(v.explanation)} |"
            for v in verdicts
        ]
        header = ["| Issue | Addressed | Why |", "|---|---|---|"]
        parts += ["", f"{heading} {LINKED_ISSUES_TITLE}", "", _fitted(header, rows, max_chars // 2)]
    return parts


def _fitted(header: list[str], rows: list[str], max_chars: int) -> str:
    """The table with as many whole rows as fit in `max_chars`, and a count of the rest."""
    lines, size = list(header), sum(len(line) + 1 for line in header)
    for shown, row in enumerate(rows):
        if size + len(row) + 1 > max_chars:
            return "\n".join(lines) + f"\n\n({len(rows) - shown} more rows did not fit.)"
        lines.append(row)
        size += len(row) + 1
    return "\n".join(lines)


def text_sections(review: FinalReview, indented: Callable[[str, int], str]) -> list[str]:
    """Blocks for the text report: a title line, then the entries; `indented` cleans and
    indents model text and paths."""
    blocks: list[str] = []
    entries = review.walkthrough_entries()
    if entries:
        lines = [f"\n{WALKTHROUGH_TITLE}"]
        for entry in entries:
            lines.append(indented(", ".join(entry.paths), 2))
            lines.append(indented(entry.summary, 6))
        blocks.append("\n".join(lines) + "\n")
    verdicts = review.linked_issue_verdicts()
    if verdicts:
        lines = [f"\n{LINKED_ISSUES_TITLE}"]
        for verdict in verdicts:
            lines.append(indented(f"{verdict.ref}: {_ADDRESSED[verdict.addressed]}", 2))
            lines.append(indented(verdict.explanation, 6))
        blocks.append("\n".join(lines) + "\n")
    return blocks


def with_linked_issues(outcome: CheckOutcome, review: FinalReview, cell: Escaper) -> CheckOutcome:
    """The gate's outcome with the linked issues' verdicts: a table in its summary and, in its
    plain-text brief, each ref (ours: parsed from the description) and verdict (an enum)."""
    verdicts = review.linked_issue_verdicts()
    if not verdicts:
        return outcome
    table = markdown_sections(
        review.model_copy(update={"walkthrough": []}),
        heading="###",
        cell=cell,
        path=cell,
        max_chars=8 * 1024,
    )
    said = ", ".join(f"{v.ref} {_ADDRESSED[v.addressed]}" for v in verdicts)
    brief = outcome.brief.removesuffix(".") + f"; linked issues: {said}." if outcome.brief else ""
    return replace(outcome, summary=outcome.summary + "\n" + "\n".join(table), brief=brief)
