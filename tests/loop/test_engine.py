"""The conversation engine (loop/engine.py) driven by policies of its own, over a real git
repository, the real tools and a ScriptedModel: what it sends, counts, records and raises.

The policies here are not the review's: a plain-text answer (the shape of the coming answer to
a reviewer's question) shows the engine knows no final schema.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.errors import (
    InvalidModelResponse,
    InvalidToolCall,
    MaxRounds,
    MaxToolCalls,
    ReviewError,
    ReviewTimeout,
)
from pr_review_api.git.store import RepositoryStore
from pr_review_api.llm.testing import USAGE, ScriptedModel, stop_turn, tool_turn
from pr_review_api.llm.turn import Turn
from pr_review_api.loop.engine import Engine, Repair, Stages, Tally
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.turn_checks import CheckedTurn
from pr_review_api.loop.workspace import LocalTarget, Prepared, prepare_local, repository_store
from pr_review_api.model import Usage
from pr_review_api.settings import Settings, load_settings
from tests.conftest import PROVIDER_KEY
from tests.gitrepo import GitRepo

PATH = "src/app.py"
SYSTEM = {"role": "system", "content": "Answer the question."}
QUESTION = {"role": "user", "content": "Does f return 1?"}


@dataclass
class AnswerPolicy:
    """A stop turn is a plain-text answer; `repairs` empty answers get fixed words back."""

    repairs: int = 0
    stages: Stages = field(default_factory=lambda: Stages("answering", None, None))
    seen_last: list[bool] = field(default_factory=list)

    async def stop(self, turn: CheckedTurn, *, last_round: bool) -> str | Repair:
        self.seen_last.append(last_round)
        text = (turn.content or "").strip()
        if text:
            return text
        if self.repairs and not last_round:
            self.repairs -= 1
            return Repair("Your answer was empty. Answer in one sentence.")
        raise InvalidModelResponse("The answer was empty.")


def settings_of(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "opencode_api_key": PROVIDER_KEY,
        "pr_review_cache_dir": tmp_path / "cache",
        "pr_review_background_index": False,
    }
    return load_settings(**(values | overrides))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RepositoryStore]:
    with repository_store(settings_of(tmp_path)) as made:
        yield made


@pytest.fixture
def prepared(tmp_path: Path, store: RepositoryStore) -> Prepared:
    """The pinned repository, read through the test's store: closed at its end, never left to
    a finalizer (a store closed by the garbage collector may close it in any thread)."""
    repo = GitRepo(tmp_path / "app")
    base = repo.commit_files({PATH: "def f():\n    return 0\n"})
    head = repo.commit_files({PATH: "def f():\n    return 1\n"}, message="one")
    return prepare_local(LocalTarget(repo.path, base, head), store)


def engine_for(
    model: ScriptedModel,
    prepared: Prepared,
    store: RepositoryStore,
    settings: Settings,
    stages: list[tuple[str, int]] | None = None,
) -> Engine:
    hook = None if stages is None else lambda stage, round_: stages.append((stage, round_))
    return Engine(model, prepared, settings, 1e12, store=store, on_stage=hook)


def read(call_id: str) -> Turn:
    return tool_turn([(call_id, "read_repository_file", {"path": PATH})])


def converse(engine: Engine, policy: AnswerPolicy, max_rounds: int = 4) -> str:
    messages = [dict(SYSTEM), dict(QUESTION)]
    return asyncio.run(engine.converse(policy, messages, max_rounds=max_rounds))


def test_a_policy_of_its_own_schema_gets_its_value_after_a_tool_round(
    prepared: Prepared, store: RepositoryStore, tmp_path: Path
) -> None:
    model = ScriptedModel(read("c1"), stop_turn("Yes: f returns 1 at the head."))
    stages: list[tuple[str, int]] = []
    engine = engine_for(model, prepared, store, settings_of(tmp_path), stages)
    answer = converse(engine, AnswerPolicy())
    model.assert_complete()
    assert answer == "Yes: f returns 1 at the head."
    second = model.requests[1].messages
    assert second[:2] == [SYSTEM, QUESTION]
    assert second[2]["tool_calls"][0]["id"] == "c1"
    assert second[3]["tool_call_id"] == "c1"
    assert json.loads(second[3]["content"])["content"].startswith("1: def f():")
    assert stages == [("answering", 1), ("answering", 2)]  # the policy's stages, no others
    tally = engine.tally
    assert (tally.rounds, tally.tool_calls) == (2, 1)
    assert tally.usage.total_tokens == 2 * USAGE.total_tokens
    assert [t.protocol_action for t in tally.trace] == ["execute_tools", "final_review"]
    assert engine.coverage.coverage().inspected_files == 1


def test_a_repair_keeps_the_rejected_turn_and_answers_it_in_fixed_words(
    prepared: Prepared, store: RepositoryStore, tmp_path: Path
) -> None:
    model = ScriptedModel(stop_turn("  "), stop_turn("Yes."))
    engine = engine_for(model, prepared, store, settings_of(tmp_path))
    policy = AnswerPolicy(repairs=1)
    assert converse(engine, policy, max_rounds=2) == "Yes."
    model.assert_complete()
    assert model.requests[1].messages[2:] == [
        {"role": "assistant", "content": "  "},
        {"role": "user", "content": "Your answer was empty. Answer in one sentence."},
    ]
    assert policy.seen_last == [False, True]
    assert [t.round for t in engine.tally.trace] == [1, 2]


def test_max_rounds_carries_the_run_it_ended(
    prepared: Prepared, store: RepositoryStore, tmp_path: Path
) -> None:
    model = ScriptedModel(read("c1"), read("c2"))
    engine = engine_for(model, prepared, store, settings_of(tmp_path))
    with pytest.raises(MaxRounds) as caught:
        converse(engine, AnswerPolicy(), max_rounds=2)
    model.assert_complete()
    run = caught.value.run
    assert run is not None
    assert (run.rounds, run.tool_calls) == (2, 2)
    assert run.usage.total_tokens == 2 * USAGE.total_tokens
    assert [t.round for t in run.trace] == [1, 2]
    assert caught.value.to_body()["trace"] is None  # the edge's document never shows it


def test_a_turn_that_fails_its_checks_still_counts_its_usage(
    prepared: Prepared, store: RepositoryStore, tmp_path: Path
) -> None:
    spent = Usage(prompt_tokens=7, completion_tokens=3, total_tokens=10)
    bad = tool_turn([("c1", "run_shell", {"command": "id"})], usage=spent)
    model = ScriptedModel(read("c1"), bad)
    engine = engine_for(model, prepared, store, settings_of(tmp_path))
    with pytest.raises(InvalidToolCall) as caught:
        converse(engine, AnswerPolicy())
    run = caught.value.run
    assert run is not None
    assert run.rounds == 2
    assert run.tool_calls == 1  # no call of the invalid round ran
    assert run.usage.total_tokens == USAGE.total_tokens + 10
    assert len(run.trace) == 1


def test_conversations_of_one_engine_share_the_budgets_not_the_call_ids(
    prepared: Prepared, store: RepositoryStore, tmp_path: Path
) -> None:
    settings = settings_of(tmp_path, review_max_tool_calls=2)
    model = ScriptedModel(
        read("c1"), stop_turn("First."), read("c1"), stop_turn("Second."), read("c2")
    )
    engine = engine_for(model, prepared, store, settings)
    assert converse(engine, AnswerPolicy()) == "First."
    assert converse(engine, AnswerPolicy()) == "Second."  # "c1" again: a fresh conversation
    with pytest.raises(MaxToolCalls):  # the third call is past the shared total of two
        converse(engine, AnswerPolicy())
    model.assert_complete()
    assert [t.round for t in engine.tally.trace] == [1, 2, 3, 4]  # numbered on
    assert engine.tally.rounds == 5


def test_an_error_of_run_review_carries_the_review_spent_so_far(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "app")
    base = repo.commit_files({PATH: "def f():\n    return 0\n"})
    head = repo.commit_files({PATH: "def f():\n    return 1\n"}, message="one")
    model = ScriptedModel(read("c1"), stop_turn("not a review"))
    settings = settings_of(tmp_path, review_repair_attempts=0)
    with pytest.raises(InvalidModelResponse) as caught:
        asyncio.run(
            run_review(LocalTarget(repo.path, base, head), settings, ReviewOptions(model=model))
        )
    model.assert_complete()
    run = caught.value.run
    assert run is not None
    assert (run.rounds, run.tool_calls) == (2, 1)
    assert run.usage.total_tokens == 2 * USAGE.total_tokens
    assert [t.protocol_action for t in run.trace] == ["execute_tools", "final_review"]
    body = caught.value.to_body()
    assert body["trace"] is None
    assert body["termination_reason"] == "invalid_model_response"


class StalledModel(ScriptedModel):
    """Answers its script, then never again (the review's deadline passes meanwhile)."""

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, deadline: float
    ) -> Turn:
        if self._queue:
            return await super().complete(messages, tools, deadline=deadline)
        await asyncio.sleep(3600)
        raise AssertionError("never answered")


