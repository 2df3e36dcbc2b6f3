"""The checks of a finding's suggestion (CONTRACT 14), after the final-review checks.

REVIEW_SUGGESTIONS on: a finding may carry a replacement of lines `start_line`..`end_line` of
its file at the head. Each suggestion is checked in the order of `RULES`; the first rule it
breaks sets it to null, and the review's notes gain one fixed sentence naming the finding (by
its 1-based index in the model's review) and the rule. A suggestion never fails the review and
never costs a provider round. Every finding comes back with the field set (null or kept), so
that every document carries it.

This runs where the line check runs: inside `parse_final_review`, on a worker thread.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pr_review_api.errors import InvalidRepository, ReviewError, ToolError
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.loop.syntax import ParseTooSlow, SyntaxBaseline, language_of
from pr_review_api.model import FinalReview, Finding, Suggestion
from pr_review_api.settings import (
    MAX_NOTES,
    MAX_SUGGESTION_BYTES,
    MAX_SUGGESTION_LINES,
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
        "seconds for syntax checks"
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
    findings: list[Finding] = []
    notes = list(review.notes)
    for index, finding in enumerate(review.findings, start=1):
        suggestion = finding.offered()
        rule = None if suggestion is None else checker.broken_rule(finding, suggestion)
        if rule is not None:
            suggestion = None
            if len(notes) < MAX_NOTES:  # the review's bound holds; the rest are not noted
                notes.append(dropped_note(index, rule))
        elif suggestion is not None:  # the reports show the lines it replaces (no second read)
            suggestion = suggestion.with_replaced(checker.replaced(finding.path, suggestion))
        findings.append(finding.model_copy(update={"suggestion": suggestion}))
    return review.model_copy(update={"findings": findings, "notes": notes})


class _Checker:
    """The checks of one review's suggestions; each file is read, and parsed, once."""

    def __init__(self, repository: PinnedRepository, unreadable: type[ReviewError]) -> None:
        self.repository = repository
        self.unreadable = unreadable
        self.heads: dict[str, HeadText | None] = {}
        self.baselines: dict[str, SyntaxBaseline | None] = {}  # None: too slow to parse
        # Every parse of this review's suggestions shares one budget (loop/syntax.py).
        self.deadline = time.monotonic() + MAX_SYNTAX_CHECK_SECONDS

    def broken_rule(  # noqa: PLR0911  (one return per rule of CONTRACT 14, in its order)
        self, finding: Finding, suggestion: Suggestion
    ) -> str | None:
        """The first rule of RULES the suggestion breaks, or None."""
        if not finding.path:
            return "path"
        start, end = suggestion.start_line, suggestion.end_line
        if end < start or end - start + 1 > MAX_SUGGESTION_LINES:
            return "range"
        head = self._head_text(finding.path)
        if head is None or end > len(head.lines):
            return "range"
        if len(suggestion.replacement.encode("utf-8", "surrogatepass")) > MAX_SUGGESTION_BYTES:
            return "size"
        if suggestion_lines(suggestion.replacement) == head.replaced(start, end):
            return "unchanged"
        if finding.line is not None and not start <= finding.line <= end:
            return "line"
        try:
            if not self._parses_as_well(finding.path, head, suggestion):
                return "syntax"
        except ParseTooSlow:
            return "syntax_time"
        return None

    def replaced(self, path: str, suggestion: Suggestion) -> list[str]:
        """The head's lines a kept suggestion replaces (its file was read by its checks)."""
        head = self.heads.get(path)
        return [] if head is None else head.replaced(suggestion.start_line, suggestion.end_line)

    def _head_text(self, path: str) -> HeadText | None:
        """The file's text at the head, or None when it is not UTF-8 text within 1 MiB."""
        if path not in self.heads:
            try:
                with map_git_errors(self.unreadable):
                    text = self.repository.read_source(self.repository.resolve_file(path))
            except ToolError:
                self.heads[path] = None
            else:
                self.heads[path] = HeadText.of(text)
        return self.heads[path]

    def _parses_as_well(self, path: str, head: HeadText, suggestion: Suggestion) -> bool:
        """Whether the patched file has no more syntax errors than the head's (a language
        we parse), or True for any other file."""
        language = language_of(path)
        if language is None:
            return True
        if path not in self.baselines:
            self.baselines[path] = None  # stays None when the head's parse is too slow
            source = head.text.encode("utf-8", "surrogatepass")
            self.baselines[path] = SyntaxBaseline(language, source, self.deadline)
        baseline = self.baselines[path]
        if baseline is None:
            raise ParseTooSlow
        after = head.applied(suggestion).encode("utf-8", "surrogatepass")
        return baseline.errors_with(after, self.deadline) <= baseline.errors
