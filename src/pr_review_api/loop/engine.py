"""The conversation engine: rounds with the model under one review's checks, budgets and trace.

A review, the verification of a finding, a repair turn and (next) the answer to a reviewer's
question are each a small policy over this engine. `Engine` holds what every conversation of
one review shares: the model client, the pinned repository and the store's threads its reads
run on, the tool-call limits, the deadline, the coverage and the `Tally` (rounds, tool calls,
tool content, usage, trace). `Engine.converse()` runs one conversation: it sends the messages,
checks each turn (`loop/turn_checks.py`: the seed's checks 4 to 9, round-atomic), runs a tool
round's calls and appends their results in call order, until the `Policy` accepts a stop turn.

What a stop turn means is the policy's alone: its own schema and checks, whether a rejected
turn is answered with fixed words (`Repair`) and what the conversation returns. The engine
knows no final schema. Every `ReviewError` that leaves a conversation carries the tally's
`RunRecord` (`ReviewError.run`) for internal callers; the edges never show it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pr_review_api.errors import (
    InvalidModelResponse,
    MaxRounds,
    MaxToolCalls,
    ReviewError,
    TokenBudget,
)
from pr_review_api.git.store import RepositoryStore
from pr_review_api.llm.client import ModelClient
from pr_review_api.loop.coverage import CoverageTracker
from pr_review_api.loop.evidence import ReceivedCode
from pr_review_api.loop.turn_checks import CallLimits, CheckedTurn, ToolCall, check_turn
from pr_review_api.loop.workspace import Prepared
from pr_review_api.model import RunRecord, TraceToolCall, TraceTurn, Usage, preview
from pr_review_api.settings import MAX_ACCUMULATED_TOOL_CONTENT_BYTES, Settings
from pr_review_api.tools import TOOLS, ToolOutcome, execute_tool

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics

_T_co = TypeVar("_T_co", covariant=True)
_T = TypeVar("_T")

# A progress hook: a stage of the review began in this round (see loop/run.py's Progress).
StageHook = Callable[[str, int], None]


@dataclass(frozen=True)
class Stages:
    """The progress stages a policy's rounds report; None reports nothing at that point."""

    asking: str = "waiting_for_model"
    running_tools: str | None = "running_tools"
    stopping: str | None = "validating"


@dataclass(frozen=True)
class Repair:
    """A policy's answer to a stop turn it rejects and may repair: the fixed words to send.

    The engine keeps the rejected stop turn in the conversation and answers it with `words`
    as a user message; the next round asks the model again. Never the model's own text.
    """

    words: str


class Policy(Protocol[_T_co]):
    """What one kind of conversation makes of a stop turn."""

    @property
    def stages(self) -> Stages: ...

    async def stop(self, turn: CheckedTurn, *, last_round: bool) -> _T_co | Repair:
        """The conversation's value, or a `Repair`; raises a `ReviewError` to end it.

        `last_round` says the conversation has no round left for a repair.
        """
        ...


@dataclass
class Tally:
    """What one review has spent across its conversations; its limits apply to these totals."""

    rounds: int = 0  # provider requests made, a failed one included
    tool_calls: int = 0
    tool_content_bytes: int = 0
    usage: Usage = field(default_factory=Usage)
    trace: list[TraceTurn] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        """The tokens spent so far (a provider that reports no total: prompt + completion)."""
        usage = self.usage
        return max(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens)

    def record(self) -> RunRecord:
        """A copy of the counts and the trace so far, for an error to carry."""
        return RunRecord(
            rounds=self.rounds, tool_calls=self.tool_calls, usage=self.usage, trace=[*self.trace]
        )