def test_a_review_timeout_carries_the_review_spent_so_far(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "app")
    base = repo.commit_files({PATH: "def f():\n    return 0\n"})
    head = repo.commit_files({PATH: "def f():\n    return 1\n"}, message="one")
    model = StalledModel(read("c1"))
    settings = settings_of(tmp_path, review_timeout_seconds=2)
    with pytest.raises(ReviewTimeout) as caught:
        asyncio.run(
            run_review(LocalTarget(repo.path, base, head), settings, ReviewOptions(model=model))
        )
    run = caught.value.run
    assert run is not None
    assert (run.rounds, run.tool_calls) == (2, 1)  # the second request was waiting
    assert run.usage.total_tokens == USAGE.total_tokens
    assert caught.value.to_body()["trace"] is None


def test_an_error_before_any_round_carries_an_empty_run(tmp_path: Path) -> None:
    settings = settings_of(tmp_path)
    target = LocalTarget(tmp_path / "no-such-repository", "HEAD~1", "HEAD")
    with pytest.raises(ReviewError) as caught:
        asyncio.run(run_review(target, settings, ReviewOptions(model=ScriptedModel())))
    run = caught.value.run
    assert run is not None
    assert (run.rounds, run.tool_calls, run.trace) == (0, 0, [])


def test_a_new_tally_records_nothing() -> None:
    record = Tally().record()
    assert (record.rounds, record.tool_calls, record.usage, record.trace) == (0, 0, Usage(), [])
