"""ReviewResult objects for tests of the shells (formats, API, CLI), hostile ones included."""

from __future__ import annotations

from typing import Any

from pr_review_api.model import (
    Coverage,
    FinalReview,
    Finding,
    PullRequestInfo,
    ReviewResult,
    Revisions,
    TraceToolCall,
    TraceTurn,
    Usage,
)
from tests.builders import finding_model

PR_URL = "https://github.com/acme/widget/pull/7"
BASE_SHA = "1" * 40
HEAD_SHA = "2" * 40
MERGE_BASE_SHA = "3" * 40

# A final review document of src/service.py, as a scripted provider sends it (API and CLI tests).
SERVICE_REVIEW: dict[str, Any] = {
    "summary": "Validation occurs after persistence.",
    "findings": [
        {
            "severity": "high",
            "title": "Validation occurs after the write",
            "explanation": "Invalid state can be saved.",
            "path": "src/service.py",
            "line": 2,
            "evidence": "save() runs before validate().",
            "recommendation": "Validate before saving.",
        }
    ],
    "notes": ["Read the service."],
}

# What the model saw of a three-file change: it read the service and one test.
SERVICE_COVERAGE = Coverage(
    changed_files=3, inspected_files=2, not_inspected=["src/widgets/models.py"]
)

# Model text that tries to break out of every output format it can land in.
HOSTILE = (
    "| a | b |\n|---|---|\n# Heading\n    indented code\n```\nfence\n```\n"
    "<img src=x onerror=alert(1)> <details><summary>x</summary> [link](javascript:alert(1))\n"
    "**bold** _em_ ~~strike~~ `tick` \\ & &amp; &#64; @octocat 1. item\n- item\n> quote\n"
    "===\n---\n+ plus\n1) paren\n\x1b[31mred\x1b[0m \u202egnp.exe\u202c \r\nCRLF\x00NUL\x07bell"
)


def trace_turns() -> list[TraceTurn]:
    """A two-round trace: one tool call, then the final review."""
    call = TraceToolCall(
        id="call_read_service",
        name="read_repository_file",
        arguments={"path": "src/widgets/service.py", "start_line": 1, "end_line": 180},
        ok=True,
        result_preview="1: from __future__ import annotations",
        result_bytes=6240,
        truncated=False,
        duration_ms=3,
    )
    usage = Usage(prompt_tokens=4200, completion_tokens=180, total_tokens=4380)
    return [
        TraceTurn(
            round=1,
            provider_request_id="chatcmpl_round_1",
            provider_model="deepseek-v4-flash",
            finish_reason="tool_calls",
            protocol_action="execute_tools",
            usage=usage,
            tool_calls=[call],
        ),
        TraceTurn(
            round=2,
            provider_request_id="chatcmpl_round_2",
            provider_model="deepseek-v4-flash",
            finish_reason="stop",
            protocol_action="final_review",
            usage=usage,
            tool_calls=[],
        ),
    ]


def review_result(
    findings: list[Finding] | None = None,
    *,
    summary: str = "Validation occurs after persistence.",
    notes: list[str] | None = None,
    pull_request: bool = True,
    trace: bool = False,
    coverage: Coverage | None = None,
) -> ReviewResult:
    """A successful review of acme/widget#7 (or of a local repository)."""
    info = PullRequestInfo(url=PR_URL, owner="acme", repo="widget", number=7)
    return ReviewResult(
        pull_request=info if pull_request else None,
        revisions=Revisions(base_sha=BASE_SHA, head_sha=HEAD_SHA, merge_base_sha=MERGE_BASE_SHA),
        model="deepseek-v4-flash",
        review=FinalReview(
            summary=summary,
            findings=[finding_model()] if findings is None else findings,
            notes=["Inspected the service and its call sites."] if notes is None else notes,
        ),
        usage=Usage(prompt_tokens=8400, completion_tokens=360, total_tokens=8760),
        rounds=2,
        tool_calls=1,
        coverage=SERVICE_COVERAGE if coverage is None else coverage,
        trace=trace_turns() if trace else None,
    )


def every_severity() -> list[Finding]:
    """One finding of each severity, least severe first (renderers must reorder them)."""
    return [
        finding_model("info", title="Info finding", path="docs/a.md", line=None),
        finding_model("low", title="Low finding", path="src/low.py", line=3),
        finding_model("medium", title="Medium finding", path="src/medium.py", line=5),
        finding_model("high", title="High finding", path="src/high.py", line=8),
        finding_model("critical", title="Critical finding", path="src/critical.py", line=13),
    ]


def as_json(result: ReviewResult) -> dict[str, Any]:
    """The success document as the API returns it."""
    return result.model_dump(mode="json")
