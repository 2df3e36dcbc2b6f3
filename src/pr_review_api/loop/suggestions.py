"""The checks of a finding's suggestion (specification §14), after the final-review checks.

REVIEW_SUGGESTIONS on: a finding may carry a replacement of lines `start_line`..`end_line` of
its file at the head. Each suggestion is checked in the order of `RULES`; the first rule it
breaks sets it to null, and the review's notes gain one fixed sentence naming the finding (by
its 1-based index in the model's review) and the rule. A suggestion never fails the review and
never costs a provider round. Every finding comes back with the field set (null or kept), so
that every document carries it.

This runs where the line check runs: inside `parse_final_review`, on a worker thread. The
files are checked one after the other, each read once; their parses run in a child process
with a memory limit and the review's one syntax budget (`loop/syntax_process.py`), and any
parse that does not finish, whatever stopped it, drops its suggestion as `syntax_time`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pr_review_api.errors import InvalidRepository, ReviewError, ToolError
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.loop.syntax import language_of
from pr_review_api.loop.syntax_process import SyntaxProcess
from pr_review_api.model import FinalReview, Finding, Suggestion
from pr_review_api.settings import (
    MAX_NOTES,
    MAX_SUGGESTION_BYTES,
    MAX_SUGGESTION_LINES,
    MAX_SYNTAX_CHECK_MEMORY,
    MAX_SYNTAX_CHECK_SECONDS,
)
from pr_review_api.tools.execute import map_git_errors

# Rule name -> what the note says the suggestion did. Fixed words: never the model's text.
RULES: dict[str, str] = {
    "path": "its finding names no file",
    "range": (
        f"its lines are not inside the file or span more than {MAX_SUGGESTION_LINES} lines "
        "(or the file cannot be read as text)"
    ),
    "size": f"its replacement is longer than {MAX_SUGGESTION_BYTES} bytes",
    "unchanged": "its replacement does not change the lines it replaces",
    "line": "the finding's line is outside the lines it replaces",
    "syntax": "the file with it applied has more syntax errors than the file at the head",
    "syntax_time": (
        f"its file could not be parsed within the review's {MAX_SYNTAX_CHECK_SECONDS:g} "
        f"seconds and {MAX_SYNTAX_CHECK_MEMORY // (1024 * 1024)} MiB for syntax checks"
    ),
}


def dropped_note(index: int, rule: str) -> str:
    """The one note of a dropped suggestion: the finding's index and the rule, fixed words."""
    return f"The suggestion of finding {index} was dropped ({rule}): {RULES[rule]}."


def dropped_rules(review: FinalReview) -> list[str]:
    """The rule of each suggestion a review's notes say was dropped (for the evaluation): a
    note counts only when it is exactly `dropped_note` of a finding that has no suggestion."""
    notes = set(review.notes)
    return [
        rule
        for index, finding in enumerate(review.findings, start=1)
        if finding.offered() is None
        for rule in RULES
        if dropped_note(index, rule) in notes
    ]


@dataclass(frozen=True)
class HeadText:
    """A file's text at the head, split as an editor numbers its lines."""

    text: str
    lines: list[str]
    final_newline: bool
    crlf: bool

    @classmethod
    def of(cls, text: str) -> HeadText:
        crlf = "\r\n" in text
        body = text.replace("\r\n", "\n") if crlf else text
        final_newline = body.endswith("\n")
        lines = body.split("\n")
        if final_newline:
            lines.pop()
        return cls(text, lines, final_newline, crlf)

    def replaced(self, start: int, end: int) -> list[str]:
        """The lines `start`..`end` (1-based, inclusive)."""
        return self.lines[start - 1 : end]

    def applied(self, suggestion: Suggestion) -> str:
        """The whole file with the suggestion applied, in the file's own line endings."""
        new = suggestion_lines(suggestion.replacement)
        lines = [
            *self.lines[: suggestion.start_line - 1],
            *new,
            *self.lines[suggestion.end_line :],
        ]
        newline = "\r\n" if self.crlf else "\n"
        text = newline.join(lines)
        return text + newline if self.final_newline and lines else text


def suggestion_lines(replacement: str) -> list[str]:
    """The lines a replacement puts in place of the range: none for `""`."""
    return [] if replacement == "" else replacement.replace("\r\n", "\n").split("\n")


