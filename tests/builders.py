"""The review documents tests build: one finding, a final review, the provider's final turn.

Every field has a default, and a test names only the fields its assertions read (a test about
a finding's line passes `line=`; one about titles passes `title=`). A file whose findings share
other values (a path, a severity) binds them once with `functools.partial`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pr_review_api.model import Finding
from tests.fakes.provider_server import stop_turn

# Short texts for a finding's prose, where no assertion reads it: `finding(**BRIEF, ...)`.
BRIEF: dict[str, Any] = {"explanation": "Explained.", "evidence": "e", "recommendation": "r"}
# One letter for each, where no assertion reads the title either.
TERSE: dict[str, Any] = {"title": "t", "explanation": "e", "evidence": "v", "recommendation": "r"}


def finding(
    severity: object = "high",
    *,
    title: object = "Validation occurs after the write",
    explanation: object = "Invalid state can be saved.",
    path: object = "src/widgets/service.py",
    line: object = 42,
    evidence: object = "save() runs before validate_name().",
    recommendation: object = "Validate before saving.",
    **extra: Any,
) -> dict[str, Any]:
    """One finding as the model writes it in a final review (JSON-ready); `extra` adds fields
    such as `suggestion`. Any value goes, so a test can build the ones a check must refuse."""
    return {
        "severity": severity,
        "title": title,
        "explanation": explanation,
        "path": path,
        "line": line,
        "evidence": evidence,
        "recommendation": recommendation,
        **extra,
    }


def finding_model(severity: object = "high", **fields: Any) -> Finding:
    """The same finding, validated into the model the publishers and formats take."""
    return Finding.model_validate(finding(severity, **fields))


def suggestion(start: int, end: int, replacement: str) -> dict[str, Any]:
    """A finding's suggested change: lines `start`-`end` of the head become `replacement`."""
    return {"start_line": start, "end_line": end, "replacement": replacement}


def final_review(
    *findings: dict[str, Any],
    summary: object = "S",
    notes: Sequence[object] = (),
    **extra: Any,
) -> dict[str, Any]:
    """A final review document; `extra` adds fields such as `checks` or `walkthrough`."""
    return {"summary": summary, "findings": list(findings), "notes": list(notes), **extra}


def final_turn(
    *findings: dict[str, Any],
    summary: object = "S",
    notes: Sequence[object] = (),
    **extra: Any,
) -> dict[str, Any]:
    """The scripted provider's last turn: a `stop` whose content is that final review."""
    return stop_turn(final_review(*findings, summary=summary, notes=notes, **extra))
