"""REVIEW_MAX_TOTAL_TOKENS (specification §§2, 5): the engine checks the review's tokens before
each provider request, over all the review's conversations (review, repairs, verification).

Driven in process by `ScriptedModel` over a real git repository; every scripted turn spends
`USAGE` (15 tokens), and the tests count the requests the model received.
"""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.errors import TokenBudget
from pr_review_api.llm.testing import USAGE, ScriptedModel, stop_turn, tool_turn
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.metrics import termination_label
from pr_review_api.model import ReviewResult, Usage
from pr_review_api.settings import load_settings
from tests.builders import final_review
from tests.conftest import PROVIDER_KEY
from tests.gitrepo import GitRepo
from tests.loop.support import finding

PATH = "src/widgets/service.py"
SERVICE = "\n".join(f"line {n}: validate_name(widget.name)" for n in range(1, 61)) + "\n"


@pytest.fixture
def widget(tmp_path: Path) -> tuple[GitRepo, str, str]:
    repo = GitRepo(tmp_path / "widget")
    base = repo.commit_files({PATH: "old\n", "README.md": "# widget\n"})
    head = repo.commit_files({PATH: SERVICE}, message="rewrite")
    return repo, base, head


review_of = partial(final_review, summary="Checked.")


def run(model: ScriptedModel, widget: tuple[GitRepo, str, str], **overrides: Any) -> ReviewResult:
    repo, base, head = widget
    values: dict[str, Any] = {"opencode_api_key": PROVIDER_KEY, "review_timeout_seconds": 30}
    settings = load_settings(**(values | overrides))
    return asyncio.run(
        run_review(LocalTarget(repo.path, base, head), settings, ReviewOptions(model=model))
    )


def read(call_id: str) -> Any:
    return tool_turn([(call_id, "read_repository_file", {"path": PATH})])


def test_reaching_the_budget_stops_new_requests_and_ends_token_budget(
    widget: tuple[GitRepo, str, str],
) -> None:
    model = ScriptedModel(read("c1"), read("c2"), stop_turn(review_of()))
    with pytest.raises(TokenBudget) as caught:
        run(model, widget, review_max_total_tokens=2 * USAGE.total_tokens)
    assert len(model.requests) == 2  # the third request was never sent
    error = caught.value
    assert error.termination_reason == "token_budget"
    assert error.code == "token_budget"
    assert error.run is not None
    assert (error.run.rounds, error.run.tool_calls) == (2, 2)
    assert error.run.usage.total_tokens == 2 * USAGE.total_tokens


def test_a_review_under_its_budget_is_unchanged(widget: tuple[GitRepo, str, str]) -> None:
    model = ScriptedModel(read("c1"), stop_turn(review_of(finding(title="Kept"))))
    result = run(model, widget, review_max_total_tokens=2 * USAGE.total_tokens + 1)
    model.assert_complete()
    assert result.termination_reason == "final_review"
    assert [f.title for f in result.review.findings] == ["Kept"]


def test_a_repair_is_a_request_the_budget_refuses(widget: tuple[GitRepo, str, str]) -> None:
    model = ScriptedModel(stop_turn("not json"), stop_turn(review_of()))
    with pytest.raises(TokenBudget):
        run(
            model,
            widget,
            review_repair_attempts=1,
            review_max_total_tokens=USAGE.total_tokens,
        )
    assert len(model.requests) == 1


def test_verification_stops_at_the_budget_and_keeps_the_rest_unverified(
    widget: tuple[GitRepo, str, str],
) -> None:
    model = ScriptedModel(
        stop_turn(review_of(finding(title="One"), finding(title="Two"), finding(title="Three"))),
        stop_turn({"evidence": "Line 42 saves first.", "verdict": "confirmed"}),
    )
    result = run(
        model,
        widget,
        review_verify_findings=True,
        review_max_total_tokens=2 * USAGE.total_tokens,
    )
    model.assert_complete()
    assert len(model.requests) == 2
    assert result.termination_reason == "final_review"
    assert [f.title for f in result.review.findings] == ["One", "Two", "Three"]
    assert result.review.notes[-1] == (
        "Verification: 1 finding confirmed, 0 refuted and dropped, 2 unverified "
        "(stopped at the token budget)."
    )


def test_a_provider_without_a_total_is_counted_by_its_parts(
    widget: tuple[GitRepo, str, str],
) -> None:
    parts = Usage(prompt_tokens=40, completion_tokens=20, total_tokens=0)
    model = ScriptedModel(
        tool_turn([("c1", "read_repository_file", {"path": PATH})], usage=parts),
        stop_turn(review_of()),
    )
    with pytest.raises(TokenBudget):
        run(model, widget, review_max_total_tokens=60)
    assert len(model.requests) == 1


def test_the_metrics_count_token_budget_by_its_name() -> None:
    assert termination_label(TokenBudget()) == "token_budget"