class Engine:
    """One review's conversations with the model: shared client, limits, deadline and tally."""

    def __init__(  # noqa: PLR0913  (what every conversation of one review shares)
        self,
        model: ModelClient,
        prepared: Prepared,
        settings: Settings,
        deadline: float,
        *,
        store: RepositoryStore,
        tally: Tally | None = None,
        on_stage: StageHook | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.model = model
        self.prepared = prepared
        self.settings = settings
        self.deadline = deadline  # a loop.time() value, passed to every request
        # Every blocking step (tools, checks of a stop turn) runs on the store's threads,
        # sized for the reviews the process runs at once, never asyncio's shared default pool.
        self.store = store
        self.tally = Tally() if tally is None else tally
        self.on_stage = on_stage
        self.metrics = metrics  # counts each tool call
        # Calls checked and running but not yet in the tally: conversations that run at once
        # (loop/batches.py) check their rounds against the same total, so each reserves first.
        self._running_calls = 0
        # REVIEW_REQUIRE_EVIDENCE, or a custom check's `fail` (specification §20): what the model
        # received, for loop/evidence.py's rule.
        grounding = settings.review_require_evidence or bool(prepared.context.checks)
        self.coverage = CoverageTracker(
            prepared.repository,
            prepared.context.changed_files,
            received=ReceivedCode() if grounding else None,
        )

    async def converse(
        self, policy: Policy[_T], messages: list[dict[str, Any]], *, max_rounds: int
    ) -> _T:
        """Run one conversation from `messages` (appended to) until `policy` accepts a stop turn.

        A fresh conversation: call ids are unique within it, while the tool-call and
        tool-content limits, usage, rounds and trace are the review's (`Tally`). Raises
        `MaxRounds` after `max_rounds` provider turns without a value, and every other
        `ReviewError` of the model client, the checks, the tools or the policy, each carrying
        the tally's `RunRecord`.
        """
        try:
            return await self._converse(policy, messages, max_rounds)
        except ReviewError as error:
            error.run = self.tally.record()
            raise

    async def _converse(
        self, policy: Policy[_T], messages: list[dict[str, Any]], max_rounds: int
    ) -> _T:
        seen_ids: set[str] = set()
        stages = policy.stages
        for number in range(1, max_rounds + 1):
            self.check_budget()  # before every provider request, a repair's included
            # Rounds are numbered on across conversations, so the trace reads in order.
            self.tally.rounds += 1
            round_ = self.tally.rounds
            self.report(stages.asking, round_)
            answer = await self.model.complete(messages, TOOLS, deadline=self.deadline)
            self.tally.usage += answer.usage  # spent even when the turn fails its checks
            # Off the event loop: the checks parse every call's arguments (up to 2 MiB).
            turn = await self.store.run(check_turn, answer, seen_ids, self._limits())
            if turn.finish_reason == "stop":
                self.report(stages.stopping, round_)
                self._record(round_, turn, [])
                outcome = await policy.stop(turn, last_round=number == max_rounds)
                if not isinstance(outcome, Repair):
                    return outcome
                messages.append(turn.message)
                messages.append({"role": "user", "content": outcome.words})
                continue
            self.report(stages.running_tools, round_)
            self._reserve(len(turn.calls))  # no await since the check: atomic on the loop
            outcomes = await self._execute(turn, messages, seen_ids)
            self._record(round_, turn, outcomes)
        raise MaxRounds()

    def check_budget(self) -> None:
        """Raise `TokenBudget` once the review's tokens reached REVIEW_MAX_TOTAL_TOKENS.

        Checked before each request: a request already sent is never cut, so a review may
        end a little over its budget (by at most one answer of each conversation in flight).
        """
        budget = self.settings.review_max_total_tokens
        if budget is not None and self.tally.tokens >= budget:
            raise TokenBudget()

    def report(self, stage: str | None, round_: int) -> None:
        """Tell the progress hook a stage began (nothing when `stage` is None)."""
        if stage is not None and self.on_stage is not None:
            self.on_stage(stage, round_)

    def _limits(self) -> CallLimits:
        return CallLimits(
            per_round=self.settings.review_max_tool_calls_per_round,
            total=self.settings.review_max_tool_calls,
            used=self.tally.tool_calls + self._running_calls,
        )

    def _reserve(self, calls: int) -> None:
        """Hold `calls` of the review's total for a checked round, or raise `MaxToolCalls`.

        The check ran on a thread with the counts of its start; another conversation of the
        review may have run calls meanwhile, so the total is checked again here.
        """
        used = self.tally.tool_calls + self._running_calls
        if used + calls > self.settings.review_max_tool_calls:
            raise MaxToolCalls()
        self._running_calls += calls

    async def _execute(
        self, turn: CheckedTurn, messages: list[dict[str, Any]], seen_ids: set[str]
    ) -> list[tuple[ToolOutcome, int]]:
        """Run a validated round's calls in worker threads; append results in call order."""
        calls = turn.calls
        try:
            outcomes = await asyncio.gather(*(self.store.run(self._timed, call) for call in calls))
        finally:  # the reservation ends; no await before the tally counts the calls
            self._running_calls -= len(calls)
        messages.append(turn.message)
        # Counted before the content limit is checked: the calls ran, and a failed
        # verification (loop/verify.py) does not end the review, whose totals must say so.
        seen_ids.update(call.id for call in calls)
        tally = self.tally
        tally.tool_calls += len(calls)
        for call, (outcome, _) in zip(calls, outcomes, strict=True):
            if self.metrics is not None:
                self.metrics.tool_call(call.name, outcome.ok)
            tally.tool_content_bytes += len(outcome.content.encode("utf-8"))
            if tally.tool_content_bytes > MAX_ACCUMULATED_TOOL_CONTENT_BYTES:
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
        self.tally.trace.append(
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
