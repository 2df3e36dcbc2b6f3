"""run_review(): the one function the HTTP API and the CLI share.

A review is: pin the repository (a GitHub pull request fetched into the cache, or two
revisions of a local repository), then run the tool-calling loop until a stop turn passes
final validation or a termination reason ends it. The whole review, checkout included, runs
under one deadline. Blocking git work runs in worker threads, never on the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from pr_review_api.errors import (
    InvalidModelResponse,
    InvalidRequest,
    MaxRounds,
    ReviewTimeout,
)
from pr_review_api.git.runner import run_git
from pr_review_api.git.store import RepositoryStore
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.ledger import PublishLedger
from pr_review_api.github.publish import publish_result
from pr_review_api.llm.client import ModelClient
from pr_review_api.llm.openai_chat import ProviderClient
from pr_review_api.loop.background_index import hand_off
from pr_review_api.loop.checks import CallLimits, CheckedTurn, ToolCall, check_turn
from pr_review_api.loop.coverage import CoverageTracker
from pr_review_api.loop.final_review import FinalReviewRejected, parse_final_review
from pr_review_api.loop.prompts import system_prompt, user_message
from pr_review_api.loop.repo_config import (
    apply_repo_config,
)
from pr_review_api.loop.verify import verify_findings
from pr_review_api.loop.workspace import (
    LocalTarget,
    Prepared,
    PullRequestTarget,
    ReviewTarget,
    prepare,
    published_before,
    repository_store,
    with_re_review,
    with_repo_config,
)
from pr_review_api.model import (
    FinalReview,
    ReviewResult,
    Revisions,
    TraceToolCall,
    TraceTurn,
    Usage,
    preview,
)
from pr_review_api.settings import MAX_ACCUMULATED_TOOL_CONTENT_BYTES, Settings
from pr_review_api.tools import TOOLS, ToolOutcome, execute_tool, map_git_errors

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


@dataclass(frozen=True)
class Progress:
    """What a review has done so far, for live progress output."""

    stage: str  # "preparing", "waiting_for_model", "running_tools", "validating", "verifying"
    round: int
    tool_calls: int
    usage: Usage


ProgressCallback = Callable[[Progress], None]


async def run_review(
    target: ReviewTarget,
    settings: Settings,
    *,
    include_trace: bool = False,
    progress: ProgressCallback | None = None,
    model: ModelClient | None = None,
    post: bool = False,
    github: GitHubClient | None = None,
    installation_id: int | None = None,
    store: RepositoryStore | None = None,
    ledger: PublishLedger | None = None,
) -> ReviewResult:
    """Prepare the repository, run the validated tool-calling loop, return the review.

    `post` publishes the validated review on the pull request (CONTRACT 10) and sets the
    result's `publication`; `github` is the process's shared GitHub client (else one is made).
    With a `ledger` (the service's record of what it published), a head already published
    answers its earlier review document, `already_published`, before the model is asked.

    Raises a `ReviewError` subclass for every failure the contract names. A shared `model`
    client may be passed in (the HTTP service keeps one; tests pass a `ScriptedModel`);
    otherwise an OpenAI-compatible `ProviderClient` is made from the settings.
    """
    settings.require_provider_key()
    if post and isinstance(target, LocalTarget):
        raise InvalidRequest("Publishing needs a pull request URL, not a local repository.")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.review_timeout_seconds
    # The store's work stops at the deadline (loop.time() is time.monotonic()) or on cancel.
    cancel = threading.Event()
    try:
        async with (
            asyncio.timeout_at(deadline),
            _model(settings, model) as client,
            _github(settings, github) as github_client,
            _store(settings, store) as repo_store,
        ):
            _report(progress, "preparing", 0, 0, Usage())
            work = repo_store.work(deadline, cancel)
            async with prepare(target, settings, github_client, repo_store, work) as pinned:
                prepared = await repo_store.run(with_repo_config, pinned)
                if post and ledger is not None:
                    earlier = await published_before(
                        prepared, ledger, github_client, installation_id
                    )
                    if earlier is not None:
                        return earlier
                if post:
                    prepared = await with_re_review(prepared, github_client, installation_id)
                loop_run = _ReviewLoop(
                    prepared, settings, client, deadline, progress, store=repo_store
                )
                result = await loop_run.run(include_trace)
                if post:
                    result.publication = await publish_result(
                        result,
                        github_client,
                        prepared.repository.git_dir,
                        deadline=deadline,
                        installation_id=installation_id,
                        ledger=ledger,
                    )
                return result
    except TimeoutError:
        raise ReviewTimeout() from None
    finally:
        cancel.set()


@asynccontextmanager
async def _store(
    settings: Settings, shared: RepositoryStore | None
) -> AsyncIterator[RepositoryStore]:
    if shared is not None:
        yield shared
        return
    made = repository_store(settings)
    interrupted = False
    try:
        yield made
    except asyncio.CancelledError:  # interrupted, or out of time: nothing is left running
        interrupted = True
        raise
    finally:
        made.close()
        if not interrupted:
            # A store of one review, whose process ends now: an unfinished search-index
            # build goes on in a process of its own.
            hand_off(settings, made)


@asynccontextmanager
async def _model(settings: Settings, shared: ModelClient | None) -> AsyncIterator[ModelClient]:
    if shared is not None:
        yield shared
        return
    async with ProviderClient(settings) as client:
        yield client


@asynccontextmanager
async def _github(settings: Settings, shared: GitHubClient | None) -> AsyncIterator[GitHubClient]:
    if shared is not None:
        yield shared
        return
    async with GitHubClient(settings) as client:
        yield client


def _report(
    progress: ProgressCallback | None, stage: str, round_: int, calls: int, usage: Usage
) -> None:
    if progress is not None:
        progress(Progress(stage, round_, calls, usage))


class _ReviewLoop:
    """The state of one review's conversation with the model."""

    def __init__(
        self,
        prepared: Prepared,
        settings: Settings,
        model: ModelClient,
        deadline: float,
        progress: ProgressCallback | None,
        *,
        store: RepositoryStore,
    ) -> None:
        self.prepared = prepared
        # Every blocking step of the review (checks, diffs, tools) runs on the store's threads,
        # sized for the reviews the process runs at once, never asyncio's shared default pool.
        self.store = store
        self.settings = settings
        self.model = model
        self.deadline = deadline
        self.progress = progress
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": system_prompt(suggestions=settings.review_suggestions)},
            {"role": "user", "content": user_message(prepared.context)},
        ]
        self.seen_ids: set[str] = set()
        self.tool_calls = 0
        self.tool_content_bytes = 0
        self.usage = Usage()
        self.trace: list[TraceTurn] = []
        self.coverage = CoverageTracker(prepared.repository, prepared.context.changed_files)

    async def run(self, include_trace: bool) -> ReviewResult:
        if await self.store.run(self._same_tree):
            return self._no_changes(include_trace)
        if self.settings.review_inline_diff_bytes:
            await self.store.run(self._inline_diff, self.settings.review_inline_diff_bytes)
        repairs = self.settings.review_repair_attempts
        last_round = self.settings.review_max_rounds
        for round_ in range(1, last_round + 1):
            self._report("waiting_for_model", round_)
            answer = await self.model.complete(self.messages, TOOLS, deadline=self.deadline)
            turn = await self.store.run(check_turn, answer, self.seen_ids, self._limits())
            self.usage += turn.usage
            if turn.finish_reason == "stop":
                self._report("validating", round_)
                try:
                    review = await self.store.run(
                        functools.partial(
                            parse_final_review,
                            tolerant=self.settings.review_tolerant_final_json,
                            unreadable=self.prepared.unreadable,
                            suggestions=self.settings.review_suggestions,
                        ),
                        turn.content,
                        self.prepared.repository,
                    )
                except FinalReviewRejected as rejected:
                    if repairs == 0 or round_ == last_round:
                        raise
                    repairs -= 1
                    self._repair(round_, turn, rejected)
                    continue
                self._record(round_, turn, [])
                return await self._finish(review, round_, include_trace)
            self._report("running_tools", round_)
            outcomes = await self._execute(turn)
            self._record(round_, turn, outcomes)
        raise MaxRounds()

    async def _finish(self, review: FinalReview, rounds: int, include_trace: bool) -> ReviewResult:
        """The repository's configuration, then (REVIEW_VERIFY_FINDINGS) the verification pass."""
        # Off the event loop: matching the findings' paths is work the base commit sizes.
        review = await self.store.run(apply_repo_config, review, self.prepared.repo_config)
        if self.settings.review_verify_findings and review.findings:
            prepared = self.prepared
            review, used = await verify_findings(
                self,
                review,
                prepared.context,
                rounds,
                repository=prepared.repository,
                unreadable=prepared.unreadable,
            )
            rounds += used
        return self._result(review, rounds, include_trace)

    def _repair(self, round_: int, turn: CheckedTurn, rejected: FinalReviewRejected) -> None:
        """Keep the failed stop turn and answer it with the rule it broke, in fixed words."""
        self._record(round_, turn, [])
        self.messages.append(turn.message)
        self.messages.append({"role": "user", "content": rejected.repair})

    def _same_tree(self) -> bool:
        """Whether the merge base and the head have the same tree: nothing to review."""
        revisions = self.prepared.repository.revisions
        with map_git_errors(self.prepared.unreadable):
            found = run_git(
                self.prepared.repository.git_dir,
                [
                    "rev-parse",
                    f"{revisions.merge_base_sha}^{{tree}}",
                    f"{revisions.head_sha}^{{tree}}",
                ],
                timeout=30,
            )
        trees = found.stdout.split()
        return len(trees) == 2 and trees[0] == trees[1]

    def _no_changes(self, include_trace: bool) -> ReviewResult:
        review = FinalReview(summary=NO_CHANGES_SUMMARY, findings=[], notes=[])
        review = apply_repo_config(review, self.prepared.repo_config)
        result = self._result(review, 0, include_trace)
        return result.model_copy(update={"termination_reason": "no_changes"})

    def _inline_diff(self, limit: int) -> None:
        """REVIEW_INLINE_DIFF_BYTES: the diff, cut to `limit` bytes, in the first user message."""
        with map_git_errors(self.prepared.unreadable):
            data, truncated = self.prepared.repository.diff([], limit)
        text = data.decode("utf-8", "replace")
        if truncated:  # the cut may split a character: drop its first bytes
            text = text.rstrip("\ufffd")
        self.messages[1] = {
            "role": "user",
            "content": user_message(self.prepared.context, diff=text, diff_truncated=truncated),
        }
        self.coverage.saw_diff(text, truncated=truncated)

    def _limits(self) -> CallLimits:
        return CallLimits(
            per_round=self.settings.review_max_tool_calls_per_round,
            total=self.settings.review_max_tool_calls,
            used=self.tool_calls,
        )

    async def _execute(
        self,
        turn: CheckedTurn,
        messages: list[dict[str, Any]] | None = None,
        seen_ids: set[str] | None = None,
    ) -> list[tuple[ToolOutcome, int]]:
        """Run a validated round's calls in worker threads; append results in call order.

        `messages` and `seen_ids` name another conversation than the review's own (the
        verification pass, loop/verify.py); the per-review counts and limits stay shared.
        """
        messages = self.messages if messages is None else messages
        seen_ids = self.seen_ids if seen_ids is None else seen_ids
        calls = turn.calls
        outcomes = await asyncio.gather(*(self.store.run(self._timed, call) for call in calls))
        messages.append(turn.message)
        # Counted before the content limit is checked: the calls ran, and a failed
        # verification (loop/verify.py) does not end the review, whose totals must say so.
        seen_ids.update(call.id for call in calls)
        self.tool_calls += len(calls)
        for call, (outcome, _) in zip(calls, outcomes, strict=True):
            self.tool_content_bytes += len(outcome.content.encode("utf-8"))
            if self.tool_content_bytes > MAX_ACCUMULATED_TOOL_CONTENT_BYTES:
                raise InvalidModelResponse("The accumulated tool content exceeded its limit.")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": outcome.content})
            # A diff to parse or a path to resolve in git: not on the event loop.
            await self.store.run(self.coverage.saw_tool_result, call.name, outcome.result)
        return outcomes

    def _timed(self, call: ToolCall) -> tuple[ToolOutcome, int]:
        started = time.perf_counter()
        outcome = execute_tool(
            self.prepared.repository,
            call.name,
            call.validated,
            unreadable=self.prepared.unreadable,
        )
        return outcome, round((time.perf_counter() - started) * 1000)

    def _record(
        self, round_: int, turn: CheckedTurn, outcomes: list[tuple[ToolOutcome, int]]
    ) -> None:
        self.trace.append(
            TraceTurn(
                round=round_,
                provider_request_id=turn.request_id,
                provider_model=turn.model,
                finish_reason=turn.finish_reason,
                protocol_action="final_review" if turn.finish_reason == "stop" else "execute_tools",
                usage=turn.usage,
                tool_calls=[
                    TraceToolCall(
                        id=call.id,
                        name=call.name,
                        arguments=call.arguments,
                        ok=outcome.ok,
                        result_preview=preview(outcome.preview_text),
                        result_bytes=len(outcome.content.encode("utf-8")),
                        truncated=outcome.truncated,
                        duration_ms=duration_ms,
                    )
                    for call, (outcome, duration_ms) in zip(turn.calls, outcomes, strict=True)
                ],
            )
        )

    def _report(self, stage: str, round_: int) -> None:
        _report(self.progress, stage, round_, self.tool_calls, self.usage)

    def _result(self, review: FinalReview, rounds: int, include_trace: bool) -> ReviewResult:
        revisions = self.prepared.repository.revisions
        return ReviewResult(
            pull_request=self.prepared.pull_request,
            revisions=Revisions(
                base_sha=revisions.base_sha,
                head_sha=revisions.head_sha,
                merge_base_sha=revisions.merge_base_sha,
            ),
            model=self.settings.opencode_model,
            review=review,
            usage=self.usage,
            rounds=rounds,
            tool_calls=self.tool_calls,
            coverage=self.coverage.coverage(),
            trace=self.trace if include_trace else None,
        )
