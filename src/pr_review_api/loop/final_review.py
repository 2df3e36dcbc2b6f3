"""The final review: its JSON schema and the stop-turn checks (the model is in `model.py`).

A stop turn becomes a review only when its content is a JSON object that matches the schema
exactly (no extra fields, no coercion), stays within the count and size limits, and every
finding names an existing regular file at the head commit with a line inside that file.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from pr_review_api.errors import InvalidModelResponse, InvalidRepository, ReviewError, ToolError
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.jsonutil import StrictJSONError, loads_strict
from pr_review_api.loop.custom_checks import ChecksRejected, CustomCheck, take_checks, with_checks
from pr_review_api.loop.suggestions import check_suggestions
from pr_review_api.loop.understanding import (
    NO_UNDERSTANDING,
    Understanding,
    attach,
    extended_schema,
    split_document,
)
from pr_review_api.model import SEVERITIES, SUGGESTIONS_OFF, FinalReview
from pr_review_api.settings import (
    MAX_FINAL_TEXT_BYTES,
    MAX_FINDINGS,
    MAX_NOTES,
    MAX_SUGGESTION_BYTES,
    MAX_SUGGESTION_LINES,
)
from pr_review_api.tools.execute import map_git_errors

_TEXT = {"type": "string", "maxLength": MAX_FINAL_TEXT_BYTES}

FINAL_REVIEW_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "pr-review final review",
    "description": (
        "Text fields are limited to 8 KiB of UTF-8 each. A finding's path is "
        "repository-relative and names an existing regular file at the head commit; "
        "line, when not null, lies within that file."
    ),
    "type": "object",
    "properties": {
        "summary": _TEXT,
        "findings": {
            "type": "array",
            "maxItems": MAX_FINDINGS,
            "items": {
                "type": "object",
                "properties": {
                    "severity": {"enum": list(SEVERITIES)},
                    "title": _TEXT,
                    "explanation": _TEXT,
                    "path": _TEXT,
                    "line": {"type": ["integer", "null"], "minimum": 1},
                    "evidence": _TEXT,
                    "recommendation": _TEXT,
                },
                "required": [
                    "severity",
                    "title",
                    "explanation",
                    "path",
                    "line",
                    "evidence",
                    "recommendation",
                ],
                "additionalProperties": False,
            },
        },
        "notes": {"type": "array", "maxItems": MAX_NOTES, "items": _TEXT},
    },
    "required": ["summary", "findings", "notes"],
    "additionalProperties": False,
}


# specification §14 (REVIEW_SUGGESTIONS on): a finding may carry this; it is not required.
SUGGESTION_SCHEMA: dict[str, Any] = {
    "description": (
        "Optional. A small fix of this finding's own lines that the author can commit as is: "
        "lines start_line..end_line (inclusive, 1-based) of the finding's file at the head "
        "commit, replaced by replacement (lines joined by \\n, exact indentation, no Markdown "
        'fence; "" deletes them). At most '
        f"{MAX_SUGGESTION_LINES} lines; the finding's line, when not null, lies in the range. "
        "null when the fix is not local to these lines."
    ),
    "anyOf": [
        {"type": "null"},
        {
            "type": "object",
            "properties": {
                "start_line": {"type": "integer", "minimum": 1},
                "end_line": {"type": "integer", "minimum": 1},
                "replacement": {"type": "string", "maxLength": MAX_SUGGESTION_BYTES},
            },
            "required": ["start_line", "end_line", "replacement"],
            "additionalProperties": False,
        },
    ],
}


def final_review_schema(
    *,
    suggestions: bool = False,
    checks: bool = False,
    understanding: Understanding = NO_UNDERSTANDING,
) -> dict[str, Any]:
    """The schema the model is given: section 8's exactly, or with `suggestion` (specification §14),
    or with `checks` when a custom check applies (specification §20), or with the walkthrough and
    linked issues `understanding` asks for (specification §21)."""
    schema = FINAL_REVIEW_SCHEMA
    if suggestions:
        schema = copy.deepcopy(FINAL_REVIEW_SCHEMA)
        schema["properties"]["findings"]["items"]["properties"]["suggestion"] = SUGGESTION_SCHEMA
    return extended_schema(with_checks(schema) if checks else schema, understanding)


_AGAIN = (
    " Reply with the final review only: one JSON object matching the schema in the system "
    "message, with no Markdown fence and no text before or after it."
)
# The names our schema uses: the only field names a message may repeat (model text never).
SCHEMA_NAMES = frozenset(
    {
        *FINAL_REVIEW_SCHEMA["properties"],
        *FINAL_REVIEW_SCHEMA["properties"]["findings"]["items"]["properties"],
    }
)
SUGGESTION_NAMES = SCHEMA_NAMES | {"suggestion", *SUGGESTION_SCHEMA["anyOf"][1]["properties"]}
_FENCE = "```"


class FinalReviewRejected(InvalidModelResponse):
    """A stop turn failed the final-review checks.

    `message` is the contract's fixed sentence; `repair` is the fixed words a repair turn
    (REVIEW_REPAIR_ATTEMPTS) tells the model: which rule, which finding, never its own text;
    `rule` names the check that failed, for the evaluation's report (one of `RULES`).
    """

    def __init__(self, message: str, repair: str, rule: str | None = None) -> None:
        super().__init__(message)
        self.repair = repair
        self.rule = rule


# The final-review checks a stop turn can fail, in the order they run (FinalReviewRejected.rule).
RULES = (
    "empty",
    "fence",
    "json",
    "unknown_field",
    "schema",
    "path",
    "line",
    "walkthrough",  # specification §21: not every changed file once (loop/walkthrough.py)
    "linked_issues",  # not one verdict per issue read (loop/linked_issues.py)
)


def naming_the_setting(
    rejected: FinalReviewRejected,
    content: object,
    *,
    tolerant: bool,
    repairs: int,
    last_round: bool,
) -> FinalReviewRejected:
    """The rejection that ends a conversation, naming the setting that would have accepted it
    or let the model correct it (specification §12: a fenced review names
    REVIEW_TOLERANT_FINAL_JSON; with repairs off and a round left, REVIEW_REPAIR_ATTEMPTS); as it is
    when none would."""
    text = content.strip() if isinstance(content, str) else ""
    if not tolerant and text.startswith(_FENCE) and unwrap_fence(text) is not None:
        hint = "REVIEW_TOLERANT_FINAL_JSON=true unwraps one fenced JSON object"
    elif repairs == 0 and not last_round:
        hint = "REVIEW_REPAIR_ATTEMPTS=1 gives the model one turn to correct it"
    else:
        return rejected
    return FinalReviewRejected(
        f"{rejected.message} {hint} (REVIEW_PROFILE=local sets both).",
        rejected.repair,
        rejected.rule,
    )


def parse_final_review(
    content: object,
    repository: PinnedRepository,
    *,
    tolerant: bool = False,
    unreadable: type[ReviewError] = InvalidRepository,
    suggestions: bool = False,
    checks: Sequence[CustomCheck] = (),
    understanding: Understanding = NO_UNDERSTANDING,
) -> FinalReview:
    """Apply every stop-turn check to a stop turn's content.

    With `tolerant` (REVIEW_TOLERANT_FINAL_JSON), one JSON object inside one Markdown code
    fence, closed or not, is unwrapped first. Paths come back in canonical form (specification §8).
    A git failure while checking paths and lines raises `unreadable` (`map_git_errors`).
    With `suggestions` (REVIEW_SUGGESTIONS), a finding may carry a suggestion; each is then
    checked (loop/suggestions.py), and one that fails is dropped with a note, never rejected.
    `checks` (the custom checks that apply, specification §20): the review must give each one's
    result (loop/custom_checks.py); without any, a `checks` field is unknown, as in
    specification §8. `understanding` (specification §21) adds the walkthrough and linked-issue
    verdicts it asks for, checked against the change (loop/understanding.py).
    """
    if not isinstance(content, str) or not content.strip():
        raise FinalReviewRejected(
            "The final review was empty.", "Your final review was empty." + _AGAIN, "empty"
        )
    text = content.strip()
    if text.startswith(_FENCE):
        unwrapped = unwrap_fence(text) if tolerant else None
        if unwrapped is None:
            raise FinalReviewRejected(
                "The final review was wrapped in a Markdown code fence.",
                "Your final review was wrapped in a Markdown code fence." + _AGAIN,
                "fence",
            )
        text = unwrapped
    try:
        document = loads_strict(text)
    except StrictJSONError:
        raise FinalReviewRejected(
            "The final review was not valid JSON.",
            "Your final review was not valid JSON." + _AGAIN,
            "json",
        ) from None
    if not checks and isinstance(document, dict) and "checks" in document:
        raise FinalReviewRejected(
            "The final review has an unknown field at the top level.",
            "Your final review has an unknown field at the top level." + _AGAIN,
        )
    try:
        document, results = take_checks(document, checks)
    except ChecksRejected as rejected:
        raise FinalReviewRejected(rejected.message, rejected.repair + _AGAIN) from None
    document, ours = _split(document, understanding)
    try:
        review = FinalReview.model_validate(
            document, context=None if suggestions else SUGGESTIONS_OFF
        )
    except ValidationError as exc:
        raise _schema_problem(exc, SUGGESTION_NAMES if suggestions else SCHEMA_NAMES) from None
    review = _check_locations(review, repository, unreadable)
    if results is not None:
        review = review.model_copy(update={"checks": results})
    review = _attached(review, ours, understanding)
    if not suggestions:
        return review
    return check_suggestions(review, repository, unreadable)


def _split(document: object, understanding: Understanding) -> tuple[object, dict[str, object]]:
    """The document without the fields `understanding` asks for, and those fields (specification
    §21); one of them it does not ask for is an unknown field."""
    rest, ours, unknown = split_document(document, understanding)
    if unknown is not None:
        raise FinalReviewRejected(unknown[0], unknown[1] + _AGAIN, "unknown_field")
    return rest, ours


def _attached(
    review: FinalReview, ours: dict[str, object], understanding: Understanding
) -> FinalReview:
    """The review with the walkthrough and verdicts, checked against the change."""
    understood = attach(review, ours, understanding)
    if isinstance(understood, tuple):
        message, repair, rule = understood
        raise FinalReviewRejected(message, repair + _AGAIN, rule)
    return understood


def unwrap_fence(text: str) -> str | None:
    """The JSON object inside one Markdown code fence (closing fence optional), or None."""
    first, newline, rest = text.partition("\n")
    info = first[len(_FENCE) :].strip()
    if not newline or not (info == "" or info.isalnum()):
        return None
    body = rest.rstrip()
    if body.endswith(_FENCE):
        body = body[: -len(_FENCE)]
    body = body.strip()
    if _FENCE in body or not body.startswith("{"):
        return None
    return body


def _schema_problem(exc: ValidationError, names: frozenset[str]) -> FinalReviewRejected:
    """The first schema error, named in our own field names and indexes only."""
    first = exc.errors()[0]
    loc = list(first["loc"])
    unknown = first["type"] == "extra_forbidden" and bool(loc)
    name = loc.pop() if unknown else None
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts.append(str(part))
        elif part in names:
            parts.append(part)
        else:
            break  # a union's tag or anything else that is not a name of ours
    where = ".".join(parts) or "the top level"
    if unknown:
        field = f'the unknown field "{name}"' if name in names else "an unknown field"
        return FinalReviewRejected(
            f"The final review has {field} at {where}.",
            f"Your final review has {field} at {where}." + _AGAIN,
            "unknown_field",
        )
    return FinalReviewRejected(
        f"The final review does not match its schema at {where}.",
        f"Your final review does not match the schema at {where}." + _AGAIN,
        "schema",
    )


def _check_locations(
    review: FinalReview, repository: PinnedRepository, unreadable: type[ReviewError]
) -> FinalReview:
    """Each path names a regular file at the head commit; each line lies inside it."""
    files = []
    for index, finding in enumerate(review.findings, start=1):
        try:
            with map_git_errors(unreadable):  # the one git error edge (tools/execute.py)
                files.append(repository.resolve_file(finding.path))
        except ToolError:
            raise FinalReviewRejected(
                f"Finding {index} does not name a regular file at the head commit.",
                f"Finding {index}'s path does not name a regular file at the head commit; use "
                "the repository-relative path of an existing file." + _AGAIN,
                "path",
            ) from None
    numbered = enumerate(zip(review.findings, files, strict=True), start=1)
    with_lines = [(i, f, file) for i, (f, file) in numbered if f.line]
    with map_git_errors(unreadable):
        counts = repository.line_counts([file for _, _, file in with_lines])
    for index, finding, file in with_lines:
        if file.entry is None or finding.line is None:
            continue
        total = counts[file.entry.oid]
        if finding.line > total:
            raise FinalReviewRejected(
                f"Finding {index} names a line past the end of its file.",
                f"Finding {index}'s line is past the end of its file, which has {total} lines."
                + _AGAIN,
                "line",
            )
    # One file, one spelling: `./a.py`, `d//x.py` or a link become the file's own path.
    findings = [
        finding if finding.path == file.path else finding.model_copy(update={"path": file.path})
        for finding, file in zip(review.findings, files, strict=True)
    ]
    return review.model_copy(update={"findings": findings})


def review_schema_json(*, suggestions: bool = False, walkthrough: bool = False) -> str:
    """The final-review JSON schema as `pr-review schema review` prints it (with REVIEW_WALKTHROUGH,
    its `walkthrough`; `linked_issues` depends on each change's description)."""
    understanding = Understanding(walkthrough=()) if walkthrough else NO_UNDERSTANDING
    schema = final_review_schema(suggestions=suggestions, understanding=understanding)
    return json.dumps(schema, indent=2)
