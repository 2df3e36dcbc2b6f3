"""Grounded evidence (REVIEW_REQUIRE_EVIDENCE): a finding must quote code the model received.

What the model received, for this rule, is the code in its tool results and in the inline diff
of the first message (REVIEW_INLINE_DIFF_BYTES):

- `read_repository_file`: each line of `content`, without the `N: ` number the tool adds;
- `search_repository`: each match's `excerpt`, without the `…` marks of a cut excerpt;
- `inspect_git_diff` and the inline diff: each line of the diff, and the same line without its
  first character when that is `+`, `-` or a space (so a quote with or without the diff's
  prefix is found).

Nothing else counts: not the pull request's title, description or file list (the untrusted
metadata of the first message, which its author writes), not the repository's instructions,
not our own prompts, and not the model's own words. A failed tool call showed no code.

Lines are compared after normalising whitespace: every run of whitespace becomes one space and
the ends are stripped. An evidence line is also tried without surrounding backticks, without a
leading `N:` (as `read_repository_file` numbers lines) and without a leading `+`/`-` (as a diff
marks them); it matches when any of these forms equals a line the model received.

A **line of real code** is a normalised line of at least `MIN_CODE_CHARS` non-space characters
with at least one letter or digit: a line of only punctuation (`});`, a fence of backticks) or
a bare word such as `else:` proves nothing. A finding is **grounded** when at least one line of
its evidence is a line of real code that matches. At least one, not all: evidence mixes code
with prose ("`save(widget)` runs before the check"), and prose can never be told from code by
its shape, so only the presence of one quoted line can be asked for. The quote must be a whole
line (as received, whitespace aside), not a fragment of one: a fragment as short as a name
would ground almost anything.

Ungrounded findings are dropped after the final-review checks (before the repository's
configuration is applied) and the review's `notes` gain one fixed sentence with their count.
The rule never fails a review and never costs a provider round.

The recorder keeps a 16-byte digest of each normalised line, never the text, and at most
`MAX_RECORDED_LINES` of them: what a review can receive is bounded already (1 MiB of tool
content, the inline diff's limit), so the cap only guards against a bug.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pr_review_api.model import FinalReview
from pr_review_api.settings import MAX_NOTES

MIN_CODE_CHARS = 6
MAX_RECORDED_LINES = 200_000
NOTE_UNGROUNDED = (
    "{count} finding(s) were left out because their evidence quotes no line of code "
    "the review received (REVIEW_REQUIRE_EVIDENCE)."
)
_NOTE_PATTERN = re.compile(
    r"(\d+) finding\(s\) were left out because their evidence quotes no line of code "
    r"the review received \(REVIEW_REQUIRE_EVIDENCE\)\."
)
_WHITESPACE = re.compile(r"\s+")
_READ_NUMBER = re.compile(r"^\s*\d+:(?: |$)")
_DIFF_PREFIXES = ("+", "-", " ")
_ELLIPSIS = "…"


def normalise(line: str) -> str:
    """Whitespace runs made one space, the ends stripped."""
    return _WHITESPACE.sub(" ", line).strip()


def is_real_code(normalised: str) -> bool:
    """At least MIN_CODE_CHARS non-space characters, one of them a letter or a digit."""
    visible = normalised.replace(" ", "")
    return len(visible) >= MIN_CODE_CHARS and any(char.isalnum() for char in visible)


def _digest(normalised: str) -> bytes:
    return hashlib.blake2b(normalised.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class ReceivedCode:
    """The lines of code one review's model has received, as digests of normalised lines."""

    def __init__(self) -> None:
        self._digests: set[bytes] = set()

    def __len__(self) -> int:
        return len(self._digests)

    def saw_tool_result(self, name: str, result: Mapping[str, Any]) -> None:
        """Note a tool result the model received (a failed call shows no code)."""
        if result.get("ok") is not True:
            return
        if name == "read_repository_file":
            lines = str(result.get("content", "")).split("\n")
            self._add(_READ_NUMBER.sub("", line, count=1) for line in lines)
        elif name == "search_repository":
            for match in result.get("matches", []):
                excerpt = str(match.get("excerpt", "")) if isinstance(match, Mapping) else ""
                self._add([excerpt.removeprefix(_ELLIPSIS).removesuffix(_ELLIPSIS)])
        elif name == "inspect_git_diff":
            self.saw_diff(str(result.get("diff", "")))

    def saw_diff(self, text: str) -> None:
        """A diff the model received (a tool's, or the one inlined in the first message)."""
        self._add(_diff_forms(text.split("\n")))

    def _add(self, lines: Iterable[str]) -> None:
        for line in lines:
            if len(self._digests) >= MAX_RECORDED_LINES:
                return
            normalised = normalise(line)
            if is_real_code(normalised):
                self._digests.add(_digest(normalised))

    def quotes(self, evidence: str) -> bool:
        """Whether at least one line of `evidence` is real code the model received."""
        return any(
            is_real_code(form) and _digest(form) in self._digests
            for line in evidence.split("\n")
            for form in _evidence_forms(line)
        )


def _diff_forms(lines: Iterable[str]) -> Iterator[str]:
    for line in lines:
        yield line
        if line.startswith(_DIFF_PREFIXES):
            yield line[1:]


def _evidence_forms(line: str) -> set[str]:
    """The normalised forms under which an evidence line may have been received."""
    plain = normalise(line)
    unquoted = normalise(plain.strip("`"))
    forms = {plain, unquoted}
    for form in (plain, unquoted):
        numberless = normalise(_READ_NUMBER.sub("", form, count=1))
        forms.add(numberless)
        for candidate in (form, numberless):
            if candidate.startswith(("+", "-")):
                forms.add(normalise(candidate[1:]))
    return forms


def apply_evidence_rule(review: FinalReview, received: ReceivedCode) -> FinalReview:
    """Drop the findings whose evidence quotes no line of code the model received, and say so
    in one fixed note (the model's notes are cut to leave it room)."""
    kept = [finding for finding in review.findings if received.quotes(finding.evidence)]
    dropped = len(review.findings) - len(kept)
    if not dropped:
        return review
    notes = [*review.notes[: MAX_NOTES - 1], NOTE_UNGROUNDED.format(count=dropped)]
    return review.model_copy(update={"findings": kept, "notes": notes})


def ungrounded_count(notes: Iterable[str]) -> int:
    """How many findings the rule dropped, read back from the review's notes (evaluation)."""
    for note in reversed(list(notes)):
        found = _NOTE_PATTERN.fullmatch(note)
        if found is not None:
            return int(found.group(1))
    return 0
