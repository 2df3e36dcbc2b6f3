"""The figures an operator reads off one review job: findings by severity, tokens, duration,
the published review's link and, for a failure, its code.

`pr-review jobs` (its table) and the `/ui` pages show the same figures, read here from the
record and its stored document (specification §5). The document is read defensively: a field of
the wrong type counts as absent, never as an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pr_review_api.jobs.records import JobRecord
from pr_review_api.model import SEVERITIES


@dataclass(frozen=True)
class JobFigures:
    """What one job came to; None where the job has not (or could not have) told yet."""

    severities: dict[str, int]  # every severity, in order, zero included
    findings: int | None
    total_tokens: int | None
    duration_seconds: float | None
    published_url: str | None
    publication_status: str | None
    error_code: str | None
    termination_reason: str | None

    @classmethod
    def of(cls, record: JobRecord) -> JobFigures:
        document = record.result if isinstance(record.result, dict) else {}
        findings = _findings(document)
        counts: dict[str, int] = dict.fromkeys(SEVERITIES, 0)
        for finding in findings or []:
            severity = finding.get("severity")
            if severity in counts:
                counts[severity] += 1
        publication = _mapping(document.get("publication"))
        error = _mapping(document.get("error"))
        duration = None
        if record.started_at is not None and record.finished_at is not None:
            duration = max(0.0, (record.finished_at - record.started_at).total_seconds())
        return cls(
            severities=counts,
            findings=None if findings is None else len(findings),
            # An error's document has no usage: the record keeps what its review spent.
            total_tokens=_integer(_mapping(document.get("usage")).get("total_tokens"))
            or record.total_tokens,
            duration_seconds=duration,
            published_url=_text(publication.get("url")),
            publication_status=_text(publication.get("status")),
            error_code=_text(error.get("code")),
            termination_reason=_text(document.get("termination_reason")),
        )

    def severity_text(self) -> str:
        """`2 high, 1 low`, or `none` (no findings), or `-` (no review)."""
        if self.findings is None:
            return "-"
        parts = [f"{count} {name}" for name, count in self.severities.items() if count]
        return ", ".join(parts) or "none"

    def duration_text(self) -> str:
        """`42 s`, `3 min 5 s`, or `-` while the job has not ended."""
        if self.duration_seconds is None:
            return "-"
        seconds = round(self.duration_seconds)
        if seconds < 60:
            return f"{self.duration_seconds:.1f} s" if seconds < 10 else f"{seconds} s"
        return f"{seconds // 60} min {seconds % 60} s"


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _findings(document: dict[str, Any]) -> list[dict[str, Any]] | None:
    review = document.get("review")
    if not isinstance(review, dict) or not isinstance(review.get("findings"), list):
        return None
    return [finding for finding in review["findings"] if isinstance(finding, dict)]


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
