"""The Markdown report for a pull-request comment: every construct that could break out of the
comment's structure is escaped (tables, HTML, code fences, links, headings, mentions)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from pr_review_api.model import Finding, ReviewResult, Severity, TraceTurn
from pr_review_api.output import custom_checks
from pr_review_api.output.common import (
    arguments_json,
    by_severity,
    clean,
    counts_line,
    coverage_line,
    location,
    severity_counts,
    subject,
    suggestion_diff,
    suggestion_heading,
    usage_line,
)
from pr_review_api.output.inert_markdown import break_references, code_block
from pr_review_api.output.understanding import markdown_sections

# The walkthrough's and linked issues' tables in a report, at most (a report has no host limit).
MAX_SECTION_CHARS = 200_000

_ICONS: Mapping[Severity, str] = {
    "critical": "🔴",
    "high": "🟠",
    "medium": "🟡",
    "low": "🔵",
    "info": "⚪",
}


_MD_ALWAYS = re.compile(r"([\\`*_\[\]|~])")
_MD_LINE_START = re.compile(r"^([#+\-=])")
_MD_ORDERED_ITEM = re.compile(r"^(\d+)([.)])")
_MD_SAFE_CODE = re.compile(r"[\w./+@=,:-]+")


def md_escape(text: str) -> str:
    """Untrusted text as Markdown that renders as that literal text, line breaks kept.

    HTML becomes entities, inline syntax is backslash-escaped, block syntax at a line's start
    (headings, lists, quotes, indented code) is neutralised, and GitHub's filters find no
    mention, issue reference (`#12`, `owner/repo#7`, `GH-3`) or bare URL in it
    (`inert_markdown.break_references`).
    """
    lines = []
    for raw in clean(text).split("\n"):
        line = raw.strip().replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        line = _MD_ALWAYS.sub(r"\\\1", line)
        line = _MD_LINE_START.sub(r"\\\1", line)
        line = _MD_ORDERED_ITEM.sub(r"\1\\\2", line)
        lines.append(break_references(line))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")


def md_inline(text: str) -> str:
    """Untrusted text for one line (a table cell or a heading): line breaks become spaces."""
    return md_escape(" ".join(clean(text).split()))


def md_code(text: str) -> str:
    """A path as a code span when it is plain enough to need no escaping, else escaped text."""
    if _MD_SAFE_CODE.fullmatch(text):
        return f"`{text}`"
    return md_inline(text)


def render_markdown(result: ReviewResult) -> str:
    """A review ready to paste into a pull-request comment."""
    parts = [f"## pr-review: {md_inline(subject(result))}", _md_overview(result)]
    parts.append(coverage_line(result.coverage, md_code))
    parts += ["### Summary", md_escape(result.review.summary)]
    understood = markdown_sections(  # specification §21: the walkthrough, the linked issues
        result.review, heading="###", cell=md_inline, path=md_code, max_chars=MAX_SECTION_CHARS
    )
    if understood:
        parts.append("\n".join(understood).strip("\n"))
    for severity, findings in by_severity(result):
        parts.append(f"### {_ICONS[severity]} {severity.capitalize()} ({len(findings)})")
        parts += [_md_finding(finding) for finding in findings]
    if checks := result.review.check_results():  # specification §20: only when a check applied
        parts.append(custom_checks.markdown_section(checks, md_inline, md_escape))
    if result.review.notes:
        notes = "\n".join(f"- {md_inline(note)}" for note in result.review.notes)
        parts += ["### Notes", notes]
    if result.trace is not None:
        parts.append(_md_trace(result.trace))
    parts.append(f"<sub>{md_inline(usage_line(result))}</sub>")
    return "\n\n".join(parts) + "\n"


def _md_overview(result: ReviewResult) -> str:
    counts = severity_counts(result)
    revisions = result.revisions
    lines = [
        f"Reviewed `{revisions.head_sha[:12]}` against merge base "
        f"`{revisions.merge_base_sha[:12]}`: **{md_inline(counts_line(result))}**."
    ]
    if counts:
        lines += ["", "| Severity | Findings |", "|---|---:|"]
        lines += [f"| {_ICONS[s]} {s} | {n} |" for s, n in counts.items()]
    return "\n".join(lines)


def _md_finding(finding: Finding) -> str:
    parts = [
        f"#### {md_inline(finding.title)}",
        md_code(location(finding)),
        md_escape(finding.explanation),
        f"**Evidence:** {md_escape(finding.evidence)}",
        f"**Recommendation:** {md_escape(finding.recommendation)}",
    ]
    suggestion = finding.offered()
    if suggestion is not None:
        # Inside a fence no Markdown, mention or reference is read; controls are dropped.
        diff = code_block("diff", clean(suggestion_diff(suggestion, suggestion.replaced_lines())))
        parts += [f"**Suggested change** ({suggestion_heading(suggestion)}):", diff]
    return "\n\n".join(parts)


def _md_trace(trace: list[TraceTurn]) -> str:
    rows = [
        "| Round | Finish | Action | Tool call | Arguments | Result |",
        "|---|---|---|---|---|---|",
    ]
    for turn in trace:
        head = f"| {turn.round} | {md_inline(turn.finish_reason)} | {turn.protocol_action} "
        if not turn.tool_calls:
            rows.append(head + "| | | |")
        for call in turn.tool_calls:
            outcome = "ok" if call.ok else "failed"
            result = f"{outcome}, {call.result_bytes:,} bytes, {call.duration_ms} ms"
            arguments = md_inline(arguments_json(call.arguments))
            rows.append(head + f"| {md_inline(call.name)} | {arguments} | {result} |")
    table = "\n".join(rows)
    rounds = "round" if len(trace) == 1 else "rounds"
    return f"<details>\n<summary>Trace ({len(trace)} {rounds})</summary>\n\n{table}\n\n</details>"
