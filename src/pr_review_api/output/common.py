"""What every renderer shares: the format names, the local-review subject, untrusted-text
cleaning, and the counts and lines the reports repeat."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pr_review_api.jsonutil import dumps_compact
from pr_review_api.model import (
    SEVERITIES,
    Coverage,
    Finding,
    ReviewResult,
    Severity,
    Suggestion,
)

OutputFormat = Literal["text", "json", "markdown", "sarif"]


@dataclass(frozen=True)
class LocalSubject:
    """What a local review (`--repo`) was asked for: the path and revisions as given."""

    path: str
    base: str
    head: str


OUTPUT_FORMATS: tuple[OutputFormat, ...] = ("text", "json", "markdown", "sarif")

# C0 and C1 controls except tab and newline, plus the bidirectional overrides and isolates
# ("Trojan Source"): none of them belongs in a report, all of them can mislead its reader.
_UNSAFE_CHARACTERS = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


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


def by_severity(result: ReviewResult) -> list[tuple[Severity, list[Finding]]]:
    groups = [(s, [f for f in result.review.findings if f.severity == s]) for s in SEVERITIES]
    return [(severity, findings) for severity, findings in groups if findings]


def subject(result: ReviewResult) -> str:
    pull = result.pull_request
    return "a local repository" if pull is None else f"{pull.owner}/{pull.repo}#{pull.number}"


def usage_line(result: ReviewResult) -> str:
    usage = result.usage
    rounds = "round" if result.rounds == 1 else "rounds"
    calls = "tool call" if result.tool_calls == 1 else "tool calls"
    line = (
        f"{result.model} · {result.rounds} {rounds} · {result.tool_calls} {calls} · "
        f"{usage.total_tokens:,} tokens ({usage.prompt_tokens:,} prompt, "
        f"{usage.completion_tokens:,} completion)"
    )
    if result.cost is not None:  # only with a price set: otherwise the line is as before
        line += f" · about ${result.cost.usd:.4f}"
    return line


def counts_line(result: ReviewResult) -> str:
    counts = severity_counts(result)
    if not counts:
        return "no findings"
    return ", ".join(f"{count} {severity}" for severity, count in counts.items())


def arguments_json(arguments: Mapping[str, Any]) -> str:
    return dumps_compact(arguments)


LINE_PATHS = 10  # not-inspected paths a report line names before "and N more"


def coverage_line(coverage: Coverage, path: Callable[[str], str] = str) -> str:
    """One sentence for a report: "Inspected 12 of 15 changed files; not inspected: a.py."

    `path` renders each path for the destination (stripped of controls, escaped for Markdown);
    at most LINE_PATHS are named, the rest counted.
    """
    total = coverage.changed_files
    if total == 0:
        return "No changed files to inspect."
    files = "file" if total == 1 else "files"
    line = f"Inspected {coverage.inspected_files} of {total} changed {files}"
    missing = total - coverage.inspected_files
    if missing <= 0 or not coverage.not_inspected:
        return line + "."
    shown = coverage.not_inspected[:LINE_PATHS]
    more = missing - len(shown)
    return f"{line}; not inspected: {', '.join(path(_one_line(item)) for item in shown)}" + (
        f" and {more} more." if more > 0 else "."
    )


def _one_line(path: str) -> str:
    """A path that keeps a report line one line: git allows line breaks in names."""
    return path.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")


def suggestion_heading(suggestion: Suggestion) -> str:
    """Which lines a suggestion replaces, in words: "lines 3-5" or "line 3"."""
    start, end = suggestion.start_line, suggestion.end_line
    return f"line {start}" if start == end else f"lines {start}-{end}"


def suggestion_diff(suggestion: Suggestion, replaced: Sequence[str] | None = None) -> str:
    """A kept suggestion as a small diff (specification §14): a hunk header, `-` each line it
    replaces (when the head's text is at hand) and `+` each line of its replacement."""
    start, end = suggestion.start_line, suggestion.end_line
    new = [] if suggestion.replacement == "" else suggestion.replacement.split("\n")
    header = f"@@ -{start},{end - start + 1} +{start},{len(new)} @@"
    old = [] if replaced is None else ["-" + line for line in replaced]
    return "\n".join([header, *old, *("+" + line for line in new)])
