"""The review conversation: a policy over the conversation engine (`loop/engine.py`).

The review's first messages are the system prompt with the final-review schema and the pull
request's context (with REVIEW_INLINE_DIFF_BYTES, its diff). Its stop turn must pass every
final-review check (`loop/final_review.py`); one that fails is answered in fixed words while
REVIEW_REPAIR_ATTEMPTS last and a round is left (a repair turn), and otherwise ends the review.
The review that passes gets (REVIEW_REQUIRE_EVIDENCE) the evidence rule, the repository's
configuration and, with REVIEW_VERIFY_FINDINGS, the verification pass (`loop/verify.py`) over
the same engine.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from pr_review_api.loop.coverage import CoverageTracker
from pr_review_api.loop.custom_checks import CustomCheck, applicable, ground_checks
from pr_review_api.loop.engine import Engine, Repair, Stages
from pr_review_api.loop.evidence import apply_evidence_rule
from pr_review_api.loop.final_review import (
    FinalReviewRejected,
    naming_the_setting,
    parse_final_review,
)
from pr_review_api.loop.linked_issues import with_linked_notes
from pr_review_api.loop.prompts import ReviewContext, system_prompt, user_message
from pr_review_api.loop.repo_config import apply_repo_config
from pr_review_api.loop.turn_checks import CheckedTurn
from pr_review_api.loop.understanding import Understanding
from pr_review_api.loop.verify import verify_findings
from pr_review_api.loop.workspace import Prepared
from pr_review_api.model import FinalReview
from pr_review_api.tools import map_git_errors


class ReviewPolicy:
    """A stop turn is a final review once it passes the checks, else a repair while one is left."""

    stages = Stages()

    def __init__(
        self,
        engine: Engine,
        checks: tuple[CustomCheck, ...] | None = None,
        understanding: Understanding | None = None,
    ) -> None:
        self.engine = engine
        self.repairs = engine.settings.review_repair_attempts
        # The custom checks this conversation must decide (a batch's: loop/batches.py).
        self.checks = engine.prepared.context.checks if checks is None else checks
        # specification §21: what this conversation's review adds (a batch's: its own files).
        self.understanding = understanding or engine.prepared.context.understanding

    async def stop(self, turn: CheckedTurn, *, last_round: bool) -> FinalReview | Repair:
        engine = self.engine
        try:
            review = await engine.store.run(
                functools.partial(
                    parse_final_review,
                    tolerant=engine.settings.review_tolerant_final_json,
                    unreadable=engine.prepared.unreadable,
                    suggestions=engine.settings.review_suggestions,
                    checks=self.checks,
                    understanding=self.understanding,
                ),
                turn.content,
                engine.prepared.repository,
            )
            return ground_checks(review, engine.coverage.received)
        except FinalReviewRejected as rejected:
            if self.repairs == 0 or last_round:
                raise naming_the_setting(
                    rejected,
                    turn.content,
                    tolerant=engine.settings.review_tolerant_final_json,
                    repairs=engine.settings.review_repair_attempts,
                    last_round=last_round,
                ) from None
            self.repairs -= 1
            # Keep the failed stop turn and answer it with the rule it broke, in fixed words.
            return Repair(rejected.repair)


async def final_review(engine: Engine, batched: FinalReview | None = None) -> FinalReview:
    """The review's conversation, its repository configuration and (when set) verification.

    `batched` is the merged review of a large change's batches (`loop/batches.py`), which
    then stands for the one conversation.
    """
    review = batched
    if review is None:
        messages = await first_messages(engine)
        max_rounds = engine.settings.review_max_rounds
        review = await engine.converse(ReviewPolicy(engine), messages, max_rounds=max_rounds)
    received = engine.coverage.received  # set with REVIEW_REQUIRE_EVIDENCE (or checks)
    if engine.settings.review_require_evidence and received is not None:
        review = await engine.store.run(apply_evidence_rule, review, received)
    # Off the event loop: matching the findings' paths is work the base commit sizes.
    review = await engine.store.run(apply_repo_config, review, engine.prepared.repo_config)
    review = with_linked_notes(review, engine.prepared.context.understanding.linked)
    if engine.settings.review_verify_findings and review.findings:
        review = await verify_findings(engine, review)
    return review


async def first_messages(engine: Engine, paths: list[str] | None = None) -> list[dict[str, Any]]:
    """The system prompt and the first user message (REVIEW_INLINE_DIFF_BYTES: with the diff).

    `paths` (a batch's files, `loop/batches.py`) limits the inline diff to those files.
    """
    limit = engine.settings.review_inline_diff_bytes
    if limit:  # reading, parsing and encoding the diff: on the store's threads
        user = await engine.store.run(
            _with_diff, engine.prepared, engine.coverage, limit, paths or []
        )
    else:
        user = user_message(conversation_context(engine.prepared.context, paths))
    settings = engine.settings
    system = system_prompt(
        require_evidence=settings.review_require_evidence,
        suggestions=settings.review_suggestions,
        checks=bool(conversation_checks(engine.prepared.context, paths)),
        understanding=engine.prepared.context.understanding,
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def conversation_checks(context: ReviewContext, paths: list[str] | None) -> tuple[CustomCheck, ...]:
    """The custom checks one conversation decides: the change's, or those of a batch's files."""
    return context.checks if not paths else applicable(context.checks, paths)


def conversation_context(context: ReviewContext, paths: list[str] | None) -> ReviewContext:
    """The first message's context, with a batch's checks only."""
    checks = conversation_checks(context, paths)
    return context if checks == context.checks else replace(context, checks=checks)


def _with_diff(prepared: Prepared, coverage: CoverageTracker, limit: int, paths: list[str]) -> str:
    """The first user message with the diff (of `paths`, else all) cut to `limit` bytes."""
    with map_git_errors(prepared.unreadable):
        data, truncated = prepared.repository.diff(paths, limit)
    text = data.decode("utf-8", "replace")
    if truncated:  # the cut may split a character: drop its first bytes
        text = text.rstrip("\ufffd")
    coverage.saw_diff(text, truncated=truncated)
    context = conversation_context(prepared.context, paths)
    return user_message(context, diff=text, diff_truncated=truncated)


def same_tree(prepared: Prepared) -> bool:
    """Whether the merge base and the head have the same tree: nothing to review."""
    with map_git_errors(prepared.unreadable):
        return prepared.repository.same_tree()
