"""A published review's merge gate (CONTRACT 16): which check to set, and when.

`open_gate` gives a `Gate` for a review: a real one when the review is published
(`--post`, the Action, a job), of a pull request, with `PR_REVIEW_CHECK_RUNS` on; otherwise one
that does nothing. `run_review` calls it at four points: `skipped` (an automatic review a skip
rule of the base stopped: a completed `neutral` check, nothing else), `started` (the check
`in_progress` before the model is asked), `finished` (the review: `failure` or `success` by
`fail_on`; also a head already published, from what was posted) and `ended` (no final review:
`neutral`). The forge's reporter (github/checks.py) does the requests; a Gate never raises
for them.

`fail_on` is the base commit's, made stricter (never laxer) by `PR_REVIEW_FAIL_ON` (the
Action's `fail-on` input): the workflow file may come from the pull request's own head.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from pr_review_api.errors import GitHubUnavailable, ReviewError, ReviewTimeout
from pr_review_api.github.checks import (
    CheckOutcome,
    CheckReporter,
    FailOn,
    GateFinding,
    ended_outcome,
    review_outcome,
    severity_counts,
    skipped_outcome,
    stricter,
    unknown_outcome,
)
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.history import PostWire
from pr_review_api.github.placement import fingerprint_of, line_texts
from pr_review_api.loop.policy import skip_rule
from pr_review_api.loop.workspace import PostedHead, Prepared
from pr_review_api.model import (
    FinalReview,
    Finding,
    Publication,
    ReviewResult,
    Revisions,
    Severity,
    Usage,
)
from pr_review_api.settings import Settings

GATE_MARGIN_SECONDS = 1.0
ALREADY_PUBLISHED_SUMMARY = (
    "This head was reviewed and the review published before; no model was asked again."
)
SKIPPED_SUMMARY = "The review was skipped by the repository's rules (.pr-review.toml): {rule}."


@dataclass
class Gate:
    """The check of one review; `reporter` None: nothing to set."""

    reporter: CheckReporter | None
    fail_on: FailOn
    git_dir: Path | None = None
    # Fingerprints dismissed in this repository (the review conversation): never fail the check.
    dismissed: Collection[str] = frozenset()
    started_already: bool = False
    # Told every outcome the check is completed with (the CLI's --check-file; the Action).
    on_outcome: Callable[[CheckOutcome], None] | None = None

    async def skipped(self, rule: str) -> None:
        await self._complete(skipped_outcome(rule))

    async def started(self) -> None:
        if self.reporter is not None and not self.started_already:
            self.started_already = True
            await self.reporter.start()

    async def ended(self, code: str) -> None:
        await self._complete(ended_outcome(code))

    async def finished(self, result: ReviewResult, counts: Counter[Severity] | None = None) -> None:
        """The review's check; `counts` read back from a review already posted, when its
        findings are not at hand."""
        if self.reporter is None and self.on_outcome is None:
            return
        if result.termination_reason == "already_published" and counts is None:
            await self._complete(unknown_outcome())
            return
        if result.termination_reason not in ("final_review", "no_changes", "already_published"):
            await self.ended(result.termination_reason)
            return
        findings = await asyncio.to_thread(self._gate_findings, result)
        url = result.publication.url if result.publication is not None else None
        outcome = review_outcome(
            findings, self.fail_on, self.dismissed, result.coverage, url, counts
        )
        await self._complete(outcome, url)

    def _gate_findings(self, result: ReviewResult) -> list[GateFinding]:
        found = result.review.findings
        texts = (
            {}
            if self.git_dir is None
            else line_texts(self.git_dir, result.revisions.head_sha, found)
        )
        return [_gate_finding(f, fingerprint_of(f, texts)) for f in found]

    async def _complete(self, outcome: CheckOutcome, url: str | None = None) -> None:
        if self.on_outcome is not None:
            self.on_outcome(outcome)
        if self.reporter is not None:
            await self.reporter.complete(outcome, url)


def _gate_finding(finding: Finding, fingerprint: str) -> GateFinding:
    return GateFinding(
        severity=finding.severity,
        path=finding.path,
        line=finding.line,
        title=finding.title,
        message=finding.explanation,
        fingerprint=fingerprint,
    )


def open_gate(
    prepared: Prepared,
    settings: Settings,
    github: GitHubClient,
    *,
    post: bool,
    on_outcome: Callable[[CheckOutcome], None] | None = None,
) -> Gate:
    fail_on = stricter(prepared.repo_config.config.fail_on, settings.pr_review_fail_on)
    info = prepared.pull_request
    git_dir = prepared.repository.git_dir
    if not post or info is None or not settings.pr_review_check_runs:
        return Gate(None, fail_on, git_dir, on_outcome=on_outcome)
    head = prepared.repository.revisions.head_sha
    reporter = CheckReporter(github, info.owner, info.repo, head)
    return Gate(reporter, fail_on, git_dir, on_outcome=on_outcome)


async def gated(
    gate: Gate, deadline: float, review: Callable[[], Awaitable[ReviewResult]]
) -> ReviewResult:
    """Run the review between the check's start and, when it ends without a final review, its
    `neutral` end. With a check to complete, the review stops `GATE_MARGIN_SECONDS` before the
    deadline, so that a timed-out review's check is completed too."""
    await gate.started()
    try:
        if gate.reporter is None:
            return await review()
        async with asyncio.timeout_at(deadline - GATE_MARGIN_SECONDS):
            return await review()
    except TimeoutError:
        await gate.ended(ReviewTimeout.code)
        raise ReviewTimeout() from None
    except ReviewError as exc:
        await gate.ended(exc.code)
        raise


