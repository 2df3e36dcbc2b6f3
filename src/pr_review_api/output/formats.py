"""Renderers of a successful review: JSON, text for terminals, Markdown for PR comments, SARIF.

Everything the model wrote (summary, findings, notes, tool-call arguments in the trace) is
untrusted. The text renderer strips control and bidirectional-override characters so a review
cannot drive the terminal or reorder what the reader sees; the Markdown renderer also escapes
every construct that could break out of the comment's structure (tables, HTML, code fences,
links, headings, mentions). JSON and SARIF carry the text unchanged: JSON escaping is enough.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from rich.console import Console
from rich.text import Text

from pr_review_api import __version__
from pr_review_api.loop.coverage import coverage_line
from pr_review_api.model import SEVERITIES, Finding, ReviewResult, Severity, TraceTurn

OutputFormat = Literal["text", "json", "markdown", "sarif"]


@dataclass(frozen=True)
class LocalSubject:
    """What a local review (`--repo`) was asked for: the path and revisions as given."""

    path: str
    base: str
    head: str


OUTPUT_FORMATS: tuple[OutputFormat, ...] = ("text", "json", "markdown", "sarif")

TOOL_NAME = "pr-review"
INFORMATION_URI = "https://pypi.org/project/pr-review-api/"
SARIF_SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SARIF_LEVELS: Mapping[Severity, str] = {
    "critical": "error",
    "high": "error",
    "medium": "warning",
    "low": "note",
    "info": "note",
}
# GitHub code scanning reads `problem.severity` on a rule for alerts that are not security ones.
_PROBLEM_SEVERITY = {"error": "error", "warning": "warning", "note": "recommendation"}
_STYLES: Mapping[Severity, str] = {
    "critical": "bold white on red",
    "high": "bold red",
    "medium": "bold yellow",
    "low": "bold cyan",
    "info": "bold blue",
}
_ICONS: Mapping[Severity, str] = {
    "critical": "🔴",
    "high": "🟠",
    "medium": "🟡",
    "low": "🔵",
    "info": "⚪",
}

# C0 and C1 controls except tab and newline, plus the bidirectional overrides and isolates
# ("Trojan Source"): none of them belongs in a report, all of them can mislead its reader.
_UNSAFE_CHARACTERS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def render(
    result: ReviewResult,
    output_format: OutputFormat,
    *,
    color: bool = False,
    local: LocalSubject | None = None,
) -> str:
    """`result` in the named format (colour applies to text only). `local` names a local
    review's repository and revisions as the user gave them, for the text header."""
    if output_format == "json":
        return render_json(result.model_dump(mode="json"))
    if output_format == "markdown":
        return render_markdown(result)
    if output_format == "sarif":
        return render_sarif(result)
    return render_text(result, color=color, local=local)


def render_json(document: Mapping[str, Any]) -> str:
    """A response document exactly as the HTTP API serializes it (compact, UTF-8 kept)."""
    return json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def clean(text: str) -> str:
    """Untrusted text without control or bidirectional-override characters (CRLF -> LF)."""
    return _UNSAFE_CHARACTERS.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def severity_counts(result: ReviewResult) -> dict[Severity, int]:
    """How many findings each severity has, most severe first, zeros left out."""
    counts = {severity: 0 for severity in SEVERITIES}
    for finding in result.review.findings:
        counts[finding.severity] += 1
    return {severity: count for severity, count in counts.items() if count}


def location(finding: Finding) -> str:
    """`path:line`, or the path alone when the finding has no line."""
    return finding.path if finding.line is None else f"{finding.path}:{finding.line}"


def _by_severity(result: ReviewResult) -> list[tuple[Severity, list[Finding]]]:
    groups = [(s, [f for f in result.review.findings if f.severity == s]) for s in SEVERITIES]
    return [(severity, findings) for severity, findings in groups if findings]


def _subject(result: ReviewResult) -> str:
    pull = result.pull_request
    return "a local repository" if pull is None else f"{pull.owner}/{pull.repo}#{pull.number}"


def _usage_line(result: ReviewResult) -> str:
    usage = result.usage
    rounds = "round" if result.rounds == 1 else "rounds"
    calls = "tool call" if result.tool_calls == 1 else "tool calls"
    return (
        f"{result.model} · {result.rounds} {rounds} · {result.tool_calls} {calls} · "
        f"{usage.total_tokens:,} tokens ({usage.prompt_tokens:,} prompt, "
        f"{usage.completion_tokens:,} completion)"
    )


