"""The domain model: what a review is about and what it returns, free of any edge.

Pull-request identity and revisions, token usage, the final review and its findings, the trace,
and the review document of specification §5. Every package may import this module; it imports
only settings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    MISSING,
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from pr_review_api.jsonutil import truncate_utf8
from pr_review_api.settings import (
    MAX_FINAL_TEXT_BYTES,
    MAX_FINDINGS,
    MAX_NOT_INSPECTED,
    MAX_NOTES,
    MAX_TRACE_PREVIEW_BYTES,
)

Severity = Literal["critical", "high", "medium", "low", "info"]
SEVERITIES: tuple[Severity, ...] = ("critical", "high", "medium", "low", "info")


def _bounded_text(value: str) -> str:
    if len(value.encode("utf-8")) > MAX_FINAL_TEXT_BYTES:
        raise ValueError(f"text longer than {MAX_FINAL_TEXT_BYTES} bytes")
    return value


BoundedText = Annotated[str, AfterValidator(_bounded_text)]


# `model_validate(..., context=SUGGESTIONS_OFF)`: a finding's `suggestion` is an unknown field,
# as it is in specification §8 (REVIEW_SUGGESTIONS off).
SUGGESTIONS_OFF = {"suggestions": False}


class Suggestion(BaseModel):
    """A committable replacement of lines `start_line`..`end_line` of the finding's file at the
    head (specification §14). Bounds beyond the types are loop/suggestions.py's checks, which drop a
    suggestion rather than fail the review."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    start_line: Annotated[int, Field(ge=1)]
    end_line: Annotated[int, Field(ge=1)]
    replacement: str
    # The head's lines it replaces, as the checks read them (loop/suggestions.py): the text
    # and Markdown reports show them as `-` lines. Never serialized: the document is
    # specification §14's.
    _replaced: tuple[str, ...] | None = PrivateAttr(default=None)

    def __eq__(self, other: object) -> bool:
        # The replaced lines are the head's, read for the reports: not part of the value.
        if not isinstance(other, Suggestion):
            return NotImplemented
        return self.model_dump() == other.model_dump()

    def __hash__(self) -> int:
        return hash((self.start_line, self.end_line, self.replacement))

    def replaced_lines(self) -> tuple[str, ...] | None:
        """The head's lines this suggestion replaces, when the checks read them."""
        return self._replaced

    def with_replaced(self, lines: Sequence[str]) -> Suggestion:
        """This suggestion, knowing the head's lines it replaces."""
        copy = self.model_copy()
        copy._replaced = tuple(lines)
        return copy


class Finding(BaseModel):
    """One problem the model found, tied to a file and optionally a line.

    `suggestion` is MISSING (absent from every document, byte for byte as specification §8) unless
    REVIEW_SUGGESTIONS is on; then it is null or a checked `Suggestion`."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    severity: Severity
    title: BoundedText
    explanation: BoundedText
    path: BoundedText
    line: Annotated[int, Field(ge=1)] | None
    evidence: BoundedText
    recommendation: BoundedText
    suggestion: Suggestion | MISSING | None = MISSING

    @field_validator("suggestion", mode="before")
    @classmethod
    def _known_only_when_on(cls, value: object, info: ValidationInfo) -> object:
        if info.context == SUGGESTIONS_OFF:
            raise PydanticCustomError("extra_forbidden", "Extra inputs are not permitted")
        return value

    def offered(self) -> Suggestion | None:
        """The suggestion the finding carries, if any (absent and null alike: None)."""
        return None if self.suggestion is MISSING else self.suggestion

    def fingerprint(self, line_text: str | None = None) -> str:
        """Stable for the same path, severity, title and text of the anchored line, whatever the
        line's number (specification §10); without a line's text, for path, severity and title alone
        (the SARIF `partialFingerprints` value). 32 hexadecimal characters."""
        parts = [self.severity, self.path, self.title]
        if line_text is not None:
            parts.append(line_text.strip())
        identity = json.dumps(parts, ensure_ascii=False)
        return hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:32]


CheckResultKind = Literal["pass", "fail", "inconclusive"]
CHECK_RESULTS: tuple[CheckResultKind, ...] = ("pass", "fail", "inconclusive")


class CheckResult(BaseModel):
    """The model's result of one custom check of `.pr-review.toml` (specification §20)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: BoundedText
    result: CheckResultKind
    explanation: BoundedText
    evidence: BoundedText


