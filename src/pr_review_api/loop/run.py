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
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar, Unpack

from pr_review_api.errors import InvalidRequest, ReviewError, ReviewTimeout, ServerBusy
from pr_review_api.forge.base import ChangeForge, Lent
from pr_review_api.forge.gate import Gate, OnOutcome
from pr_review_api.forge.select import open_forge
from pr_review_api.git.store import RepositoryStore
from pr_review_api.ledger import Learnings, repository_key
from pr_review_api.llm.client import ModelClient
from pr_review_api.llm.openai_chat import ProviderClient
from pr_review_api.loop.background_index import one_shot_store
from pr_review_api.loop.batches import batched_review
from pr_review_api.loop.engine import Engine, StageHook, Tally
from pr_review_api.loop.gate import already_posted, gated, open_gate, skip_review
from pr_review_api.loop.knowledge import bounded_learnings
from pr_review_api.loop.repo_config import apply_repo_config
from pr_review_api.loop.review import final_review, same_tree
from pr_review_api.loop.understand import with_understanding
from pr_review_api.loop.workspace import (
    LocalTarget,
    Prepared,
    PullRequestTarget,
    ReviewTarget,
    prepare,
    with_repo_config,
)
from pr_review_api.model import (
    Cost,
    FinalReview,
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
    store: RepositoryStore | None = None,
    metrics: Metrics | None = None,
    automatic: bool = False,
    on_check: OnOutcome | None = None,
    force: bool = False,
    forge: ChangeForge | None = None,
    **lent: Unpack[Lent],
) -> ReviewResult:
    """Prepare the repository, run the validated tool-calling loop, return the review.

    `post` publishes the validated review on the pull request (CONTRACT 10) and sets the
    result's `publication`. Of what the holder lends (`lent`: forge/base.py's `Lent`, by
    keyword), `clients` are the forge clients of the review's identity (the process's shared
    ones, or a job's bound to its identity; where the change's forge has none, one is made
    with the settings' token): every read, fetch, check and publication goes through it.
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
    keeps its own. Every forge's step goes through the change's `ChangeForge`
    (forge/base.py): `forge` when given, else the one its URL names (forge/select.py) over
    its client.

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
    with _ending(metrics, tally, settings) as ending, _set_at_exit(cancel):
        async with (
            asyncio.timeout_at(deadline),
            _shared_or_own(model, lambda: ProviderClient(settings, metrics=metrics)) as client,
            _forge_of(target, settings, forge, lent) as change_forge,
            _shared_or_own(store, lambda: one_shot_store(settings)) as repo_store,
        ):
            if on_stage is not None:
                on_stage("preparing", 0)
            work = repo_store.work(deadline, cancel)
            async with prepare(target, change_forge, repo_store, work) as pinned:
                prepared = await repo_store.run(with_repo_config, pinned)
                prepared = await _with_learnings(prepared, lent.get("learnings"))
                publisher = change_forge if post else None
                gate = open_gate(prepared, settings, publisher, on_outcome=on_check)
                if automatic and (skipped := await skip_review(prepared, settings, gate)):
                    return ending.of(skipped)
                if publisher is not None:
                    prepared, done = await _before_model(
                        prepared,
                        settings,
                        publisher,
                        gate,
                        lent,
                        force=force,
                    )
                    if done is not None:
                        return ending.of(done)
                # CONTRACT 21: the walkthrough's files, the linked issues read (no model asked).
                prepared = await with_understanding(prepared, change_forge, settings, repo_store)
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
                if publisher is not None:
                    await _publish(
                        result,
                        prepared,
                        publisher,
                        gate,
                        lent,
                        deadline=deadline,
                        metrics=metrics,
                        force=force,
                    )
                await gate.finished(result)
                return ending.of(result)


async def _before_model(
    prepared: Prepared,
    settings: Settings,
    forge: ChangeForge,
    gate: Gate,
    lent: Lent,
    *,
    force: bool,
) -> tuple[Prepared, ReviewResult | None]:
    """What `post` does before the model is asked: (prepared, None) to go on, or (prepared,
    the early answer: a head already published). A review that cannot be published fails
    here (no token, a token the forge refuses); a head the ledger or our markers say is
    published answers `already_published` (no model asked; the check completed from what was
    posted); a re-review names the files changed since our last reviewed head."""
    info = prepared.pull_request
    assert info is not None  # `post` publishes a change, never a local repository
    git_dir, head = prepared.repository.git_dir, prepared.repository.revisions.head_sha
    await forge.ensure_can_publish(info)
    posted = None
    ledger, dismissals = lent.get("ledger"), lent.get("dismissals")
    if ledger is not None and not force:
        posted = await forge.published_in_ledger(info, head, ledger)
    if posted is None:
        prior = await forge.prior_review(info, git_dir, head, force=force)
        if prior.last_head is not None:
            context = replace(
                prepared.context,
                last_reviewed_head=prior.last_head,
                changed_since_last_review=prior.changed,
            )
            prepared = replace(prepared, context=context)
        posted = None if force else prior.posted
    if posted is not None:
        return prepared, await already_posted(prepared, settings, forge, posted, gate)
    if dismissals is not None:
        paths = [path for _, path in prepared.context.changed_files]
        titles = await forge.dismissed_titles(info, paths, dismissals)
        if titles is not None:  # the first message names the findings the team dismissed
            context = replace(prepared.context, dismissed_titles=titles)
            prepared = replace(prepared, context=context)
    return prepared, None


async def _publish(  # noqa: PLR0913  (as _before_model)
    result: ReviewResult,
    prepared: Prepared,
    forge: ChangeForge,
    gate: Gate,
    lent: Lent,
    *,
    deadline: float,
    metrics: Metrics | None,
    force: bool,
) -> None:
    """Publish the review (CONTRACT 10, 17): `result.publication` says what happened. Findings
    the repository dismissed (CONTRACT 15) are not published and never fail the check."""
    info = prepared.pull_request
    assert info is not None
    git_dir = prepared.repository.git_dir
    reviewed_before = prepared.context.last_reviewed_head is not None
    dismissed = await forge.dismissed(
        info,
        lent.get("dismissals"),
        lent.get("permissions"),
        reviewed_before=reviewed_before,
        has_findings=bool(result.review.findings),
    )
    gate.dismissed = dismissed
    result.publication = await forge.publish(
        result,
        git_dir,
        deadline=deadline,
        ledger=lent.get("ledger"),
        metrics=metrics,
        force=force,
        dismissed=dismissed,
    )
    publication = result.publication
    if publication is None or publication.status != "published" or not reviewed_before:
        return  # a first review (or one after a rewritten history): no thread of ours to fix
    resolved = await forge.resolve_fixed(result, info, git_dir)
    if resolved is not None:
        publication.resolved = resolved


async def _with_learnings(prepared: Prepared, learnings: Learnings | None) -> Prepared:
    """The repository's learnings in the first message (CONTRACT 20), newest first and
    bounded; a database that does not answer leaves them out (the review goes on)."""
    info = prepared.pull_request
    if learnings is None or info is None:
        return prepared
    try:
        found = bounded_learnings(await learnings.given(repository_key(info)))
    except ServerBusy:
        return prepared
    if not found:
        return prepared
    return replace(prepared, context=replace(prepared.context, learnings=found))


class _Ending:
    """How a review ended, counted once (CONTRACT 18): the result it returns (`of`), else what
    it raised, with its seconds and, for an error, what it had spent."""

    def __init__(self) -> None:
        self.result: ReviewResult | None = None

    def of(self, result: ReviewResult) -> ReviewResult:
        """`result`, the review's answer, kept to be counted as its end."""
        self.result = result
        return result


