"""run_review(): the one function the HTTP API and the CLI share.

A review is: pin the repository (a GitHub pull request or a GitLab merge request fetched into
the cache, or two revisions of a local repository), then run the tool-calling loop until a stop
turn passes final validation or a termination reason ends it. The whole review, checkout
included, runs under one deadline. Blocking git work runs in worker threads, never on the event
loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar

from pr_review_api.errors import (
    GitHubUnavailable,
    InvalidRequest,
    ReviewError,
    ReviewTimeout,
    ServerBusy,
)
from pr_review_api.git.store import RepositoryStore
from pr_review_api.github.checks import CheckOutcome
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.conversation import (
    PermissionCache,
    Repository,
    dismissed_on_pull_request,
    downvoted,
)
from pr_review_api.github.ledger import DismissedFindings, PublishLedger
from pr_review_api.github.placement import fingerprint_of, line_texts
from pr_review_api.github.preflight import ensure_can_publish
from pr_review_api.github.publish import publish_result
from pr_review_api.github.resolve import resolve_fixed
from pr_review_api.github.urls import PullRequestRef
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.urls import is_merge_request_url
from pr_review_api.llm.client import ModelClient
from pr_review_api.llm.openai_chat import ProviderClient
from pr_review_api.loop import merge_request_post
from pr_review_api.loop.background_index import one_shot_store
from pr_review_api.loop.batches import batched_review
from pr_review_api.loop.engine import Engine, StageHook, Tally
from pr_review_api.loop.gate import Gate, already_posted, gated, open_gate, skip_review
from pr_review_api.loop.merge_request_post import is_merge_request
from pr_review_api.loop.repo_config import apply_repo_config
from pr_review_api.loop.review import final_review, same_tree
from pr_review_api.loop.workspace import (
    LocalTarget,
    Prepared,
    PullRequestTarget,
    ReviewTarget,
    prepare,
    published_before,
    with_re_review,
    with_repo_config,
)
from pr_review_api.model import (
    FinalReview,
    PullRequestInfo,
    ReviewResult,
    Revisions,
    Usage,
    estimated_cost,
)
from pr_review_api.settings import Settings

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics

# The targets live in loop/workspace.py; callers import them from here, beside run_review.
__all__ = [
    "LocalTarget",
    "Progress",
    "ProgressCallback",
    "PullRequestTarget",
    "ReviewTarget",
    "run_review",
]

NO_CHANGES_SUMMARY = (
    "The head commit has the same tree as the merge base: there are no changes to review."
)

_Client = TypeVar("_Client")
_Outcome = TypeVar("_Outcome", ReviewResult, BaseException)


@dataclass(frozen=True)
class Progress:
    """What a review has done so far, for live progress output."""

    stage: str  # "preparing", "waiting_for_model", "running_tools", "validating", "verifying"
    round: int
    tool_calls: int
    usage: Usage


ProgressCallback = Callable[[Progress], None]


async def run_review(  # noqa: PLR0913  (the one review function: each shell passes what it shares, and each early answer of CONTRACT 15 and 16 is one branch)
    target: ReviewTarget,
    settings: Settings,
    *,
    include_trace: bool = False,
    progress: ProgressCallback | None = None,
    model: ModelClient | None = None,
    post: bool = False,
    github: GitHubClient | None = None,
    store: RepositoryStore | None = None,
    ledger: PublishLedger | None = None,
    metrics: Metrics | None = None,
    automatic: bool = False,
    on_check: Callable[[CheckOutcome], None] | None = None,
    force: bool = False,
    dismissals: DismissedFindings | None = None,
    gitlab: GitLabClient | None = None,
    permissions: PermissionCache | None = None,
) -> ReviewResult:
    """Prepare the repository, run the validated tool-calling loop, return the review.

    `post` publishes the validated review on the pull request (CONTRACT 10) and sets the
    result's `publication`; `github` is the GitHub client of the review's identity (the
    process's shared one, or a job's bound to its App installation; else one is made with
    `GITHUB_TOKEN`): every read, fetch, check and publication goes through it.
    With a `ledger` (the service's record of what it published), a head already published
    answers its earlier review document, `already_published`, before the model is asked.
    `automatic` (a webhook job, `review --automatic`) honours the base's skip rules; a
    published review sets the `pr-review` check (loop/gate.py, CONTRACT 16); `on_check` is
    told the check's outcome (the CLI's --check-file), set or not. `force` (the `review`
    command in a comment, CONTRACT 15) reviews and publishes a head already published; the
    findings already posted are still not repeated. A `post` that cannot publish (no token, a
    token GitHub refuses) fails before the model is asked (github/preflight.py). With
    `dismissals` (the service's), a finding the repository dismissed is not published;
    `permissions` (the holder's) keeps GitHub's answers of who may dismiss, else the review
    keeps its own. A GitLab merge request's URL is reviewed through `gitlab` (the process's
    shared client; else one is made with `GITLAB_TOKEN`, for a merge request only), and
    published there by loop/merge_request_post.py (its preflight before the model, its note
    and discussions after).

    Raises a `ReviewError` subclass for every failure the contract names, carrying what the
    review had spent (`ReviewError.run`: rounds, usage, trace) for internal callers. A shared
    `model` client may be passed in (the HTTP service keeps one; tests pass a `ScriptedModel`);
    otherwise an OpenAI-compatible `ProviderClient` is made from the settings. Without a
    shared `store`, the review makes its own (`background_index.one_shot_store`). `metrics`
    (the process's `Metrics`) counts how the review ended, its tool calls and its provider use.
    """
    settings.require_provider_key()
    if post:
        _check_publishable(target)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.review_timeout_seconds
    # The store's work stops at the deadline (loop.time() is time.monotonic()) or on cancel.
    cancel = threading.Event()
    tally = Tally()  # every conversation of this review spends from it
    on_stage = _stage_hook(progress, tally)
    started = loop.time()
    try:
        async with (
            asyncio.timeout_at(deadline),
            _shared_or_own(model, lambda: ProviderClient(settings, metrics=metrics)) as client,
            _shared_or_own(github, lambda: GitHubClient(settings)) as github_client,
            _gitlab_client(target, gitlab, settings) as gitlab_client,
            _shared_or_own(store, lambda: one_shot_store(settings)) as repo_store,
        ):
            if on_stage is not None:
                on_stage("preparing", 0)
            work = repo_store.work(deadline, cancel)
            async with prepare(
                target, settings, github_client, repo_store, work, gitlab_client
            ) as pinned:
                prepared = await repo_store.run(with_repo_config, pinned)
                gate = open_gate(
                    prepared,
                    settings,
                    github_client,
                    post=post and not is_merge_request(prepared),  # check runs are GitHub's
                    on_outcome=on_check,
                )
                if automatic and (skipped := await skip_review(prepared, settings, gate)):
                    return _counted(metrics, skipped, loop.time() - started)
                if post:
                    prepared, done = await _before_model(
                        prepared,
                        settings,
                        (github_client, gitlab_client),
                        gate,
                        ledger=ledger,
                        force=force,
                        dismissals=dismissals,
                    )
                    if done is not None:
                        return _counted(metrics, done, loop.time() - started)
                engine = Engine(
                    client,
                    prepared,
                    settings,
                    deadline,
                    store=repo_store,
                    tally=tally,
                    on_stage=on_stage,
                    metrics=metrics,
                )
                result = await gated(
                    gate, deadline, functools.partial(_review, engine, include_trace)
                )
                if post:
                    await _publish(
                        result,
                        prepared,
                        (github_client, gitlab_client),
                        gate,
                        deadline=deadline,
                        ledger=ledger,
                        metrics=metrics,
                        force=force,
                        dismissals=dismissals,
                        permissions=permissions or PermissionCache(),
                    )
                await gate.finished(result)
                return _counted(metrics, result, loop.time() - started)
    except TimeoutError:
        timeout = ReviewTimeout()
        timeout.run = tally.record()
        raise _counted(metrics, timeout, loop.time() - started) from None
    except ReviewError as error:
        error.run = tally.record()
        _counted(metrics, error, loop.time() - started)
        raise
    except BaseException as exc:
        _counted(metrics, exc, loop.time() - started)
        raise
    finally:
        cancel.set()


async def _before_model(
    prepared: Prepared,
    settings: Settings,
    clients: tuple[GitHubClient, GitLabClient | None],
    gate: Gate,
    *,
    ledger: PublishLedger | None,
    force: bool,
    dismissals: DismissedFindings | None,
) -> tuple[Prepared, ReviewResult | None]:
    """What `post` does before the model is asked: (prepared, None) to go on, or (prepared,
    the early answer: a head already published). A merge request's is
    loop/merge_request_post.py's."""
    github, gitlab = clients
    if is_merge_request(prepared):
        assert gitlab is not None
        return await merge_request_post.before_model(
            prepared,
            settings,
            gitlab,
            github,
            gate,
            ledger=ledger,
            force=force,
            dismissals=dismissals,
        )
    done = await _before_publishing(prepared, settings, github, ledger, gate, force)
    if done is not None:
        return prepared, done
    prepared, posted = await with_re_review(prepared, github)
    if posted is not None and not force:
        return prepared, await already_posted(prepared, settings, github, posted, gate)
    if dismissals is not None:
        prepared = await _with_dismissed_titles(prepared, dismissals)
    return prepared, None


async def _publish(  # noqa: PLR0913  (as _before_model)
    result: ReviewResult,
    prepared: Prepared,
    clients: tuple[GitHubClient, GitLabClient | None],
    gate: Gate,
    *,
    deadline: float,
    ledger: PublishLedger | None,
    metrics: Metrics | None,
    force: bool,
    dismissals: DismissedFindings | None,
    permissions: PermissionCache,
) -> None:
    """Publish the review (CONTRACT 10, 17): `result.publication` says what happened."""
    github, gitlab = clients
    if is_merge_request(prepared):
        assert gitlab is not None
        result.publication = await merge_request_post.after_review(
            result,
            prepared,
            gitlab,
            deadline=deadline,
            ledger=ledger,
            metrics=metrics,
            force=force,
            dismissals=dismissals,
        )
        return
    dismissed = await _dismissed(
        prepared, dismissals, github, permissions, result_findings=bool(result.review.findings)
    )
    gate.dismissed = dismissed
    result.publication = await publish_result(
        result,
        github,
        prepared.repository.git_dir,
        deadline=deadline,
        ledger=ledger,
        metrics=metrics,
        force=force,
        dismissed=dismissed,
    )
    await _resolve_fixed(result, prepared, github)


async def _before_publishing(
    prepared: Prepared,
    settings: Settings,
    github: GitHubClient,
    ledger: PublishLedger | None,
    gate: Gate,
    force: bool,
) -> ReviewResult | None:
    """Before the model is asked: a review that cannot be published fails (no token, a token
    GitHub refuses); a head the ledger says is published answers `already_published`."""
    if prepared.pull_request is not None:
        await ensure_can_publish(github, _ref_of(prepared.pull_request))
    if ledger is None or force:
        return None
    earlier = await published_before(prepared, ledger, github)
    if earlier is None:
        return None
    # No model asked; the check is completed from what was posted.
    return await already_posted(prepared, settings, github, earlier, gate)


async def _resolve_fixed(result: ReviewResult, prepared: Prepared, github: GitHubClient) -> None:
    """On a published new head, resolve the threads of ours it fixed (github/resolve.py)."""
    publication, info = result.publication, prepared.pull_request
    if publication is None or publication.status != "published" or info is None:
        return
    if prepared.context.last_reviewed_head is None:
        return  # a first review (or one after a rewritten history): no thread of ours to fix
    git_dir, head = prepared.repository.git_dir, result.revisions.head_sha
    findings = result.review.findings
    texts = await asyncio.to_thread(line_texts, git_dir, head, findings)
    reported = {fingerprint_of(f, texts) for f in findings}
    repository = Repository(info.owner, info.repo)
    publication.resolved = await resolve_fixed(
        github, repository, info.number, git_dir, head, reported, findings
    )


async def _with_dismissed_titles(prepared: Prepared, dismissals: DismissedFindings) -> Prepared:
    """The first message names the findings the team dismissed in the changed files."""
    info = prepared.pull_request
    if info is None:
        return prepared
    paths = [path for _, path in prepared.context.changed_files]
    try:
        titles = await dismissals.titles(f"{info.owner}/{info.repo}", paths)
    except ServerBusy:
        return prepared
    context = replace(prepared.context, dismissed_titles=tuple(titles))
    return replace(prepared, context=context)


async def _dismissed(
    prepared: Prepared,
    dismissals: DismissedFindings | None,
    github: GitHubClient,
    permissions: PermissionCache,
    *,
    result_findings: bool,
) -> set[str]:
    """The repository's dismissed fingerprints, after storing the `-1` reactions of writers on
    our findings' comments of this pull request (CONTRACT 15)."""
    info = prepared.pull_request
    if info is None:
        return set()
    if dismissals is None:  # the CLI, the Action: what the pull request itself says
        if prepared.context.last_reviewed_head is None or not result_findings:
            return set()  # no earlier review of ours to dismiss, or nothing to suppress
        try:
            return await dismissed_on_pull_request(
                github, Repository(info.owner, info.repo), info.number, permissions
            )
        except GitHubUnavailable:
            return set()
    repository = f"{info.owner}/{info.repo}"
    try:
        found = await downvoted(github, Repository(info.owner, info.repo), info.number, permissions)
    except GitHubUnavailable:
        found = []  # read again at the next review
    try:
        for comment, user in found:
            fingerprint = comment.finding_fingerprint()
            assert fingerprint is not None
            title = comment.finding_title()
            await dismissals.dismiss(repository, fingerprint, title, comment.path, user)
        return await dismissals.fingerprints(repository)
    except ServerBusy:  # the review is paid for: publish it, dismissals or not
        return set()


def _ref_of(info: PullRequestInfo) -> PullRequestRef:
    return PullRequestRef(owner=info.owner, repo=info.repo, number=info.number, url=info.url)


def _counted(metrics: Metrics | None, outcome: _Outcome, seconds: float) -> _Outcome:
    """`outcome` (a result to return, or an error to raise), counted as the review's end."""
    if metrics is not None:
        metrics.review_ended(outcome, seconds)
    return outcome


def _check_publishable(target: ReviewTarget) -> None:
    """What `post` can publish on, checked before anything is fetched or the model is asked:
    a pull request or a merge request (loop/merge_request_post.py), never a local repository."""
    if isinstance(target, LocalTarget):
        raise InvalidRequest("Publishing needs a pull request URL, not a local repository.")


def _gitlab_client(
    target: ReviewTarget, shared: GitLabClient | None, settings: Settings
) -> AbstractAsyncContextManager[GitLabClient | None]:
    """The shared GitLab client, else one of the review's own for a merge request only."""
    if (
        shared is None
        and isinstance(target, PullRequestTarget)
        and is_merge_request_url(target.url)
    ):
        return GitLabClient(settings)
    return contextlib.nullcontext(shared)


def _shared_or_own(
    shared: _Client | None, own: Callable[[], AbstractAsyncContextManager[_Client]]
) -> AbstractAsyncContextManager[_Client]:
    """The caller's shared client as it is (never closed here), or a new one closed at the end."""
    return contextlib.nullcontext(shared) if shared is not None else own()


def _stage_hook(progress: ProgressCallback | None, tally: Tally) -> StageHook | None:
    """The engine's stage reports as `Progress`, with the review's counts so far."""
    if progress is None:
        return None

    def report(stage: str, round_: int) -> None:
        progress(Progress(stage, round_, tally.tool_calls, tally.usage))

    return report


async def _review(engine: Engine, include_trace: bool) -> ReviewResult:
    """The final review, or no_changes when the merge base and the head have the same tree."""
    prepared = engine.prepared
    if await engine.store.run(same_tree, prepared):
        review = FinalReview(summary=NO_CHANGES_SUMMARY, findings=[], notes=[])
        review = apply_repo_config(review, prepared.repo_config)  # no findings to match
        result = _result(engine, review, include_trace)
        return result.model_copy(update={"termination_reason": "no_changes"})
    batched = await batched_review(engine)  # None when the change fits one loop
    return _result(engine, await final_review(engine, batched), include_trace)


def _result(engine: Engine, review: FinalReview, include_trace: bool) -> ReviewResult:
    prepared, tally, settings = engine.prepared, engine.tally, engine.settings
    revisions = prepared.repository.revisions
    return ReviewResult(
        pull_request=prepared.pull_request,
        revisions=Revisions(
            base_sha=revisions.base_sha,
            head_sha=revisions.head_sha,
            merge_base_sha=revisions.merge_base_sha,
        ),
        model=settings.opencode_model,
        review=review,
        usage=tally.usage,
        rounds=tally.rounds,
        tool_calls=tally.tool_calls,
        coverage=engine.coverage.coverage(),
        trace=tally.trace if include_trace else None,
        cost=estimated_cost(
            tally.usage,
            settings.review_price_input_per_mtok,
            settings.review_price_output_per_mtok,
        ),
    )
