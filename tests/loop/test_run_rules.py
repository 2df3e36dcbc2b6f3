"""The loop's rules (loop/run.py, loop/turn_checks.py, loop/final_review.py), driven in process by
`ScriptedModel`: tool failures go back to the model, round-atomic validation, call ids, the
order of results, and every limit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.errors import (
    InvalidModelResponse,
    InvalidToolCall,
    MaxRounds,
    MaxToolCalls,
    OpenCodeAuthenticationFailed,
    ReviewError,
    ReviewTerminated,
)
from pr_review_api.llm.testing import ScriptedModel, tool_turn
from pr_review_api.llm.testing import stop_turn as scripted_stop
from pr_review_api.loop import engine as engine_module
from pr_review_api.model import Usage
from pr_review_api.tools import execute_tool
from tests.gitrepo import GitRepo
from tests.loop.support import REVIEW, read_call, scripted_review


def expect_model_failure(
    model: ScriptedModel,
    widget: tuple[GitRepo, str, str],
    error: type[ReviewError],
    **overrides: Any,
) -> ReviewError:
    with pytest.raises(error) as caught:
        scripted_review(model, widget, include_trace=True, **overrides)
    if issubclass(error, ReviewTerminated):
        assert caught.value.termination_reason == error.code
    return caught.value


def test_tool_level_failure_is_returned_to_the_model(widget: tuple[GitRepo, str, str]) -> None:
    model = ScriptedModel(
        tool_turn([read_call("missing", path="src/missing.py")]), scripted_stop(REVIEW)
    )
    scripted_review(model, widget)
    tool_message = model.requests[1].messages[-1]
    assert json.loads(tool_message["content"]) == {
        "ok": False,
        "error": {"code": "path_not_found", "message": "The requested path does not exist."},
    }
    model.assert_complete()


def count_executions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count the tools the loop runs (setattr fails loudly if loop/run.py stops naming it)."""
    executed: list[str] = []
    real = execute_tool

    def counting(repo: Any, name: str, arguments: Any, **options: Any) -> Any:
        executed.append(name)
        return real(repo, name, arguments, **options)

    monkeypatch.setattr(engine_module, "execute_tool", counting)
    return executed


