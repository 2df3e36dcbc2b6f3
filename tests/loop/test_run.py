"""The review loop end to end (loop/run.py): a real scripted provider on loopback, real git
repositories. The seed's transcript, the trace, timeouts, what reaches the provider, and the
promises about the user's working tree and secrets.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from pr_review_api.errors import (
    ConfigurationError,
    InvalidModelResponse,
    InvalidRepository,
    OpenCodeAuthenticationFailed,
    ReviewError,
    ReviewTimeout,
    UnsupportedFinishReason,
    UpstreamResponseTooLarge,
)
from pr_review_api.llm.testing import ScriptedModel
from pr_review_api.loop.run import NO_CHANGES_SUMMARY, Progress, ReviewOptions, run_review
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.settings import MAX_TRACE_PREVIEW_BYTES, load_settings
from pr_review_api.tools import TOOLS
from tests.conftest import PROVIDER_KEY
from tests.fakes.provider_server import Fault, Reply, ScriptedProvider, stop_turn, tool_call_turn
from tests.gitrepo import GitRepo, git
from tests.loop.support import (
    REVIEW,
    expect_failure,
    read_call,
    review,
    scripted_review,
    settings_for,
)


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


@pytest.mark.parametrize("reason", ["length", "content_filter", None, "something_new"])
def test_unsupported_finish_reason(
    reason: str | None, scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(stop_turn(REVIEW, finish_reason=reason))
    expect_failure(scripted_provider, widget, UnsupportedFinishReason)


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
            ReviewOptions(progress=events.append),
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


# --- no changes, no tokens (specification §5) ---------------------------------------------------


def test_no_changes_makes_no_request(scripted_provider: ScriptedProvider, tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "same")
    base = repo.commit_files({"a.py": "x\n"})
    head = repo.commit_files({}, message="empty commit, same tree")
    target = LocalTarget(repo.path, base, head)
    result = asyncio.run(
        run_review(target, settings_for(scripted_provider), ReviewOptions(include_trace=True))
    )
    assert scripted_provider.requests == []
    document = result.model_dump(mode="json")
    assert document["termination_reason"] == "no_changes"
    assert document["review"] == {"summary": NO_CHANGES_SUMMARY, "findings": [], "notes": []}
    assert document["rounds"] == 0
    assert document["tool_calls"] == 0
    assert document["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    assert document["trace"] == []


def test_no_changes_when_head_is_the_merge_base(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "behind")
    first = repo.commit_files({"a.py": "x\n"})
    second = repo.commit_files({"a.py": "y\n"})
    model = ScriptedModel()
    result = scripted_review(model, (repo, second, first))  # head is an ancestor of base
    model.assert_complete()
    assert result.termination_reason == "no_changes"


# --- which option named no commit --------------- ----------------------------------------


@pytest.mark.parametrize("option", ["--base", "--head"])
def test_a_revision_that_names_no_commit_says_which_option_and_what_was_given(
    option: str, widget: tuple[GitRepo, str, str]
) -> None:
    repo, base, head = widget
    bad = "mian\x1b]52;c;eA==\x07" + "x" * 500
    target = LocalTarget(
        repo.path, bad if option == "--base" else base, bad if option == "--head" else head
    )
    with pytest.raises(InvalidRepository) as raised:
        asyncio.run(run_review(target, load_settings(opencode_api_key=PROVIDER_KEY)))
    message = raised.value.message
    assert message.startswith(f'The {option} revision "mian?]52;c;eA==?xxx')
    assert message.endswith('..." does not name a commit in the repository.')
    assert "\x1b" not in message
    assert "\x07" not in message
    assert len(message) < 200


# --- 1e999 from the model --------------- --------------------------------------------------


def test_an_infinite_number_in_the_assistant_message_is_an_invalid_model_response(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    body = json.dumps(tool_call_turn([read_call("a")])).replace(
        '"role": "assistant"', '"role": "assistant", "score": 1e999'
    )
    scripted_provider.script(
        Reply(headers={"Content-Type": "application/json"}, body=body.encode())
    )
    with pytest.raises(InvalidModelResponse):
        review(scripted_provider, widget)
    assert len(scripted_provider.requests) == 1


# --- OPENCODE_MAX_RETRIES through a whole review (specification §12) -----------------------------


def test_a_500_then_success_completes_the_review(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(
        tool_call_turn([read_call("a")]),
        Fault.status(500, body=b"PROVIDER-BODY"),
        stop_turn(REVIEW),
    )
    result = review(scripted_provider, widget, opencode_max_retries=2)
    scripted_provider.assert_complete()
    assert result.rounds == 2
    assert len(scripted_provider.requests) == 3
    # The retried request is the same conversation, byte for byte.
    assert scripted_provider.requests[1].body == scripted_provider.requests[2].body


def test_a_429_with_a_long_retry_after_ends_the_review_at_once_with_retry_after(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    scripted_provider.script(Fault.rate_limited("30"))
    with pytest.raises(ReviewError) as raised:
        review(scripted_provider, widget, opencode_max_retries=2)
    scripted_provider.assert_complete()
    assert raised.value.to_body() == {
        "error": {
            "code": "opencode_rate_limited",
            "message": "The model provider is rate limiting requests; try again later.",
            "retry_after": 30,
        },
        "termination_reason": None,
        "trace": None,
    }
