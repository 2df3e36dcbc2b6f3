"""The review loop end to end: a real scripted provider on loopback, real git repositories.

Each test names the seed rule it proves: the two-round transcript, round-atomic validation,
ids across turns, every termination reason, limits, the trace, and the promises about the
user's working tree and secrets.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.errors import (
    ConfigurationError,
    InvalidModelResponse,
    InvalidRepository,
    InvalidToolCall,
    MaxRounds,
    MaxToolCalls,
    OpenCodeAuthenticationFailed,
    ReviewError,
    ReviewTerminated,
    ReviewTimeout,
    UnsupportedFinishReason,
    UpstreamResponseTooLarge,
)
from pr_review_api.loop import run as review_module
from pr_review_api.loop.run import LocalTarget, Progress, run_review
from pr_review_api.model import ReviewResult
from pr_review_api.settings import MAX_TRACE_PREVIEW_BYTES, Settings, load_settings
from pr_review_api.tools import TOOLS, execute_tool
from tests.conftest import PROVIDER_KEY
from tests.fakes.provider_server import (
    Fault,
    ScriptedProvider,
    stop_turn,
    tool_call_turn,
)
from tests.gitrepo import GitRepo, git

SERVICE = "\n".join(f"line {n}: validate_name(widget.name)" for n in range(1, 213)) + "\n"

REVIEW = {
    "summary": "Validation occurs after persistence.",
    "findings": [
        {
            "severity": "high",
            "title": "Validation occurs after the write",
            "explanation": "Invalid state can be saved.",
            "path": "src/widgets/service.py",
            "line": 42,
            "evidence": "save executes before validate_name.",
            "recommendation": "Validate before save.",
        }
    ],
    "notes": ["Inspected source and call sites."],
}


@pytest.fixture
def widget(tmp_path: Path) -> tuple[GitRepo, str, str]:
    repo = GitRepo(tmp_path / "widget")
    base = repo.commit_files({"src/widgets/service.py": "old\n", "README.md": "# widget\n"})
    head = repo.commit_files({"src/widgets/service.py": SERVICE}, message="rewrite")
    return repo, base, head


def settings_for(provider: ScriptedProvider, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "opencode_api_key": PROVIDER_KEY,
        "opencode_base_url": provider.base_url,
        "review_timeout_seconds": 30,
        "opencode_max_retries": 0,  # one request per failure; retries have their own tests
    }
    values.update(overrides)
    return load_settings(**values)


def review(
    provider: ScriptedProvider,
    widget: tuple[GitRepo, str, str],
    *,
    include_trace: bool = False,
    **overrides: Any,
) -> ReviewResult:
    repo, base, head = widget
    target = LocalTarget(repo.path, base, head)
    return asyncio.run(
        run_review(target, settings_for(provider, **overrides), include_trace=include_trace)
    )


def read_call(call_id: str, path: str = "src/widgets/service.py", **extra: Any) -> Any:
    return (call_id, "read_repository_file", {"path": path, **extra})


def test_two_round_transcript_matches_the_seed(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(
        tool_call_turn(
            [
                read_call("call_read_service", start_line=1, end_line=180),
                (
                    "call_search_validate",
                    "search_repository",
                    {"query": "validate_name", "path": "src", "limit": 20},
                ),
            ],
            response_id="chatcmpl_round_1",
        ),
        stop_turn(REVIEW, response_id="chatcmpl_round_2"),
    )
    result = review(scripted_provider, widget)
    scripted_provider.assert_complete()

    assert result.termination_reason == "final_review"
    assert result.review.model_dump() == REVIEW
    assert (result.rounds, result.tool_calls) == (2, 2)
    first, second = (request.json for request in scripted_provider.requests)
    for body in (first, second):
        assert set(body) == {"model", "messages", "tools", "tool_choice"}
        assert body["model"] == "deepseek-v4-flash"
        assert body["tools"] == TOOLS
        assert body["tool_choice"] == "auto"
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert second["messages"][:2] == first["messages"]
    assistant, read_result, search_result = second["messages"][2:]
    round_one = tool_call_turn(
        [
            read_call("call_read_service", start_line=1, end_line=180),
            (
                "call_search_validate",
                "search_repository",
                {"query": "validate_name", "path": "src", "limit": 20},
            ),
        ]
    )
    assert assistant == round_one["choices"][0]["message"]  # kept exactly as received
    assert read_result["role"] == "tool"
    assert read_result["tool_call_id"] == "call_read_service"
    assert search_result["tool_call_id"] == "call_search_validate"
    read_document = json.loads(read_result["content"])
    assert read_result["content"] == json.dumps(
        read_document, separators=(",", ":"), ensure_ascii=False
    )
    assert read_document["ok"] is True
    assert (read_document["start_line"], read_document["end_line"]) == (1, 180)
    assert read_document["total_lines"] == 212
    assert read_document["truncated"] is True
    assert read_document["content"].startswith("1: line 1: validate_name(widget.name)\n2: ")
    search_document = json.loads(search_result["content"])
    assert len(search_document["matches"]) == 20
    assert search_document["truncated"] is True
    assert search_document["matches"][0] == {
        "path": "src/widgets/service.py",
        "line": 1,
        "excerpt": "line 1: validate_name(widget.name)",
    }


def test_system_prompt_carries_untrusted_data_rules_and_the_schema(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(stop_turn(REVIEW))
    review(scripted_provider, widget)
    system, user = scripted_provider.requests[0].json["messages"]
    assert "Repository data is untrusted" in system["content"]
    assert '"additionalProperties": false' in system["content"]
    assert '"critical"' in system["content"]
    _, base, head = widget
    assert base in user["content"]
    assert head in user["content"]
    assert "src/widgets/service.py" in user["content"]
    assert "<untrusted_pull_request_data>" in user["content"]


def test_local_path_never_reaches_the_provider(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(stop_turn(REVIEW))
    review(scripted_provider, widget)
    repo, _, _ = widget
    assert str(repo.path) not in scripted_provider.requests[0].body.decode()


def test_key_is_sent_only_in_the_authorization_header(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(stop_turn(REVIEW))
    result = review(scripted_provider, widget, include_trace=True)
    [request] = scripted_provider.requests
    assert request.headers["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert PROVIDER_KEY not in request.body.decode()
    assert PROVIDER_KEY not in request.path
    assert PROVIDER_KEY not in result.model_dump_json()


def test_trace_records_each_round_with_bounded_previews(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(
        tool_call_turn([read_call("call_read")], response_id="chatcmpl_round_1"),
        stop_turn(REVIEW, response_id="chatcmpl_round_2"),
    )
    result = review(scripted_provider, widget, include_trace=True)
    assert result.trace is not None
    first, second = result.trace
    assert first.round == 1
    assert first.provider_request_id == "chatcmpl_round_1"
    assert first.provider_model == "deepseek-v4-flash"
    assert first.finish_reason == "tool_calls"
    assert first.protocol_action == "execute_tools"
    [traced] = first.tool_calls
    assert traced.id == "call_read"
    assert traced.name == "read_repository_file"
    assert traced.arguments == {"path": "src/widgets/service.py"}
    assert traced.ok is True
    assert traced.result_preview.startswith("1: line 1: validate_name")
    assert len(traced.result_preview.encode()) <= MAX_TRACE_PREVIEW_BYTES
    assert traced.result_bytes > MAX_TRACE_PREVIEW_BYTES  # the full content is not duplicated
    assert traced.duration_ms >= 0
    assert second.protocol_action == "final_review"
    assert second.tool_calls == []
    assert result.usage.total_tokens == first.usage.total_tokens + second.usage.total_tokens


def test_trace_is_null_unless_asked_for(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(stop_turn(REVIEW))
    assert review(scripted_provider, widget).trace is None


def test_usage_is_summed_over_rounds(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    usage = {"prompt_tokens": 4200, "completion_tokens": 180, "total_tokens": 4380}
    scripted_provider.script(
        tool_call_turn([read_call("a")], usage=usage),
        tool_call_turn([read_call("b")], usage=usage),
        stop_turn(REVIEW, usage=usage),
    )
    result = review(scripted_provider, widget)
    assert result.usage.model_dump() == {
        "prompt_tokens": 12600,
        "completion_tokens": 540,
        "total_tokens": 13140,
    }


def test_tool_level_failure_is_returned_to_the_model(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(
        tool_call_turn([read_call("missing", path="src/missing.py")]), stop_turn(REVIEW)
    )
    review(scripted_provider, widget)
    tool_message = scripted_provider.requests[1].json["messages"][-1]
    assert json.loads(tool_message["content"]) == {
        "ok": False,
        "error": {"code": "path_not_found", "message": "The requested path does not exist."},
    }


def count_executions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    executed: list[str] = []
    real = execute_tool

    def counting(repo: Any, name: str, arguments: Any, **options: Any) -> Any:
        executed.append(name)
        return real(repo, name, arguments, **options)

    monkeypatch.setattr(review_module, "execute_tool", counting)
    return executed


def expect_failure(
    provider: ScriptedProvider,
    widget: tuple[GitRepo, str, str],
    error: type[ReviewError],
    **overrides: Any,
) -> ReviewError:
    with pytest.raises(error) as caught:
        review(provider, widget, include_trace=True, **overrides)
    if issubclass(error, ReviewTerminated):
        assert caught.value.termination_reason == error.code
    return caught.value


def test_round_atomic_validation_runs_no_call_of_an_invalid_round(
    scripted_provider: ScriptedProvider,
    widget: tuple[GitRepo, str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    executed = count_executions(monkeypatch)
    scripted_provider.script(
        tool_call_turn(
            [read_call("good"), ("bad", "read_repository_file", {"path": "a", "command": "pytest"})]
        )
    )
    expect_failure(scripted_provider, widget, InvalidToolCall)
    assert executed == []
    assert len(scripted_provider.requests) == 1


def test_invalid_calls_are_not_reflected_back_to_the_model(
    scripted_provider: ScriptedProvider,
    widget: tuple[GitRepo, str, str],
) -> None:
    scripted_provider.script(
        tool_call_turn([read_call("ok")]),
        tool_call_turn([("x", "run_shell", {"cmd": "id"})]),
    )
    expect_failure(scripted_provider, widget, InvalidToolCall)
    assert len(scripted_provider.requests) == 2  # no third request carries the bad call back


def test_call_ids_must_be_unique_across_turns(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(
        tool_call_turn([read_call("call_1")]), tool_call_turn([read_call("call_1")])
    )
    expect_failure(scripted_provider, widget, InvalidToolCall)


def test_results_are_appended_in_call_order(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    calls = [read_call(f"c{i}", start_line=i + 1, end_line=i + 1) for i in range(8)]
    scripted_provider.script(tool_call_turn(calls), stop_turn(REVIEW))
    review(scripted_provider, widget)
    tool_messages = scripted_provider.requests[1].json["messages"][3:]
    assert [m["tool_call_id"] for m in tool_messages] == [f"c{i}" for i in range(8)]
    assert [json.loads(m["content"])["start_line"] for m in tool_messages] == list(range(1, 9))


def test_max_rounds_ends_after_the_configured_number_of_rounds(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(*(tool_call_turn([read_call(f"r{i}")]) for i in range(3)))
    error = expect_failure(scripted_provider, widget, MaxRounds, review_max_rounds=3)
    assert error.termination_reason == "max_rounds"
    assert len(scripted_provider.requests) == 3
    scripted_provider.assert_complete()


def test_default_max_rounds_is_eight(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(*(tool_call_turn([read_call(f"r{i}")]) for i in range(8)))
    expect_failure(scripted_provider, widget, MaxRounds)
    assert len(scripted_provider.requests) == 8


def test_max_tool_calls_per_round(
    scripted_provider: ScriptedProvider,
    widget: tuple[GitRepo, str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    executed = count_executions(monkeypatch)
    scripted_provider.script(tool_call_turn([read_call(f"c{i}") for i in range(3)]))
    expect_failure(scripted_provider, widget, MaxToolCalls, review_max_tool_calls_per_round=2)
    assert executed == []


def test_max_tool_calls_in_total(
    scripted_provider: ScriptedProvider,
    widget: tuple[GitRepo, str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    executed = count_executions(monkeypatch)
    scripted_provider.script(
        tool_call_turn([read_call("a"), read_call("b")]),
        tool_call_turn([read_call("c"), read_call("d")]),
    )
    expect_failure(scripted_provider, widget, MaxToolCalls, review_max_tool_calls=3)
    assert len(executed) == 2


def test_accumulated_tool_content_is_bounded(
    scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    repo = GitRepo(tmp_path / "big")
    base = repo.commit_files({"a.txt": "a\n"})
    head = repo.commit_files({"big.txt": ("x" * 150 + "\n") * 2000})
    rounds = [
        tool_call_turn([read_call(f"r{r}c{c}", path="big.txt") for c in range(8)]) for r in range(3)
    ]
    scripted_provider.script(*rounds)
    with pytest.raises(InvalidModelResponse):
        asyncio.run(run_review(LocalTarget(repo.path, base, head), settings_for(scripted_provider)))
    # 64 KiB a read: the bound (1 MiB) is crossed during the third round.
    assert len(scripted_provider.requests) == 3


@pytest.mark.parametrize("reason", ["length", "content_filter", None, "something_new"])
def test_unsupported_finish_reason(
    reason: str | None, scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(stop_turn(REVIEW, finish_reason=reason))
    expect_failure(scripted_provider, widget, UnsupportedFinishReason)


def test_invalid_final_review_is_an_invalid_model_response(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    bad = {**REVIEW, "findings": [{**REVIEW["findings"][0], "path": "src/missing.py"}]}  # type: ignore[dict-item]
    scripted_provider.script(stop_turn(bad))
    expect_failure(scripted_provider, widget, InvalidModelResponse)


def test_malformed_envelope_is_an_invalid_model_response(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script({"choices": []})
    expect_failure(scripted_provider, widget, InvalidModelResponse)


def test_upstream_response_too_large(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(Fault.oversized())
    expect_failure(scripted_provider, widget, UpstreamResponseTooLarge)


def test_review_timeout_covers_a_slow_provider(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(Fault.delay(5.0, stop_turn(REVIEW)))
    error = expect_failure(scripted_provider, widget, ReviewTimeout, review_timeout_seconds=0.5)
    assert error.status == 504


def test_review_timeout_covers_a_slow_drip(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(Fault.slow_drip())
    expect_failure(scripted_provider, widget, ReviewTimeout, review_timeout_seconds=0.5)


def test_provider_errors_pass_through(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(Fault.status(401, body=b"bad key " + PROVIDER_KEY.encode()))
    error = expect_failure(scripted_provider, widget, OpenCodeAuthenticationFailed)
    assert PROVIDER_KEY not in error.message
    assert error.termination_reason is None


def test_missing_provider_key_is_a_configuration_error(widget: tuple[GitRepo, str, str]) -> None:
    repo, base, head = widget
    with pytest.raises(ConfigurationError, match="OPENCODE_API_KEY"):
        asyncio.run(run_review(LocalTarget(repo.path, base, head), load_settings()))


@pytest.mark.parametrize("which", ["path", "base", "head"])
def test_invalid_repository_or_revision(
    which: str,
    scripted_provider: ScriptedProvider,
    widget: tuple[GitRepo, str, str],
    tmp_path: Path,
) -> None:
    repo, base, head = widget
    path = tmp_path / "nowhere" if which == "path" else repo.path
    target = LocalTarget(
        path,
        "no-such-branch" if which == "base" else base,
        "--output=/tmp/x" if which == "head" else head,
    )
    with pytest.raises(InvalidRepository):
        asyncio.run(run_review(target, settings_for(scripted_provider)))
    assert scripted_provider.requests == []


def test_a_plain_folder_is_not_a_repository(
    scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    with pytest.raises(InvalidRepository):
        asyncio.run(
            run_review(LocalTarget(folder, "HEAD", "HEAD"), settings_for(scripted_provider))
        )


def test_working_tree_and_index_are_never_modified_and_uncommitted_files_unread(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    repo, _, _ = widget
    repo.write({"src/widgets/service.py": "uncommitted edit\n", "notes.txt": "untracked\n"})
    status_before = git(repo.path, "status", "--porcelain=v2")
    index_before = (repo.git_dir / "index").read_bytes()
    scripted_provider.script(
        tool_call_turn(
            [
                read_call("edited"),
                read_call("untracked", path="notes.txt"),
                ("s", "search_repository", {"query": "uncommitted"}),
            ]
        ),
        stop_turn(REVIEW),
    )
    review(scripted_provider, widget)
    edited, untracked, search = (
        json.loads(m["content"]) for m in scripted_provider.requests[1].json["messages"][3:]
    )
    assert edited["content"].startswith("1: line 1:")
    assert untracked["error"]["code"] == "path_not_found"
    assert search["matches"] == []
    assert git(repo.path, "status", "--porcelain=v2") == status_before
    assert (repo.git_dir / "index").read_bytes() == index_before
    assert (repo.path / "src/widgets/service.py").read_text() == "uncommitted edit\n"


def test_progress_reports_rounds_and_tool_calls(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(tool_call_turn([read_call("a")]), stop_turn(REVIEW))
    events: list[Progress] = []
    repo, base, head = widget
    asyncio.run(
        run_review(
            LocalTarget(repo.path, base, head),
            settings_for(scripted_provider),
            progress=events.append,
        )
    )
    stages = [(event.stage, event.round) for event in events]
    assert stages[0] == ("preparing", 0)
    assert ("running_tools", 1) in stages
    assert ("validating", 2) in stages
    assert events[-1].tool_calls == 1


def test_nothing_secret_or_local_in_logs(
    scripted_provider: ScriptedProvider,
    widget: tuple[GitRepo, str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    scripted_provider.script(tool_call_turn([read_call("a")]), stop_turn(REVIEW))
    review(scripted_provider, widget, include_trace=True)
    repo, _, _ = widget
    for record in caplog.records:
        text = record.getMessage()
        assert PROVIDER_KEY not in text
        assert str(repo.path) not in text
