"""The `pr-review` commands (cli/commands.py): help, usage and configuration errors, reviews
against the scripted provider, the shell around `run_review`, and interrupts.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from pr_review_api import __version__, errors
from pr_review_api.cli import commands as cli
from pr_review_api.loop.final_review import review_schema_json
from pr_review_api.loop.workspace import ChangeTarget, LocalTarget
from pr_review_api.model import ReviewResult
from pr_review_api.output.json import render_json
from pr_review_api.service.app import create_app
from pr_review_api.service.dependencies import get_reviewer
from pr_review_api.settings import load_settings
from pr_review_api.tools import TOOLS
from tests.cli.support import CONSOLE_SCRIPT, FakeRunReview, assert_one_error_line, run
from tests.conftest import PROVIDER_KEY
from tests.environment import Environment, review_variables
from tests.fakes.provider_server import Fault, ScriptedProvider, stop_turn, tool_call_turn
from tests.gitrepo import GitRepo
from tests.results import PR_URL, review_result
from tests.results import SERVICE_REVIEW as REVIEW


@pytest.fixture
def provider_env(scripted_provider: ScriptedProvider, environment: Environment) -> ScriptedProvider:
    """The scripted provider, configured through the environment as a user would (one request
    per scripted fault)."""
    environment(scripted_provider, retries=0, timeout=30)
    return scripted_provider


def local_args(widget: tuple[GitRepo, str, str], *extra: str) -> list[str]:
    repo, base, head = widget
    return ["review", "--repo", str(repo.path), "--base", base, "--head", head, *extra]


# --- commands and help -----------------------------------------------------------------------


def test_help_lists_the_three_commands() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for command in ("review", "serve", "schema"):
        assert f"\n  {command} " in result.stdout


def test_version() -> None:
    result = run("--version")
    assert result.exit_code == 0
    assert result.stdout == f"pr-review, version {__version__}\n"


def test_review_help_states_the_exit_statuses_and_formats() -> None:
    result = run("review", "--help")
    assert result.exit_code == 0
    assert "[text|json|markdown|sarif]" in result.stdout
    assert "0  a validated final review was printed" in result.stdout
    assert "2  bad input or configuration" in result.stdout


def test_schema_tools_prints_exactly_the_tools_value() -> None:
    result = run("schema", "tools")
    assert result.exit_code == 0
    assert result.stdout == json.dumps(TOOLS, indent=2) + "\n"
    assert json.loads(result.stdout) == TOOLS


def test_schema_review_prints_the_final_review_schema() -> None:
    result = run("schema", "review")
    assert result.exit_code == 0
    assert result.stdout == review_schema_json() + "\n"


def test_schema_of_something_else_is_a_usage_error() -> None:
    result = run("schema", "prompts")
    assert result.exit_code == 2
    assert "Traceback" not in result.output


# --- usage and configuration errors -----------------------------------------------------------

USAGE_ERRORS = [
    (["review"], "give a pull request URL"),
    (["review", PR_URL, "--repo", "."], "either PR_URL or --repo"),
    (["review", "--repo", "."], "--repo needs both --base and --head"),
    (["review", "--repo", ".", "--base", "main"], "--repo needs both --base and --head"),
    (["review", PR_URL, "--base", "main"], "--base and --head go with --repo"),
    (["review", PR_URL, "--format", "html"], "'html' is not one of"),
]


@pytest.mark.parametrize(("args", "message"), USAGE_ERRORS)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_usage_error_with_json_format_prints_an_invalid_request_body() -> None:
    result = run("review", PR_URL, "--repo", ".", "--format", "json")
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert document["error"]["code"] == "invalid_request"
    assert document["termination_reason"] is None
    assert document["trace"] is None


def test_missing_provider_key_is_a_configuration_error() -> None:
    result = run("review", PR_URL)
    assert result.exit_code == 2
    line = assert_one_error_line(result, "configuration_error")
    assert "OPENCODE_API_KEY" in line
    assert ".env" in line  # how to fix it


def test_configuration_error_with_json_format_prints_the_error_body() -> None:
    result = run("review", PR_URL, "--format", "json")
    assert result.exit_code == 2
    assert result.stderr == ""
    document = json.loads(result.stdout)
    assert document["error"]["code"] == "configuration_error"
    assert set(document) == {"error", "termination_reason", "trace"}


def test_an_invalid_setting_names_the_variable_but_not_its_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENCODE_API_KEY", PROVIDER_KEY)
    monkeypatch.setenv("OPENCODE_BASE_URL", "ftp://user:URL-SECRET@example.com")
    result = run("review", PR_URL)
    assert result.exit_code == 2
    line = assert_one_error_line(result, "configuration_error")
    assert "OPENCODE_BASE_URL" in line
    assert "URL-SECRET" not in result.output


def test_settings_come_from_dotenv_in_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("REVIEW_MAX_ROUNDS=not-a-number\n")
    result = run("review", PR_URL)
    assert result.exit_code == 2
    assert "REVIEW_MAX_ROUNDS" in assert_one_error_line(result, "configuration_error")


@pytest.mark.parametrize(
    "url",
    [
        "https://gitlab.com/acme/widget/pull/7",
        "https://github.com/acme/widget/pull/0",
        "https://github.com/acme/widget/issues/7",
        "not a url",
    ],
)
def test_invalid_pull_request_url_exits_2(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENCODE_API_KEY", PROVIDER_KEY)
    result = run("review", url)
    assert result.exit_code == 2
    assert_one_error_line(result, "invalid_pull_request_url")


def test_repo_that_is_not_a_repository_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCODE_API_KEY", PROVIDER_KEY)
    for path in (tmp_path / "missing", tmp_path):
        result = run("review", "--repo", str(path), "--base", "a", "--head", "b")
        assert result.exit_code == 2
        assert_one_error_line(result, "invalid_repository")
        assert str(tmp_path) not in result.output


def test_revision_that_is_not_a_commit_exits_2(
    widget: tuple[GitRepo, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCODE_API_KEY", PROVIDER_KEY)
    repo, base, _ = widget
    result = run("review", "--repo", str(repo.path), "--base", base, "--head", "no-such-rev")
    assert result.exit_code == 2
    assert_one_error_line(result, "invalid_repository")


# --- reviews against the scripted provider ---------------------------------------------------


def test_a_local_review_prints_text_and_exits_0(
    widget: tuple[GitRepo, str, str], provider_env: ScriptedProvider
) -> None:
    provider_env.script(
        tool_call_turn([("call_1", "read_repository_file", {"path": "src/service.py"})]),
        stop_turn(REVIEW),
    )
    result = run(*local_args(widget))
    assert result.exit_code == 0, result.output
    provider_env.assert_complete()
    assert result.stderr == ""  # no progress: stderr is not a terminal
    repo, base, head = widget
    # The header names the path and the two revisions as given (docs/output-formats.md).
    assert result.stdout.startswith(f"Review of {repo.path} ({base}..{head})\n")
    assert "src/service.py:2  Validation occurs after the write" in result.stdout
    assert "\x1b[" not in result.stdout  # no colour: stdout is not a terminal
    assert "2 rounds · 1 tool call" in result.stdout


def test_json_format_prints_the_success_document(
    widget: tuple[GitRepo, str, str], provider_env: ScriptedProvider
) -> None:
    provider_env.script(stop_turn(REVIEW))
    result = run(*local_args(widget, "--format", "json", "--trace"))
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    parsed = ReviewResult.model_validate(document)
    assert result.stdout == render_json(parsed.model_dump(mode="json")) + "\n"
    assert document["pull_request"] is None
    assert document["revisions"]["head_sha"] == widget[2]
    assert document["review"] == REVIEW
    assert [turn["protocol_action"] for turn in document["trace"]] == ["final_review"]


def test_json_without_trace_has_null_trace(
    widget: tuple[GitRepo, str, str], provider_env: ScriptedProvider
) -> None:
    provider_env.script(stop_turn(REVIEW))
    result = run(*local_args(widget, "--format", "json"))
    assert json.loads(result.stdout)["trace"] is None


def test_markdown_and_sarif_formats(
    widget: tuple[GitRepo, str, str], provider_env: ScriptedProvider
) -> None:
    provider_env.script(stop_turn(REVIEW), stop_turn(REVIEW))
    markdown = run(*local_args(widget, "--format", "markdown"))
    sarif = run(*local_args(widget, "--format", "sarif"))
    assert markdown.exit_code == sarif.exit_code == 0
    assert markdown.stdout.startswith("## pr-review: a local repository\n")
    document = json.loads(sarif.stdout)
    assert document["version"] == "2.1.0"
    [finding] = document["runs"][0]["results"]
    location = finding["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "src/service.py"
    assert location["region"]["startLine"] == 2


def test_a_review_that_ends_without_a_final_review_exits_1(
    widget: tuple[GitRepo, str, str], provider_env: ScriptedProvider
) -> None:
    provider_env.script(stop_turn(REVIEW, finish_reason="length"))
    result = run(*local_args(widget))
    assert result.exit_code == 1
    line = assert_one_error_line(result, "unsupported_finish_reason")
    assert line == f"error: {errors.UnsupportedFinishReason.default_message} " + (
        "(unsupported_finish_reason)"
    )


def test_json_failure_prints_the_api_error_body_with_the_termination_reason(
    widget: tuple[GitRepo, str, str], provider_env: ScriptedProvider
) -> None:
    provider_env.script(stop_turn(REVIEW, finish_reason="content_filter"))
    result = run(*local_args(widget, "--format", "json", "--trace"))
    assert result.exit_code == 1
    assert result.stderr == ""
    assert json.loads(result.stdout) == {
        "error": {
            "code": "unsupported_finish_reason",
            "message": errors.UnsupportedFinishReason.default_message,
        },
        "termination_reason": "unsupported_finish_reason",
        "trace": None,
    }


def test_provider_failures_exit_1_without_provider_text(
    widget: tuple[GitRepo, str, str], provider_env: ScriptedProvider
) -> None:
    provider_env.script(Fault.rate_limited("9", body=b"PROVIDER-BODY-SECRET"))
    result = run(*local_args(widget, "--format", "json"))
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["error"]["code"] == "opencode_rate_limited"
    assert document["error"]["retry_after"] == 9
    assert "PROVIDER-BODY-SECRET" not in result.output
    assert PROVIDER_KEY not in result.output


@pytest.mark.usefixtures("with_key")
def test_the_pull_request_url_and_trace_flag_reach_run_review(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeRunReview(review_result())
    monkeypatch.setattr(cli, "run_review", fake)
    assert run("review", PR_URL, "--trace").exit_code == 0
    assert fake.calls[0]["target"] == ChangeTarget(PR_URL)
    assert fake.calls[0]["include_trace"] is True
    assert fake.calls[0]["progress"] is None  # stderr is not a terminal


@pytest.mark.usefixtures("with_key")
def test_a_local_target_is_passed_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeRunReview(review_result(pull_request=False))
    monkeypatch.setattr(cli, "run_review", fake)
    assert run("review", "--repo", "some/dir", "--base", "v1", "--head", "v2").exit_code == 0
    assert fake.calls[0]["target"] == LocalTarget(Path("some/dir"), "v1", "v2")
    assert fake.calls[0]["include_trace"] is False


@pytest.mark.usefixtures("with_key")
def test_text_is_coloured_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "run_review", FakeRunReview(review_result()))
    assert "\x1b[" not in run("review", PR_URL).stdout
    monkeypatch.setattr(cli, "_is_terminal", lambda stream: stream is sys.stdout)
    assert "\x1b[" in run("review", PR_URL).stdout
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in run("review", PR_URL).stdout


@pytest.mark.usefixtures("with_key")
def test_an_unexpected_exception_is_one_line_without_its_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cli, "run_review", FakeRunReview(RuntimeError("LEAKED-SECRET in /home")))
    result = run("review", PR_URL)
    assert result.exit_code == 1
    line = assert_one_error_line(result, "internal_error")
    assert line == "error: An unexpected RuntimeError ended the review. (internal_error)"
    assert "LEAKED-SECRET" not in result.output


@pytest.mark.usefixtures("with_key")
@pytest.mark.parametrize(
    ("error", "status"),
    [
        (errors.InvalidPullRequestUrl(), 2),
        (errors.InvalidRepository(), 2),
        (errors.ConfigurationError(), 2),
        (errors.PullRequestNotFound(), 1),
        (errors.GitHubUnavailable(), 1),
        (errors.OpenCodeAuthenticationFailed(), 1),
        (errors.OpenCodeRateLimited(retry_after=3), 1),
        (errors.OpenCodeUnavailable(), 1),
        (errors.MaxRounds(), 1),
        (errors.MaxToolCalls(), 1),
        (errors.InvalidToolCall(), 1),
        (errors.InvalidModelResponse(), 1),
        (errors.UpstreamResponseTooLarge(), 1),
        (errors.UnsupportedFinishReason(), 1),
        (errors.ReviewTimeout(), 1),
    ],
    ids=lambda value: getattr(value, "code", str(value)),
)
def test_exit_status_of_every_error(
    error: errors.ReviewError, status: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "run_review", FakeRunReview(error))
    text = run("review", PR_URL)
    assert text.exit_code == status
    assert assert_one_error_line(text, error.code) == f"error: {error.message} ({error.code})"
    as_json = run("review", PR_URL, "--format", "json")
    assert as_json.exit_code == status
    assert as_json.stdout == render_json(error.to_body()) + "\n"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.usefixtures("with_key")
async def test_json_output_is_byte_for_byte_the_api_response(
    monkeypatch: pytest.MonkeyPatch, anyio_backend: str
) -> None:
    for outcome in (review_result(trace=True), errors.MaxToolCalls()):

        async def reviewer(*_: Any, outcome: Any = outcome, **__: Any) -> ReviewResult:
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome  # type: ignore[no-any-return]

        app = create_app(load_settings())
        app.dependency_overrides[get_reviewer] = lambda reviewer=reviewer: reviewer
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            response = await client.post(
                "/v1/reviews", json={"pull_request_url": PR_URL, "include_trace": True}
            )
        monkeypatch.setattr(cli, "run_review", FakeRunReview(outcome))
        result = await asyncio.to_thread(run, "review", PR_URL, "--format", "json", "--trace")
        assert result.stdout.encode() == response.content + b"\n"


# --- interrupts ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("with_key")
def test_ctrl_c_exits_130_with_the_interrupted_document(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "run_review", FakeRunReview(KeyboardInterrupt()))
    as_json = run("review", PR_URL, "--format", "json")
    assert as_json.exit_code == 130
    assert json.loads(as_json.stdout) == errors.Interrupted().to_body()
    assert json.loads(as_json.stdout)["error"]["code"] == "interrupted"
    text = run("review", PR_URL)
    assert text.exit_code == 130
    assert assert_one_error_line(text, "interrupted") == (
        "error: The review was interrupted. (interrupted)"
    )


@pytest.mark.e2e
def test_sigint_to_a_real_review_exits_130_with_the_document(
    widget: tuple[GitRepo, str, str], scripted_provider: ScriptedProvider
) -> None:
    repo, base, head = widget
    scripted_provider.script(Fault.delay(5.0, stop_turn(REVIEW)))
    env = {**os.environ, **review_variables(scripted_provider, timeout=30)}
    args = ["review", "--repo", str(repo.path), "--base", base, "--head", head, "--format", "json"]
    # As from a terminal: a suite started in the background of a non-interactive shell runs
    # with SIGINT ignored, which every child inherits (and then rightly ignores Ctrl-C).
    default_sigint = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", default_sigint, str(CONSOLE_SCRIPT), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not scripted_provider.requests:  # the review is waiting for the model
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the review never asked the provider"
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    assert json.loads(stdout) == errors.Interrupted().to_body()
    assert "Traceback" not in stderr
