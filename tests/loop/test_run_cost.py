"""REVIEW_PRICE_INPUT_PER_MTOK and REVIEW_PRICE_OUTPUT_PER_MTOK (specification §2): an estimated
cost in the document, the reports and the metrics only when a price is set.

Run in process with `ScriptedModel` over a real git repository; each scripted turn reports
`USAGE` (10 prompt and 5 completion tokens).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.errors import InvalidModelResponse
from pr_review_api.llm.testing import USAGE, ScriptedModel, stop_turn, tool_turn
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.metrics import Metrics
from pr_review_api.model import ReviewResult, Usage, estimated_cost
from pr_review_api.output.formats import render
from pr_review_api.settings import load_settings
from tests.conftest import PROVIDER_KEY
from tests.gitrepo import GitRepo

PATH = "src/app.py"
COST = "pr_review_cost_usd_total"
FINAL = {"termination_reason": "final_review"}
EMPTY = {"summary": "Fine.", "findings": [], "notes": []}


@pytest.fixture
def small(tmp_path: Path) -> tuple[GitRepo, str, str]:
    repo = GitRepo(tmp_path / "small")
    base = repo.commit_files({PATH: "x = 1\n"})
    head = repo.commit_files({PATH: "x = 2\n"})
    return repo, base, head


def _run(
    repo: tuple[GitRepo, str, str], metrics: Metrics | None = None, **overrides: Any
) -> ReviewResult:
    path, base, head = repo
    model = ScriptedModel(
        tool_turn([("c1", "read_repository_file", {"path": PATH})]), stop_turn(EMPTY)
    )
    values: dict[str, Any] = {"opencode_api_key": PROVIDER_KEY, "review_timeout_seconds": 30}
    settings = load_settings(**(values | overrides))
    target = LocalTarget(path.path, base, head)
    result = asyncio.run(run_review(target, settings, ReviewOptions(model=model, metrics=metrics)))
    model.assert_complete()
    assert len(model.requests) == 2
    return result


def test_without_a_price_the_document_and_reports_are_as_before(
    small: tuple[GitRepo, str, str],
) -> None:
    metrics = Metrics()
    result = _run(small, metrics)
    assert result.cost is None
    assert "cost" not in result.model_dump(mode="json")
    assert '"cost"' not in render(result, "json")
    assert "$" not in render(result, "text")
    assert "$" not in render(result, "markdown")
    assert metrics.registry.get_sample_value(COST, FINAL) is None


def test_the_prices_give_the_document_reports_and_metrics_a_cost(
    small: tuple[GitRepo, str, str],
) -> None:
    metrics = Metrics()
    result = _run(
        small, metrics, review_price_input_per_mtok=3.0, review_price_output_per_mtok=15.0
    )
    spent = USAGE + USAGE
    dollars = (spent.prompt_tokens * 3.0 + spent.completion_tokens * 15.0) / 1_000_000
    assert result.usage == spent
    assert result.model_dump(mode="json")["cost"] == {"usd": dollars}
    assert f"about ${dollars:.4f}" in render(result, "text")
    assert f"about ${dollars:.4f}" in render(result, "markdown")
    assert (
        metrics.registry.get_sample_value(COST, {"termination_reason": "final_review"}) == dollars
    )


def test_one_price_counts_the_other_kind_of_token_as_free() -> None:
    usage = Usage(prompt_tokens=2_000_000, completion_tokens=1_000_000, total_tokens=3_000_000)
    only_input = estimated_cost(usage, 0.5, None)
    only_output = estimated_cost(usage, None, 2.0)
    assert only_input is not None
    assert only_output is not None
    assert (only_input.usd, only_output.usd) == (1.0, 2.0)
    assert estimated_cost(usage, None, None) is None


def test_a_review_that_ends_with_an_error_counts_what_it_spent(
    small: tuple[GitRepo, str, str],
) -> None:
    # A failed review still has a cost: two turns spent, then a final review the checks
    # refuse (not JSON).
    path, base, head = small
    model = ScriptedModel(
        tool_turn([("c1", "read_repository_file", {"path": PATH})]), stop_turn("not json")
    )
    settings = load_settings(
        opencode_api_key=PROVIDER_KEY,
        review_price_input_per_mtok=3.0,
        review_price_output_per_mtok=15.0,
    )
    metrics = Metrics()
    with pytest.raises(InvalidModelResponse) as raised:
        asyncio.run(
            run_review(
                LocalTarget(path.path, base, head),
                settings,
                ReviewOptions(model=model, metrics=metrics),
            )
        )
    spent = USAGE + USAGE
    assert raised.value.run is not None
    assert raised.value.run.usage == spent
    assert raised.value.to_body()["error"] == {  # the wire's error document is section 5's
        "code": "invalid_model_response",
        "message": "The final review was not valid JSON. REVIEW_REPAIR_ATTEMPTS=1 gives the model "
        "one turn to correct it (REVIEW_PROFILE=local sets both).",
    }
    dollars = (spent.prompt_tokens * 3.0 + spent.completion_tokens * 15.0) / 1_000_000
    reason = {"termination_reason": "invalid_model_response"}
    assert metrics.registry.get_sample_value(COST, reason) == dollars