MAX_WALKTHROUGH_SUMMARY_CHARS = 300
LinkedIssueVerdict = Literal["yes", "partly", "no", "unclear"]
LINKED_ISSUE_VERDICTS: tuple[LinkedIssueVerdict, ...] = ("yes", "partly", "no", "unclear")


class WalkthroughEntry(BaseModel):
    """One row of the walkthrough (specification §21): changed files and what their change does."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    paths: Annotated[list[BoundedText], Field(min_length=1)]
    summary: Annotated[str, Field(max_length=MAX_WALKTHROUGH_SUMMARY_CHARS)]


class LinkedIssue(BaseModel):
    """Whether the change does what a linked issue asks (specification §21)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    ref: BoundedText
    addressed: LinkedIssueVerdict
    explanation: BoundedText


class FinalReview(BaseModel):
    """The model's validated review.

    `checks` is MISSING (absent from every document, byte for byte as specification §8) unless at
    least one custom check applied to the change (loop/custom_checks.py validates it).
    `walkthrough` and `linked_issues` (specification §21) are MISSING too unless the review asked
    for them (loop/understanding.py)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    summary: BoundedText
    findings: Annotated[list[Finding], Field(max_length=MAX_FINDINGS)]
    notes: Annotated[list[BoundedText], Field(max_length=MAX_NOTES)]
    checks: list[CheckResult] | MISSING = MISSING

    def check_results(self) -> list[CheckResult]:
        """The custom checks' results (none when no check applied)."""
        return [] if self.checks is MISSING else self.checks

    walkthrough: list[WalkthroughEntry] | MISSING = MISSING
    linked_issues: list[LinkedIssue] | MISSING = MISSING

    def walkthrough_entries(self) -> list[WalkthroughEntry]:
        """The walkthrough's entries; none when the review has no walkthrough."""
        return [] if self.walkthrough is MISSING else self.walkthrough

    def linked_issue_verdicts(self) -> list[LinkedIssue]:
        """The linked issues' verdicts; none when no issue was read."""
        return [] if self.linked_issues is MISSING else self.linked_issues


MAX_TRACE_LABEL_CHARS = 256


class Usage(BaseModel):
    """Token counts, summed over rounds for a review."""

    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )


class TraceToolCall(BaseModel):
    """One executed tool call."""

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    arguments: dict[str, Any]
    ok: bool
    result_preview: str
    result_bytes: int
    truncated: bool
    duration_ms: int


class TraceTurn(BaseModel):
    """One provider round."""

    model_config = ConfigDict(extra="forbid")

    round: int
    provider_request_id: str | None
    provider_model: str | None
    finish_reason: str
    protocol_action: Literal["execute_tools", "final_review"]
    usage: Usage
    tool_calls: list[TraceToolCall]