@contextlib.contextmanager
def _ending(metrics: Metrics | None, tally: Tally, settings: Settings) -> Iterator[_Ending]:
    """The review's metrics bookkeeping in one place: its end counted once in `metrics`, and
    every `ReviewError` leaving it carrying the tally's `RunRecord` (a timeout becomes the
    contract's `ReviewTimeout`). The clock is the event loop's (`time.monotonic`)."""
    started = time.monotonic()
    ending = _Ending()

    def counted(outcome: _Outcome, spent: Cost | None = None) -> _Outcome:
        if metrics is not None:
            metrics.review_ended(outcome, time.monotonic() - started, spent)
        return outcome

    try:
        yield ending
    except TimeoutError:
        timeout = ReviewTimeout()
        timeout.run = tally.record()
        raise counted(timeout, _spent_cost(tally, settings)) from None
    except ReviewError as error:
        error.run = tally.record()
        counted(error, _spent_cost(tally, settings))
        raise
    except BaseException as exc:
        counted(exc)
        raise
    if ending.result is not None:
        counted(ending.result)


@contextlib.contextmanager
def _set_at_exit(event: threading.Event) -> Iterator[None]:
    """`event` set when the review ends, however it ends: the store's work stops then."""
    try:
        yield
    finally:
        event.set()


def _spent_cost(tally: Tally, settings: Settings) -> Cost | None:
    """The estimated cost of what a review spent before it failed."""
    input_price = settings.review_price_input_per_mtok
    return estimated_cost(tally.usage, input_price, settings.review_price_output_per_mtok)


def _check_publishable(target: ReviewTarget) -> None:
    """What `post` can publish on, checked before anything is fetched or the model is asked:
    a pull request or a merge request, never a local repository."""
    if isinstance(target, LocalTarget):
        raise InvalidRequest("Publishing needs a pull request URL, not a local repository.")


def _forge_of(
    target: ReviewTarget,
    settings: Settings,
    forge: ChangeForge | None,
    lent: Lent,
) -> AbstractAsyncContextManager[ChangeForge | None]:
    """The caller's forge, else the one the change's URL names; None for a local repository."""
    if forge is not None or not isinstance(target, PullRequestTarget):
        return contextlib.nullcontext(forge)
    return open_forge(target.url, settings, clients=lent.get("clients"))


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