def test_round_atomic_validation_runs_no_call_of_an_invalid_round(
    widget: tuple[GitRepo, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    executed = count_executions(monkeypatch)
    model = ScriptedModel(
        tool_turn(
            [read_call("good"), ("bad", "read_repository_file", {"path": "a", "command": "pytest"})]
        )
    )
    expect_model_failure(model, widget, InvalidToolCall)
    assert executed == []
    assert len(model.requests) == 1


def test_invalid_calls_are_not_reflected_back_to_the_model(
    widget: tuple[GitRepo, str, str],
) -> None:
    model = ScriptedModel(
        tool_turn([read_call("ok")]), tool_turn([("x", "run_shell", {"cmd": "id"})])
    )
    expect_model_failure(model, widget, InvalidToolCall)
    assert len(model.requests) == 2  # no third request carries the bad call back


def test_call_ids_must_be_unique_across_turns(widget: tuple[GitRepo, str, str]) -> None:
    model = ScriptedModel(tool_turn([read_call("call_1")]), tool_turn([read_call("call_1")]))
    expect_model_failure(model, widget, InvalidToolCall)
    model.assert_complete()


def test_results_are_appended_in_call_order(widget: tuple[GitRepo, str, str]) -> None:
    calls = [read_call(f"c{i}", start_line=i + 1, end_line=i + 1) for i in range(8)]
    model = ScriptedModel(tool_turn(calls), scripted_stop(REVIEW))
    scripted_review(model, widget)
    tool_messages = model.requests[1].messages[3:]
    assert [m["tool_call_id"] for m in tool_messages] == [f"c{i}" for i in range(8)]
    assert [json.loads(m["content"])["start_line"] for m in tool_messages] == list(range(1, 9))


def test_max_rounds_ends_after_the_configured_number_of_rounds(
    widget: tuple[GitRepo, str, str],
) -> None:
    model = ScriptedModel(*(tool_turn([read_call(f"r{i}")]) for i in range(3)))
    error = expect_model_failure(model, widget, MaxRounds, review_max_rounds=3)
    assert error.termination_reason == "max_rounds"
    assert len(model.requests) == 3
    model.assert_complete()


def test_default_max_rounds_is_eight(widget: tuple[GitRepo, str, str]) -> None:
    model = ScriptedModel(*(tool_turn([read_call(f"r{i}")]) for i in range(8)))
    expect_model_failure(model, widget, MaxRounds)
    assert len(model.requests) == 8


def test_max_tool_calls_per_round(
    widget: tuple[GitRepo, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    executed = count_executions(monkeypatch)
    model = ScriptedModel(tool_turn([read_call(f"c{i}") for i in range(3)]))
    expect_model_failure(model, widget, MaxToolCalls, review_max_tool_calls_per_round=2)
    assert executed == []


def test_max_tool_calls_in_total(
    widget: tuple[GitRepo, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    executed = count_executions(monkeypatch)
    model = ScriptedModel(
        tool_turn([read_call("a"), read_call("b")]), tool_turn([read_call("c"), read_call("d")])
    )
    expect_model_failure(model, widget, MaxToolCalls, review_max_tool_calls=3)
    assert len(executed) == 2


def test_accumulated_tool_content_is_bounded(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "big")
    base = repo.commit_files({"a.txt": "a\n"})
    head = repo.commit_files({"big.txt": ("x" * 150 + "\n") * 2000})
    rounds = [
        tool_turn([read_call(f"r{r}c{c}", path="big.txt") for c in range(8)]) for r in range(3)
    ]
    model = ScriptedModel(*rounds)
    with pytest.raises(InvalidModelResponse):
        scripted_review(model, (repo, base, head))
    # 64 KiB a read: the bound (1 MiB) is crossed during the third round.
    assert len(model.requests) == 3


def test_invalid_final_review_is_an_invalid_model_response(
    widget: tuple[GitRepo, str, str],
) -> None:
    bad = {**REVIEW, "findings": [{**REVIEW["findings"][0], "path": "src/missing.py"}]}  # type: ignore[dict-item]
    model = ScriptedModel(scripted_stop(bad))
    expect_model_failure(model, widget, InvalidModelResponse)
    model.assert_complete()


def test_trace_is_null_unless_asked_for(widget: tuple[GitRepo, str, str]) -> None:
    model = ScriptedModel(scripted_stop(REVIEW))
    assert scripted_review(model, widget).trace is None


def test_usage_is_summed_over_rounds(widget: tuple[GitRepo, str, str]) -> None:
    usage = Usage(prompt_tokens=4200, completion_tokens=180, total_tokens=4380)
    model = ScriptedModel(
        tool_turn([read_call("a")], usage=usage),
        tool_turn([read_call("b")], usage=usage),
        scripted_stop(REVIEW, usage=usage),
    )
    result = scripted_review(model, widget)
    assert result.usage.model_dump() == {
        "prompt_tokens": 12600,
        "completion_tokens": 540,
        "total_tokens": 13140,
    }


def test_scripted_model_drives_the_two_round_loop_without_sockets(
    widget: tuple[GitRepo, str, str],
) -> None:
    model = ScriptedModel(tool_turn([read_call("call_1")]), scripted_stop(REVIEW))
    result = scripted_review(model, widget)
    model.assert_complete()
    assert result.rounds == 2
    assert result.tool_calls == 1
    second = model.requests[1].messages
    assert second[2] == model_tool_message("call_1")
    assert second[3]["role"] == "tool"
    assert second[3]["tool_call_id"] == "call_1"


def model_tool_message(call_id: str) -> dict[str, Any]:
    arguments = json.dumps({"path": "src/widgets/service.py"})
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "read_repository_file", "arguments": arguments},
            }
        ],
    }


def test_scripted_model_errors_pass_through_the_loop(widget: tuple[GitRepo, str, str]) -> None:
    model = ScriptedModel(OpenCodeAuthenticationFailed())
    with pytest.raises(OpenCodeAuthenticationFailed):
        scripted_review(model, widget)
    model.assert_complete()


def test_an_infinite_line_in_the_final_review_is_an_invalid_model_response(
    widget: tuple[GitRepo, str, str],
) -> None:
    content = json.dumps(REVIEW).replace('"line": 42', '"line": 1e999')
    model = ScriptedModel(scripted_stop(content))
    with pytest.raises(InvalidModelResponse, match="not valid JSON"):
        scripted_review(model, widget)