class RunRecord(BaseModel):
    """What a review spent up to its end, for internal callers: a failed review's data.

    Every `ReviewError` a review raises carries one (`ReviewError.run`), so evaluation can count
    the tokens and rounds of failed reviews. The edges never show it: an error document has
    `"trace": null` (the seed: no partial trace when the review terminates with an error).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    rounds: int = 0
    tool_calls: int = 0
    usage: Usage = Field(default_factory=Usage)
    trace: list[TraceTurn] = Field(default_factory=list)


def preview(text: str) -> str:
    """At most MAX_TRACE_PREVIEW_BYTES of UTF-8, cut on a character boundary."""
    return truncate_utf8(text, MAX_TRACE_PREVIEW_BYTES)


def label(value: object) -> str | None:
    """A provider-supplied identifier, bounded, or None when it is not a string."""
    if not isinstance(value, str):
        return None
    return value[:MAX_TRACE_LABEL_CHARS]


Forge = Literal["github", "gitlab", "gitea"]


class PullRequestInfo(BaseModel):
    """The canonical identity of a pull request, or of a GitLab merge request (specification §17:
    `owner` is then the full namespace path and `number` the iid)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    owner: str
    repo: str
    number: int
    forge: Forge = "github"


class Revisions(BaseModel):
    """The commits a review is pinned to; the diff runs from merge base to head."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_sha: str
    head_sha: str
    merge_base_sha: str


class Coverage(BaseModel):
    """Which changed files the model saw (docs/coverage.md; the rules are in loop/coverage.py)."""

    model_config = ConfigDict(extra="forbid")

    changed_files: int = 0
    inspected_files: int = 0
    not_inspected: Annotated[list[str], Field(max_length=MAX_NOT_INSPECTED)] = []


# The code of a failed publication names its forge (specification §10).
PublishFailedCode = Literal[
    "github_publish_failed", "gitlab_publish_failed", "gitea_publish_failed"
]


class PublicationError(BaseModel):
    """Why a publication failed: a fixed sentence, never GitHub's body."""

    model_config = ConfigDict(extra="forbid")

    code: PublishFailedCode
    message: str


class Publication(BaseModel):
    """What publishing the review on the pull request did (docs/publishing.md)."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["published", "already_published", "failed"]
    review_id: int | None = None
    url: str | None = None
    inline_comments: int = 0
    body_findings: int = 0
    duplicates_skipped: int = 0
    # specification §15: findings a dismissal of the repository kept off; our threads resolved.
    suppressed: int = 0
    resolved: int = 0
    error: PublicationError | None = None


class Cost(BaseModel):
    """The review's estimated price (REVIEW_PRICE_INPUT_PER_MTOK, REVIEW_PRICE_OUTPUT_PER_MTOK)."""

    model_config = ConfigDict(extra="forbid")

    usd: float


def estimated_cost(
    usage: Usage, input_per_mtok: float | None, output_per_mtok: float | None
) -> Cost | None:
    """What `usage` costs at US dollars per million prompt and completion tokens; None when
    neither price is set (a price not set counts as zero)."""
    if input_per_mtok is None and output_per_mtok is None:
        return None
    dollars = (
        usage.prompt_tokens * (input_per_mtok or 0.0)
        + usage.completion_tokens * (output_per_mtok or 0.0)
    ) / 1_000_000
    return Cost(usd=round(dollars, 6))


def _absent(value: object) -> bool:
    return value is None


class ReviewResult(BaseModel):
    """A successful review."""

    model_config = ConfigDict(extra="forbid")

    # "no_changes": the merge base and the head have the same tree; no model was asked.
    # "skipped": an automatic review that the repository's skip rules stopped (specification §16).
    # "already_published": a head our markers say is published; no model was asked
    # (specification §15).
    termination_reason: Literal["final_review", "no_changes", "skipped", "already_published"] = (
        "final_review"
    )
    pull_request: PullRequestInfo | None
    revisions: Revisions
    model: str
    review: FinalReview
    usage: Usage
    rounds: int
    tool_calls: int
    # A default of zeros: a review that makes no request (no_changes) inspected nothing.
    coverage: Coverage = Field(default_factory=Coverage)
    trace: list[TraceTurn] | None
    # Null unless the review was asked to be published (specification §10).
    publication: Publication | None = None
    # Only when a price is set (specification §2): without one the document has no such key,
    # byte for byte as before the setting existed.
    cost: Cost | None = Field(default=None, exclude_if=_absent)