def _counts_line(result: ReviewResult) -> str:
    counts = severity_counts(result)
    if not counts:
        return "no findings"
    return ", ".join(f"{count} {severity}" for severity, count in counts.items())


def _arguments(arguments: Mapping[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


# --- text ----------------------------------------------------------------------------------


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
        subject = f"{local.path} ({local.base}..{local.head})"
        report.append(f"Review of {clean(subject)}", style="bold")
    else:
        report.append(f"Review of {_subject(result)}", style="bold")
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
    report.append(f"\nFindings: {_counts_line(result)}\n", style="bold")
    for severity, findings in _by_severity(result):
        report.append(f"\n{severity.upper()} ({len(findings)})\n", style=_STYLES[severity])
        for finding in findings:
            _append_text_finding(report, finding)
    if result.review.notes:
        report.append("\nNotes\n", style="bold underline")
        for note in result.review.notes:
            report.append("  - " + _indented(note, 4).lstrip() + "\n")
    if result.trace is not None:
        _append_text_trace(report, result.trace)
    report.append("\n" + _usage_line(result) + "\n", style="dim")
    return report


def _append_text_finding(report: Text, finding: Finding) -> None:
    report.append(f"  {clean(location(finding))}", style="bold")
    report.append(f"  {clean(finding.title)}\n")
    report.append(_indented(finding.explanation, 6) + "\n")
    report.append("      Evidence: ", style="italic")
    report.append(_indented(finding.evidence, 6).lstrip() + "\n")
    report.append("      Recommendation: ", style="italic")
    report.append(_indented(finding.recommendation, 6).lstrip() + "\n")


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
                f"    {clean(call.name)} {clean(_arguments(call.arguments))} → {mark}, "
                f"{call.result_bytes:,} bytes{cut}, {call.duration_ms} ms\n",
                style=None if call.ok else "yellow",
            )


def _indented(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line for line in clean(text).split("\n"))


# --- markdown ------------------------------------------------------------------------------

_MD_ALWAYS = re.compile(r"([\\`*_\[\]|~])")
_MD_LINE_START = re.compile(r"^([#+\-=])")
_MD_ORDERED_ITEM = re.compile(r"^(\d+)([.)])")
_MD_SAFE_CODE = re.compile(r"[\w./+@=,:-]+")


def md_escape(text: str) -> str:
    """Untrusted text as Markdown that renders as that literal text, line breaks kept.

    HTML becomes entities, inline syntax is backslash-escaped, block syntax at a line's start
    (headings, lists, quotes, indented code) is neutralised, and `@name` cannot mention anyone.
    """
    lines = []
    for raw in clean(text).split("\n"):
        line = raw.strip().replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        line = _MD_ALWAYS.sub(r"\\\1", line)
        line = _MD_LINE_START.sub(r"\\\1", line)
        line = _MD_ORDERED_ITEM.sub(r"\1\\\2", line)
        lines.append(line.replace("@", "@\u200b"))
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
    parts = [f"## pr-review: {md_inline(_subject(result))}", _md_overview(result)]
    parts.append(coverage_line(result.coverage, md_code))
    parts += ["### Summary", md_escape(result.review.summary)]
    for severity, findings in _by_severity(result):
        parts.append(f"### {_ICONS[severity]} {severity.capitalize()} ({len(findings)})")
        parts += [_md_finding(finding) for finding in findings]
    if result.review.notes:
        notes = "\n".join(f"- {md_inline(note)}" for note in result.review.notes)
        parts += ["### Notes", notes]
    if result.trace is not None:
        parts.append(_md_trace(result.trace))
    parts.append(f"<sub>{md_inline(_usage_line(result))}</sub>")
    return "\n\n".join(parts) + "\n"


def _md_overview(result: ReviewResult) -> str:
    counts = severity_counts(result)
    revisions = result.revisions
    lines = [
        f"Reviewed `{revisions.head_sha[:12]}` against merge base "
        f"`{revisions.merge_base_sha[:12]}`: **{md_inline(_counts_line(result))}**."
    ]
    if counts:
        lines += ["", "| Severity | Findings |", "|---|---:|"]
        lines += [f"| {_ICONS[s]} {s} | {n} |" for s, n in counts.items()]
    return "\n".join(lines)


def _md_finding(finding: Finding) -> str:
    return "\n\n".join(
        [
            f"#### {md_inline(finding.title)}",
            md_code(location(finding)),
            md_escape(finding.explanation),
            f"**Evidence:** {md_escape(finding.evidence)}",
            f"**Recommendation:** {md_escape(finding.recommendation)}",
        ]
    )


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
            arguments = md_inline(_arguments(call.arguments))
            rows.append(head + f"| {md_inline(call.name)} | {arguments} | {result} |")
    table = "\n".join(rows)
    rounds = "round" if len(trace) == 1 else "rounds"
    return f"<details>\n<summary>Trace ({len(trace)} {rounds})</summary>\n\n{table}\n\n</details>"


# --- SARIF ---------------------------------------------------------------------------------


def render_sarif(result: ReviewResult) -> str:
    """SARIF 2.1.0, as GitHub code scanning accepts it."""
    return json.dumps(sarif_document(result), indent=2, ensure_ascii=False)


def sarif_document(result: ReviewResult) -> dict[str, Any]:
    """The SARIF log: one run, one rule per severity, one result per finding."""
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": TOOL_NAME,
                "informationUri": INFORMATION_URI,
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [_sarif_rule(severity) for severity in SEVERITIES],
            }
        },
        "results": [_sarif_result(finding) for finding in result.review.findings],
        "columnKind": "unicodeCodePoints",
        "properties": {
            "summary": result.review.summary,
            "notes": list(result.review.notes),
            "model": result.model,
            "revisions": result.revisions.model_dump(mode="json"),
            "coverage": result.coverage.model_dump(mode="json"),
        },
    }
    if result.pull_request is not None:
        repository = result.pull_request.url.rsplit("/pull/", 1)[0]
        run["versionControlProvenance"] = [
            {"repositoryUri": repository, "revisionId": result.revisions.head_sha}
        ]
    return {"$schema": SARIF_SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def _rule_id(severity: Severity) -> str:
    return f"{TOOL_NAME}/{severity}"


def _sarif_rule(severity: Severity) -> dict[str, Any]:
    level = SARIF_LEVELS[severity]
    article = "An" if severity == "info" else "A"
    return {
        "id": _rule_id(severity),
        "name": f"{severity.capitalize()}SeverityFinding",
        "shortDescription": {
            "text": f"{article} {severity}-severity finding of a pr-review review."
        },
        "defaultConfiguration": {"level": level},
        "properties": {"tags": ["pr-review"], "problem.severity": _PROBLEM_SEVERITY[level]},
    }


def _sarif_result(finding: Finding) -> dict[str, Any]:
    physical: dict[str, Any] = {
        "artifactLocation": {"uri": sarif_uri(finding.path), "uriBaseId": "%SRCROOT%"}
    }
    if finding.line is not None:
        physical["region"] = {"startLine": finding.line}
    message = (
        f"{finding.title}\n\n{finding.explanation}\n\nEvidence: {finding.evidence}\n\n"
        f"Recommendation: {finding.recommendation}"
    )
    return {
        "ruleId": _rule_id(finding.severity),
        "ruleIndex": SEVERITIES.index(finding.severity),
        "level": SARIF_LEVELS[finding.severity],
        "message": {"text": message},
        "locations": [{"physicalLocation": physical}],
        "partialFingerprints": {"prReviewFinding/v1": _fingerprint(finding)},
        "properties": {"severity": finding.severity, "title": finding.title},
    }


def sarif_uri(path: str) -> str:
    """A repository-relative path as a relative URI reference (RFC 3986 percent-encoding).

    `:` is encoded too, so a first segment such as `c:` can never be read as a URI scheme.
    """
    return quote(path, safe="/-._~!$&'()*+,;=@")


def _fingerprint(finding: Finding) -> str:
    # Path and title, not the line: the alert should survive lines shifting between pushes.
    identity = json.dumps([finding.severity, finding.path, finding.title], ensure_ascii=False)
    return hashlib.sha256(identity.encode("utf-8")).hexdigest()[:32]
