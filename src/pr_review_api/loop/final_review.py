"""The final review: its JSON schema and the stop-turn checks (the model is in `model.py`).

A stop turn becomes a review only when its content is a JSON object that matches the schema
exactly (no extra fields, no coercion), stays within the count and size limits, and every
finding names an existing regular file at the head commit with a line inside that file.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from pr_review_api.errors import InvalidModelResponse, InvalidRepository, ReviewError, ToolError
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.jsonutil import StrictJSONError, loads_strict
from pr_review_api.model import SEVERITIES, FinalReview, Finding
from pr_review_api.settings import MAX_FINAL_TEXT_BYTES, MAX_FINDINGS, MAX_NOTES
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


def parse_final_review(
    content: object,
    repository: PinnedRepository,
    *,
    unreadable: type[ReviewError] = InvalidRepository,
) -> FinalReview:
    """Apply every stop-turn check to a stop turn's content."""
    if not isinstance(content, str) or not content.strip():
        raise InvalidModelResponse("The final review was empty.")
    try:
        document = loads_strict(content)
    except StrictJSONError:
        raise InvalidModelResponse("The final review was not valid JSON.") from None
    try:
        review = FinalReview.model_validate(document)
    except ValidationError as exc:
        raise InvalidModelResponse(_describe(exc)) from None
    _check_locations(review.findings, repository, unreadable)
    return review


def _describe(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "document"
    return f"The final review does not match its schema at {where}."


def _check_locations(
    findings: list[Finding], repository: PinnedRepository, unreadable: type[ReviewError]
) -> None:
    """Each path names a regular file at the head commit; each line lies inside it."""
    files = []
    for index, finding in enumerate(findings, start=1):
        try:
            with map_git_errors(unreadable):
                files.append(repository.resolve_file(finding.path))
        except ToolError:
            raise InvalidModelResponse(
                f"Finding {index} does not name a regular file at the head commit."
            ) from None
    numbered = enumerate(zip(findings, files, strict=True), start=1)
    with_lines = [(i, f, file) for i, (f, file) in numbered if f.line]
    with map_git_errors(unreadable):
        counts = repository.line_counts([file for _, _, file in with_lines])
    for index, finding, file in with_lines:
        if file.entry is None or finding.line is None:
            continue
        if finding.line > counts[file.entry.oid]:
            raise InvalidModelResponse(f"Finding {index} names a line past the end of its file.")


def review_schema_json() -> str:
    """The final-review JSON schema as `pr-review schema review` prints it."""
    return json.dumps(FINAL_REVIEW_SCHEMA, indent=2)