def check_suggestions(
    review: FinalReview,
    repository: PinnedRepository,
    unreadable: type[ReviewError] = InvalidRepository,
) -> FinalReview:
    """Every finding with its suggestion kept or set to null; one note per one dropped."""
    checker = _Checker(repository, unreadable)
    rules = checker.broken_rules(review.findings)
    findings: list[Finding] = []
    notes = list(review.notes)
    for index, finding in enumerate(review.findings, start=1):
        suggestion = finding.offered()
        rule = rules.get(index)
        if rule is not None:
            suggestion = None
            if len(notes) < MAX_NOTES:  # the review's bound holds; the rest are not noted
                notes.append(dropped_note(index, rule))
        elif suggestion is not None:  # the reports show the lines it replaces (no second read)
            suggestion = suggestion.with_replaced(checker.replaced.get(index, []))
        findings.append(finding.model_copy(update={"suggestion": suggestion}))
    return review.model_copy(update={"findings": findings, "notes": notes})


class _Checker:
    """The checks of one review's suggestions, file by file: a file is read, and parsed, once,
    and only one file's text is held at a time (its tree lives in the child process)."""

    def __init__(self, repository: PinnedRepository, unreadable: type[ReviewError]) -> None:
        self.repository = repository
        self.unreadable = unreadable
        self.rules: dict[int, str] = {}  # a finding's 1-based index -> the rule it broke
        # A finding's index -> the head's lines its suggestion replaces (at most 50), kept for
        # the text and Markdown reports: they show them without reading the file again.
        self.replaced: dict[int, list[str]] = {}

    def broken_rules(self, findings: list[Finding]) -> dict[int, str]:
        """The rule each broken suggestion breaks first, by its finding's index."""
        by_path: dict[str, list[tuple[int, Suggestion]]] = {}
        for index, finding in enumerate(findings, start=1):
            suggestion = finding.offered()
            if suggestion is None:
                continue
            if not finding.path:
                self.rules[index] = "path"
            else:
                by_path.setdefault(finding.path, []).append((index, suggestion))
        # Every parse of this review's suggestions shares one budget (loop/syntax_process.py).
        with SyntaxProcess(time.monotonic() + MAX_SYNTAX_CHECK_SECONDS) as parser:
            for path, offered in by_path.items():
                self._check_file(path, [(i, findings[i - 1], s) for i, s in offered], parser)
        return self.rules

    def _check_file(
        self, path: str, offered: list[tuple[int, Finding, Suggestion]], parser: SyntaxProcess
    ) -> None:
        head = self._head_text(path)
        to_parse: list[tuple[int, Suggestion]] = []
        for index, finding, suggestion in offered:
            rule = _plain_rule(finding, suggestion, head)
            if rule is not None:
                self.rules[index] = rule
                continue
            if head is not None:
                self.replaced[index] = head.replaced(suggestion.start_line, suggestion.end_line)
            if language_of(path) is not None:
                to_parse.append((index, suggestion))
        if head is None or not to_parse:
            return
        language = language_of(path)
        assert language is not None
        patched = [_encoded(head.applied(suggestion)) for _, suggestion in to_parse]
        before, after = parser.errors(language, _encoded(head.text), patched)
        for (index, _), errors in zip(to_parse, after, strict=True):
            if before is None or errors is None:
                self.rules[index] = "syntax_time"
            elif errors > before:
                self.rules[index] = "syntax"

    def _head_text(self, path: str) -> HeadText | None:
        """The file's text at the head, or None when it is not UTF-8 text within 1 MiB."""
        try:
            with map_git_errors(self.unreadable):
                text = self.repository.read_source(self.repository.resolve_file(path))
        except ToolError:
            return None
        return HeadText.of(text)


def _plain_rule(finding: Finding, suggestion: Suggestion, head: HeadText | None) -> str | None:
    """The first rule of RULES before `syntax` that the suggestion breaks, or None."""
    start, end = suggestion.start_line, suggestion.end_line
    if end < start or end - start + 1 > MAX_SUGGESTION_LINES:
        return "range"
    if head is None or end > len(head.lines):
        return "range"
    if len(_encoded(suggestion.replacement)) > MAX_SUGGESTION_BYTES:
        return "size"
    if suggestion_lines(suggestion.replacement) == head.replaced(start, end):
        return "unchanged"
    if finding.line is not None and not start <= finding.line <= end:
        return "line"
    return None


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")