async def skip_review(prepared: Prepared, settings: Settings, gate: Gate) -> ReviewResult | None:
    """An automatic review that a skip rule of the base stops: the `skipped` document (no
    provider request) after its neutral check; None when no rule applies."""
    if prepared.metadata is None:
        return None
    rule = skip_rule(prepared.metadata, prepared.repo_config.config)
    if rule is None:
        return None
    await gate.skipped(rule)
    notes = [prepared.repo_config.note] if prepared.repo_config.note else []
    return _empty_result(prepared, settings, "skipped", SKIPPED_SUMMARY.format(rule=rule), notes)


async def already_posted(
    prepared: Prepared,
    settings: Settings,
    github: GitHubClient,
    posted: PostedHead,
    gate: Gate,
) -> ReviewResult:
    """A head our markers say is published: no provider request (CONTRACT 15); the check is
    completed again from the counts by severity that our posted review's body states."""
    result = _empty_result(prepared, settings, "already_published", ALREADY_PUBLISHED_SUMMARY, [])
    result.publication = Publication(
        status="already_published", review_id=posted.review_id, url=posted.url
    )
    if gate.reporter is not None or gate.on_outcome is not None:
        body = await _posted_body(prepared, github, posted.review_id)
        counts = None if body is None else severity_counts(body)
        await gate.finished(result, counts)
    return result


async def _posted_body(
    prepared: Prepared, github: GitHubClient, review_id: int | None
) -> str | None:
    info = prepared.pull_request
    if info is None or review_id is None:
        return None
    url = (
        f"{github.settings.github_api_url}/repos/{info.owner}/{info.repo}/pulls/{info.number}"
        f"/reviews/{review_id}"
    )
    try:
        response = await github.request("GET", url)
    except GitHubUnavailable:
        return None
    if response.status != 200:
        return None
    try:
        return PostWire.model_validate_json(response.body).body
    except ValidationError:
        return None


def _empty_result(
    prepared: Prepared,
    settings: Settings,
    reason: Literal["skipped", "already_published"],
    summary: str,
    notes: list[str],
) -> ReviewResult:
    revisions = prepared.repository.revisions
    return ReviewResult(
        termination_reason=reason,
        pull_request=prepared.pull_request,
        revisions=Revisions(
            base_sha=revisions.base_sha,
            head_sha=revisions.head_sha,
            merge_base_sha=revisions.merge_base_sha,
        ),
        model=settings.opencode_model,
        review=FinalReview(summary=summary, findings=[], notes=notes),
        usage=Usage(),
        rounds=0,
        tool_calls=0,
        trace=None,
    )
