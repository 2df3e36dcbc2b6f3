"""SARIF 2.1.0, as GitHub code scanning accepts it: one run, one rule per severity, one result
per finding. The model's text is carried unchanged (JSON escaping is enough)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from pr_review_api import __version__
from pr_review_api.model import SEVERITIES, Finding, ReviewResult, Severity, Suggestion
from pr_review_api.output import custom_checks
from pr_review_api.output.common import suggestion_heading

TOOL_NAME = "pr-review"
# No `informationUri`: it is optional in SARIF 2.1.0, and the project has no public home page
# to name yet (the package index project it named does not exist).
SARIF_SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SARIF_LEVELS: Mapping[Severity, str] = {
    "critical": "error",
    "high": "error",
    "medium": "warning",
    "low": "note",
    "info": "note",
}
# GitHub code scanning reads `problem.severity` on a rule for alerts that are not security ones.
_PROBLEM_SEVERITY = {"error": "error", "warning": "warning", "note": "recommendation"}


def render_sarif(result: ReviewResult) -> str:
    """SARIF 2.1.0, as GitHub code scanning accepts it."""
    return json.dumps(sarif_document(result), indent=2, ensure_ascii=False)


def sarif_document(result: ReviewResult) -> dict[str, Any]:
    """The SARIF log: one run, one rule per severity, one result per finding."""
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": TOOL_NAME,
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [_sarif_rule(severity) for severity in SEVERITIES],
            }
        },
        "results": [_sarif_result(finding) for finding in result.review.findings],
        "columnKind": "unicodeCodePoints",
        "properties": {
            "summary": result.review.summary,
            "notes": list(result.review.notes),
            "model": result.model,
            "revisions": result.revisions.model_dump(mode="json"),
            "coverage": result.coverage.model_dump(mode="json"),
        },
    }
    if checks := result.review.check_results():  # specification §20: only when a check applied
        run["properties"]["checks"] = custom_checks.sarif_properties(checks)
    # specification §21: only when the review has them, so a review without is as before.
    review = result.review.model_dump(mode="json", include={"walkthrough", "linked_issues"})
    run["properties"].update(review)
    if result.pull_request is not None:
        repository = result.pull_request.url.rsplit("/pull/", 1)[0]
        run["versionControlProvenance"] = [
            {"repositoryUri": repository, "revisionId": result.revisions.head_sha}
        ]
    return {"$schema": SARIF_SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def _rule_id(severity: Severity) -> str:
    return f"{TOOL_NAME}/{severity}"


def _sarif_rule(severity: Severity) -> dict[str, Any]:
    level = SARIF_LEVELS[severity]
    article = "An" if severity == "info" else "A"
    return {
        "id": _rule_id(severity),
        "name": f"{severity.capitalize()}SeverityFinding",
        "shortDescription": {
            "text": f"{article} {severity}-severity finding of a pr-review review."
        },
        "defaultConfiguration": {"level": level},
        "properties": {"tags": ["pr-review"], "problem.severity": _PROBLEM_SEVERITY[level]},
    }


def _sarif_result(finding: Finding) -> dict[str, Any]:
    physical: dict[str, Any] = {
        "artifactLocation": {"uri": sarif_uri(finding.path), "uriBaseId": "%SRCROOT%"}
    }
    if finding.line is not None:
        physical["region"] = {"startLine": finding.line}
    message = (
        f"{finding.title}\n\n{finding.explanation}\n\nEvidence: {finding.evidence}\n\n"
        f"Recommendation: {finding.recommendation}"
    )
    sarif: dict[str, Any] = {
        "ruleId": _rule_id(finding.severity),
        "ruleIndex": SEVERITIES.index(finding.severity),
        "level": SARIF_LEVELS[finding.severity],
        "message": {"text": message},
        "locations": [{"physicalLocation": physical}],
        "partialFingerprints": {"prReviewFinding/v1": _fingerprint(finding)},
        "properties": {"severity": finding.severity, "title": finding.title},
    }
    suggestion = finding.offered()
    if suggestion is not None:
        sarif["fixes"] = [_sarif_fix(finding.path, suggestion)]
    return sarif


def _sarif_fix(path: str, suggestion: Suggestion) -> dict[str, Any]:
    """A kept suggestion as a SARIF fix (specification §14): the whole lines start..end, without the
    last one's line break (a region without columns, SARIF 3.30.5), become the replacement."""
    return {
        "description": {"text": f"Suggested change ({suggestion_heading(suggestion)})."},
        "artifactChanges": [
            {
                "artifactLocation": {"uri": sarif_uri(path), "uriBaseId": "%SRCROOT%"},
                "replacements": [
                    {
                        "deletedRegion": {
                            "startLine": suggestion.start_line,
                            "endLine": suggestion.end_line,
                        },
                        "insertedContent": {"text": suggestion.replacement},
                    }
                ],
            }
        ],
    }


def sarif_uri(path: str) -> str:
    """A repository-relative path as a relative URI reference (RFC 3986 percent-encoding).

    `:` is encoded too, so a first segment such as `c:` can never be read as a URI scheme.
    """
    return quote(path, safe="/-._~!$&'()*+,;=@")


def _fingerprint(finding: Finding) -> str:
    # Path, severity and title, not the line: the alert should survive lines shifting between
    # pushes. The domain model's fingerprint without a line's text (model.Finding.fingerprint).
    return finding.fingerprint()
