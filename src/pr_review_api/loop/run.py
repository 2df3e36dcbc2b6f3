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
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

from pr_review_api.errors import InvalidRequest, ReviewError, ReviewTimeout, ServerBusy
from pr_review_api.forge.base import ChangeForge, DismissalQuery
from pr_review_api.forge.gate import Gate
from pr_review_api.forge.select import open_forge
from pr_review_api.git.store import RepositoryStore
from pr_review_api.ledger import DismissedFindings, Learnings, repository_key
from pr_review_api.llm.client import ModelClient
from pr_review_api.llm.openai_chat import ProviderClient
from pr_review_api.loop.background_index import one_shot_store
from pr_review_api.loop.batches import batched_review
from pr_review_api.loop.engine import Engine, StageHook, Tally
from pr_review_api.loop.gate import already_posted, gated, open_gate, skip_review
from pr_review_api.loop.knowledge import bounded_learnings
from pr_review_api.loop.options import Progress, ProgressCallback, ReviewOptions
from pr_review_api.loop.repo_config import apply_repo_config
from pr_review_api.loop.review import final_review, same_tree
from pr_review_api.loop.understand import with_understanding
from pr_review_api.loop.workspace import (
    ChangeTarget,
    LocalTarget,
    Prepared,
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

# The targets live in loop/workspace.py and the options in loop/options.py; callers import
# them from here, beside run_review.
__all__ = [
    "ChangeTarget",
    "LocalTarget",
    "Progress",
    "ProgressCallback",
    "ReviewOptions",
    "ReviewTarget",
    "run_review",
]

NO_CHANGES_SUMMARY = (
    "The head commit has the same tree as the merge base: there are no changes to review."
)

_Client = TypeVar("_Client")
_Outcome = TypeVar("_Outcome", ReviewResult, BaseException)

PLAIN = ReviewOptions()  # a local review, not published, with clients of its own


async def run_review(
    target: ReviewTarget, settings: Settings, options: ReviewOptions = PLAIN
) -> ReviewResult:
    """Prepare the repository, run the validated tool-calling loop, return the review, as
    `options` say (loop/options.py: what the review does, what its holder lends it).

    Every forge's step goes through the change's `ChangeForge` (forge/base.py): the options'
    `forge` when given, else the one its URL names (forge/select.py) over the options'
    `clients`: every read, fetch, check and publication goes through it.

    Raises a `ReviewError` subclass for every failure the contract names, carrying what the
    review had spent (`ReviewError.run`: rounds, usage, trace) for internal callers.
    """
    settings.require_provider_key()
    if options.post:
        _check_publishable(target)
    deadline = asyncio.get_running_loop().time() + settings.review_timeout_seconds
    # The store's work stops at the deadline (loop.time() is time.monotonic()) or on cancel.
    cancel = threading.Event()
    tally = Tally()  # every conversation of this review spends from it
    with _ending(options.metrics, tally, settings) as ending, _set_at_exit(cancel):
        async with asyncio.timeout_at(deadline), _opened(target, settings, options) as parts:
            review = _Review(settings, options, deadline, tally, *parts)
            async with review.pinned(target, cancel) as pinned:
                return ending.of(await review.run(pinned))


@dataclass
class _Review:
    """One review's parts, shared by its steps: its model client, forge (None for a local
    repository) and repository store, as `_opened` gave them."""

    settings: Settings
    options: ReviewOptions
    deadline: float
    tally: Tally
    model: ModelClient
    forge: ChangeForge | None
    store: RepositoryStore
    on_stage: StageHook | None = field(init=False)

    def __post_init__(self) -> None:
        self.on_stage = _stage_hook(self.options.progress, self.tally)

    @contextlib.asynccontextmanager
    async def pinned(
        self, target: ReviewTarget, cancel: threading.Event
    ) -> AsyncIterator[Prepared]:
        """The target's commits pinned for the review (loop/workspace.py), once `preparing`
        is reported."""
        if self.on_stage is not None:
            self.on_stage("preparing", 0)
        work = self.store.work(self.deadline, cancel)
        async with prepare(target, self.forge, self.store, work) as pinned:
            yield pinned

    async def run(self, pinned: Prepared) -> ReviewResult:
        """The review of `pinned`: skipped, answered before the model is asked, or the model's
        final review (published when the options `post` it), its check completed."""
        settings, options = self.settings, self.options
        prepared = await self.store.run(with_repo_config, pinned)
        prepared = await _with_learnings(prepared, options.learnings)
        publisher = self.forge if options.post else None
        gate = open_gate(prepared, settings, publisher, on_outcome=options.on_check)
        if options.automatic and (skipped := await skip_review(prepared, settings, gate)):
            return skipped
        if publisher is not None:
            prepared, done = await self._before_model(prepared, publisher, gate)
            if done is not None:
                return done
        # specification §21: the walkthrough's files, the linked issues read (no model asked).
        prepared = await with_understanding(prepared, self.forge, settings, self.store)
        reviewed = functools.partial(_review, self._engine(prepared), options.include_trace)
        result = await gated(gate, self.deadline, reviewed)
        if publisher is not None:
            await self._publish(result, prepared, publisher, gate)
        await gate.finished(result)
        return result

    def _engine(self, prepared: Prepared) -> Engine:
        return Engine(
            self.model,
            prepared,
            self.settings,
            self.deadline,
            store=self.store,
            tally=self.tally,
            on_stage=self.on_stage,
            metrics=self.options.metrics,
        )

    async def _before_model(
        self, prepared: Prepared, forge: ChangeForge, gate: Gate
    ) -> tuple[Prepared, ReviewResult | None]:
        """What `post` does before the model is asked: (prepared, None) to go on, or (prepared,
        the early answer: a head already published). A review that cannot be published fails
        here (no token, a token the forge refuses); a head the ledger or our markers say is
        published answers `already_published` (no model asked; the check completed from what
        was posted); a re-review names the files changed since our last reviewed head."""
        info = prepared.pull_request
        assert info is not None  # `post` publishes a change, never a local repository
        git_dir, head = prepared.repository.git_dir, prepared.repository.revisions.head_sha
        options = self.options
        await forge.ensure_can_publish(info)
        posted = None
        if options.ledger is not None and not options.force:
            posted = await forge.published_in_ledger(info, head, options.ledger)
        if posted is None:
            prior = await forge.prior_review(info, git_dir, head, force=options.force)
            if prior.last_head is not None:
                context = replace(
                    prepared.context,
                    last_reviewed_head=prior.last_head,
                    changed_since_last_review=prior.changed,
                )
                prepared = replace(prepared, context=context)
            posted = None if options.force else prior.posted
        if posted is not None:
            return prepared, await already_posted(prepared, self.settings, forge, posted, gate)
        return await _with_dismissed_titles(prepared, forge, options.dismissals), None

    async def _publish(
        self, result: ReviewResult, prepared: Prepared, forge: ChangeForge, gate: Gate
    ) -> None:
        """Publish the review (specification §§10, 17): `result.publication` says what happened.
        Findings the repository dismissed (specification §15) are not published and never fail the
        check."""
        info = prepared.pull_request
        assert info is not None
        git_dir, options = prepared.repository.git_dir, self.options
        reviewed_before = prepared.context.last_reviewed_head is not None
        asked = DismissalQuery(
            info,
            options.dismissals,
            options.permissions,
            reviewed_before=reviewed_before,
            has_findings=bool(result.review.findings),
        )
        dismissed = await forge.dismissed(asked)
        gate.dismissed = dismissed
        result.publication = publication = await forge.publish(
            result,
            git_dir,
            deadline=self.deadline,
            ledger=options.ledger,
            metrics=options.metrics,
            force=options.force,
            dismissed=dismissed,
        )
        if publication is None or publication.status != "published" or not reviewed_before:
            return  # a first review (or one after a rewritten history): no thread of ours to fix
        resolved = await forge.resolve_fixed(result, info, git_dir)
        if resolved is not None:
            publication.resolved = resolved


async def _with_dismissed_titles(
    prepared: Prepared, forge: ChangeForge, dismissals: DismissedFindings | None
) -> Prepared:
    """The first message names the findings the team dismissed on the change's files."""
    info = prepared.pull_request
    if dismissals is None or info is None:
        return prepared
    paths = [path for _, path in prepared.context.changed_files]
    titles = await forge.dismissed_titles(info, paths, dismissals)
    if titles is None:
        return prepared
    return replace(prepared, context=replace(prepared.context, dismissed_titles=titles))


async def _with_learnings(prepared: Prepared, learnings: Learnings | None) -> Prepared:
    """The repository's learnings in the first message (specification §20), newest first and
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
    """How a review ended, counted once (specification §18): the result it returns (`of`), else what
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
        raise counted(timeout, _cost(tally.usage, settings)) from None
    except ReviewError as error:
        error.run = tally.record()
        counted(error, _cost(tally.usage, settings))
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


def _cost(usage: Usage, settings: Settings) -> Cost | None:
    """The estimated cost of `usage` at the settings' prices (a failed review's too)."""
    input_price = settings.review_price_input_per_mtok
    return estimated_cost(usage, input_price, settings.review_price_output_per_mtok)


def _check_publishable(target: ReviewTarget) -> None:
    """What `post` can publish on, checked before anything is fetched or the model is asked:
    a pull request or a merge request, never a local repository."""
    if isinstance(target, LocalTarget):
        raise InvalidRequest("Publishing needs a pull request URL, not a local repository.")


def _forge_of(
    target: ReviewTarget, settings: Settings, options: ReviewOptions
) -> AbstractAsyncContextManager[ChangeForge | None]:
    """The caller's forge, else the one the change's URL names; None for a local repository."""
    if options.forge is not None or not isinstance(target, ChangeTarget):
        return contextlib.nullcontext(options.forge)
    return open_forge(target.url, settings, clients=options.clients)


@contextlib.asynccontextmanager
async def _opened(
    target: ReviewTarget, settings: Settings, options: ReviewOptions
) -> AsyncIterator[tuple[ModelClient, ChangeForge | None, RepositoryStore]]:
    """The review's model client, forge and repository store: the holder's as they are (never
    closed here), else the review's own, closed when it ends."""
    metrics = options.metrics
    async with (
        _shared_or_own(options.model, lambda: ProviderClient(settings, metrics=metrics)) as model,
        _forge_of(target, settings, options) as forge,
        _shared_or_own(options.store, lambda: one_shot_store(settings)) as store,
    ):
        yield model, forge, store


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
        cost=_cost(tally.usage, settings),
    )
