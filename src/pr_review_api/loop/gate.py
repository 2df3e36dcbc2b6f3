"""A published review's merge gate (specification §16): which check to set, and when.

`open_gate` gives a `Gate` for a review: a real one when the review is published
(`--post`, the Action, a job), of a pull request, with `PR_REVIEW_CHECK_RUNS` on; otherwise one
that does nothing. `run_review` calls it at four points: `skipped` (an automatic review a skip
rule of the base stopped: a completed `neutral` check, nothing else; `action_required` when the
rule reads the title or labels and `fail_on` is set), `started` (the check `in_progress` before
the model is asked), `finished` (the review: `failure` or `success` by `fail_on`; also a head
already published, from what was posted) and `ended` (no final review: `neutral`, or with
`fail_on` set `failure`, `timed_out` for the deadline: the gate fails closed). The forge's
reporter (forge/gate.py) does the requests; a Gate never raises for them.

`fail_on` is the base commit's, made stricter (never laxer) by `PR_REVIEW_FAIL_ON` (the
Action's `fail-on` input): the workflow file may come from the pull request's own head.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Literal

from pr_review_api.errors import ReviewError, ReviewTimeout
from pr_review_api.forge.base import ChangeForge, PostedHead
from pr_review_api.forge.gate import Gate, OnOutcome, gate_of
from pr_review_api.loop.custom_checks import check_modes
from pr_review_api.loop.policy import AUTHOR_CONTROLLED_RULES, skip_rule
from pr_review_api.loop.workspace import Prepared
from pr_review_api.model import FinalReview, Publication, ReviewResult, Revisions, Usage
from pr_review_api.output.custom_checks import posted_results
from pr_review_api.output.inert_markdown import escape_inline
from pr_review_api.settings import Settings

GATE_MARGIN_SECONDS = 1.0
ALREADY_PUBLISHED_SUMMARY = (
    "This head was reviewed and the review published before; no model was asked again."
)
SKIPPED_SUMMARY = "The review was skipped by the repository's rules (.pr-review.toml): {rule}."


def open_gate(
    prepared: Prepared,
    settings: Settings,
    forge: ChangeForge | None,
    *,
    on_outcome: OnOutcome | None = None,
) -> Gate:
    """The review's gate; `forge` None when the review is not published (no check to set)."""
    fail_on = prepared.repo_config.config.fail_on
    info = prepared.pull_request
    git_dir = prepared.repository.git_dir
    reporter = None
    if forge is not None and info is not None and settings.pr_review_check_runs:
        reporter = forge.check_reporter(info, prepared.repository.revisions.head_sha)
    gate = gate_of(reporter, fail_on, settings.pr_review_fail_on, git_dir, on_outcome)
    gate.check_modes = check_modes(prepared.context.checks)  # specification §20: the base's modes
    return gate


async def gated(
    gate: Gate, deadline: float, review: Callable[[], Awaitable[ReviewResult]]
) -> ReviewResult:
    """Run the review between the check's start and, when it ends without a final review, its
    end (`neutral`, or failing closed with `fail_on` set). With a check to complete, the review
    stops `GATE_MARGIN_SECONDS` before the deadline, so that a timed-out review's check is
    completed too."""
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
    await gate.skipped(rule, author_controlled=rule in AUTHOR_CONTROLLED_RULES)
    notes = [prepared.repo_config.note] if prepared.repo_config.note else []
    return _empty_result(prepared, settings, "skipped", SKIPPED_SUMMARY.format(rule=rule), notes)


async def already_posted(
    prepared: Prepared,
    settings: Settings,
    forge: ChangeForge,
    posted: PostedHead,
    gate: Gate,
) -> ReviewResult:
    """A head our markers say is published: no provider request (specification §15); the check is
    completed again from the counts by severity that our posted review's body states."""
    result = _empty_result(prepared, settings, "already_published", ALREADY_PUBLISHED_SUMMARY, [])
    result.publication = Publication(
        status="already_published", review_id=posted.review_id, url=posted.url
    )
    if gate.reporter is not None or gate.on_outcome is not None:
        info = prepared.pull_request
        counts = None if info is None else await forge.posted_counts(info, posted.review_id)
        if gate.check_modes and info is not None:  # specification §20: the checks it published
            body = await forge.posted_body(info, posted.review_id)
            checks = posted_results(body, gate.check_modes, escape_inline)
            result.review = result.review.model_copy(update={"checks": checks})
        await gate.finished(result, counts)
    return result


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
