"""The text report for terminals: grouped by severity, controls and bidi overrides stripped,
ANSI colour only when asked."""

from __future__ import annotations

import io
from collections.abc import Mapping

from rich.console import Console
from rich.text import Text

from pr_review_api.model import Finding, Publication, ReviewResult, Severity, TraceTurn
from pr_review_api.output import custom_checks
from pr_review_api.output.common import (
    LocalSubject,
    arguments_json,
    by_severity,
    clean,
    counts_line,
    coverage_line,
    location,
    subject,
    suggestion_diff,
    suggestion_heading,
    usage_line,
)
from pr_review_api.output.understanding import text_sections

_STYLES: Mapping[Severity, str] = {
    "critical": "bold white on red",
    "high": "bold red",
    "medium": "bold yellow",
    "low": "bold cyan",
    "info": "bold blue",
}


def render_text(
    result: ReviewResult,
    *,
    color: bool = False,
    width: int = 100,
    local: LocalSubject | None = None,
) -> str:
    """A readable report grouped by severity; ANSI colour only when `color` is set."""
    report = _text_report(result, local)
    if not color:
        return report.plain
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        force_terminal=True,
        color_system="standard",
        width=width,
        soft_wrap=True,
        highlight=False,
        emoji=False,
        markup=False,
    )
    console.print(report, end="")
    return buffer.getvalue()


def _text_report(result: ReviewResult, local: LocalSubject | None = None) -> Text:
    report = Text()
    if local is not None and result.pull_request is None:
        # The user's own input, on their own terminal: shown as given (controls stripped).
        given = f"{local.path} ({local.base}..{local.head})"
        report.append(f"Review of {clean(given)}", style="bold")
    else:
        report.append(f"Review of {subject(result)}", style="bold")
    if result.pull_request is not None:
        report.append(f"  {clean(result.pull_request.url)}", style="dim")
    revisions = result.revisions
    report.append(
        f"\nbase {revisions.base_sha[:12]} · head {revisions.head_sha[:12]} · "
        f"merge base {revisions.merge_base_sha[:12]}\n",
        style="dim",
    )
    report.append(coverage_line(result.coverage, clean) + "\n")
    report.append("\nSummary\n", style="bold underline")
    report.append(_indented(result.review.summary, 2) + "\n")
    report.append("".join(text_sections(result.review, _indented)))  # specification §21, if any
    report.append(f"\nFindings: {counts_line(result)}\n", style="bold")
    for severity, findings in by_severity(result):
        report.append(f"\n{severity.upper()} ({len(findings)})\n", style=_STYLES[severity])
        for finding in findings:
            _append_text_finding(report, finding)
    if checks := result.review.check_results():  # specification §20: only when a check applied
        report.append("\n" + "\n".join(custom_checks.text_lines(checks, clean)) + "\n")
    if result.review.notes:
        report.append("\nNotes\n", style="bold underline")
        for note in result.review.notes:
            report.append("  - " + _indented(note, 4).lstrip() + "\n")
    if result.trace is not None:
        _append_text_trace(report, result.trace)
    report.append("\n" + usage_line(result) + "\n", style="dim")
    if result.publication is not None:
        report.append(_publication_line(result.publication) + "\n", style="bold")
    return report


def _publication_line(publication: Publication) -> str:
    """What `--post` did, in one line: the last of the report."""
    if publication.status == "failed":
        error = publication.error
        return "Publishing failed: " + clean(error.message if error else "no reason given")
    where = clean(publication.url) if publication.url else "(GitHub gave no URL)"
    if publication.status == "already_published":
        return f"Already published: {where}"
    return f"Published: {where}"


def _append_text_finding(report: Text, finding: Finding) -> None:
    report.append(f"  {clean(location(finding))}", style="bold")
    report.append(f"  {clean(finding.title)}\n")
    report.append(_indented(finding.explanation, 6) + "\n")
    report.append("      Evidence: ", style="italic")
    report.append(_indented(finding.evidence, 6).lstrip() + "\n")
    report.append("      Recommendation: ", style="italic")
    report.append(_indented(finding.recommendation, 6).lstrip() + "\n")
    suggestion = finding.offered()
    if suggestion is not None:
        report.append(
            f"      Suggested change ({suggestion_heading(suggestion)}):\n", style="italic"
        )
        # Kept exact but for controls and bidi overrides, like every text of the report.
        report.append(_indented(suggestion_diff(suggestion, suggestion.replaced_lines()), 8) + "\n")


def _append_text_trace(report: Text, trace: list[TraceTurn]) -> None:
    report.append("\nTrace\n", style="bold underline")
    for turn in trace:
        request_id = clean(turn.provider_request_id or "-")
        report.append(
            f"  round {turn.round}: finish_reason={clean(turn.finish_reason)} → "
            f"{turn.protocol_action} · {turn.usage.total_tokens:,} tokens · {request_id}\n"
        )
        for call in turn.tool_calls:
            mark = "ok" if call.ok else "failed"
            cut = ", truncated" if call.truncated else ""
            report.append(
                f"    {clean(call.name)} {clean(arguments_json(call.arguments))} → {mark}, "
                f"{call.result_bytes:,} bytes{cut}, {call.duration_ms} ms\n",
                style=None if call.ok else "yellow",
            )


def _indented(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line for line in clean(text).split("\n"))
