"""The `pr-review` command line: commands, output formats, exit statuses, errors, README help.

Most tests use click's CliRunner; the exit statuses are also checked on real processes (the
installed console script and `python -m`), against the scripted provider on loopback.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from click.testing import CliRunner, Result

from pr_review_api import __version__, errors
from pr_review_api.cli import commands as cli
from pr_review_api.loop.final_review import review_schema_json
from pr_review_api.loop.run import LocalTarget, Progress, PullRequestTarget
from pr_review_api.model import ReviewResult, Usage
from pr_review_api.output.formats import render_json
from pr_review_api.service.app import create_app, get_reviewer
from pr_review_api.settings import load_settings
from pr_review_api.tools import TOOLS
from tests.conftest import PROVIDER_KEY
from tests.fakes import provider_server
from tests.fakes.provider_server import Fault, ScriptedProvider, stop_turn, tool_call_turn
from tests.gitrepo import GitRepo
from tests.results import PR_URL, review_result
from tests.results import SERVICE_REVIEW as REVIEW

scripted_provider = provider_server.scripted_provider

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
CONSOLE_SCRIPT = Path(sys.executable).parent / "pr-review"
HELP_BEGIN = "<!-- BEGIN GENERATED HELP: regenerate with "
HELP_END = "<!-- END GENERATED HELP -->"
REGENERATE = "UPDATE_README_HELP=1 uv run pytest tests/cli/test_cli.py -k readme"
HELP_COMMANDS: list[list[str]] = [[], ["review"], ["serve"], ["schema"]]


@pytest.fixture
def widget(repo: GitRepo) -> tuple[GitRepo, str, str]:
    base = repo.commit_files({"src/service.py": "def save(x):\n    store(x)\n"})
    head = repo.commit_files({"src/service.py": "def save(x):\n    store(x)\n    validate(x)\n"})
    return repo, base, head


@pytest.fixture
def provider_env(
    scripted_provider: ScriptedProvider, monkeypatch: pytest.MonkeyPatch
) -> ScriptedProvider:
    """The scripted provider, configured through the environment as a user would."""
    monkeypatch.setenv("OPENCODE_API_KEY", PROVIDER_KEY)
    monkeypatch.setenv("OPENCODE_BASE_URL", scripted_provider.base_url)
    monkeypatch.setenv("REVIEW_TIMEOUT_SECONDS", "30")
    monkeypatch.setenv("OPENCODE_MAX_RETRIES", "0")  # one request per scripted fault
    return scripted_provider


def run(*args: str) -> Result:
    return CliRunner().invoke(cli.main, list(args), prog_name="pr-review")


def local_args(widget: tuple[GitRepo, str, str], *extra: str) -> list[str]:
    repo, base, head = widget
    return ["review", "--repo", str(repo.path), "--base", base, "--head", head, *extra]


def assert_one_error_line(result: Result, code: str) -> str:
    """stderr is exactly `error: <message> (<code>)`, and nothing went to stdout."""
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert lines[0].endswith(f" ({code})")
    assert "Traceback" not in result.output
    return lines[0]


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
    # The header names the path and the two revisions as given (issue 14 item 9).
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


# --- the shell around run_review --------------------------------------------------------------


class FakeRunReview:
    """Replaces run_review inside the CLI."""

    def __init__(self, outcome: ReviewResult | BaseException) -> None:
        self.outcome = outcome
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, target: Any, settings: Any, **kwargs: Any) -> ReviewResult:
        self.calls.append({"target": target, **kwargs})
        progress = kwargs.get("progress")
        if progress is not None:
            progress(Progress("preparing", 0, 0, Usage()))
            progress(Progress("waiting_for_model", 1, 0, Usage(total_tokens=10)))
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


@pytest.fixture
def with_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENCODE_API_KEY", PROVIDER_KEY)


@pytest.mark.usefixtures("with_key")
def test_the_pull_request_url_and_trace_flag_reach_run_review(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeRunReview(review_result())
    monkeypatch.setattr(cli, "run_review", fake)
    assert run("review", PR_URL, "--trace").exit_code == 0
    assert fake.calls[0]["target"] == PullRequestTarget(PR_URL)
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
def test_progress_is_reported_only_when_stderr_is_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeRunReview(review_result())
    monkeypatch.setattr(cli, "run_review", fake)
    monkeypatch.setattr(cli, "_is_terminal", lambda stream: stream is sys.stderr)
    result = run("review", PR_URL, "--format", "json")
    assert result.exit_code == 0
    assert callable(fake.calls[0]["progress"])
    assert json.loads(result.stdout)["termination_reason"] == "final_review"  # stdout stays clean


def test_progress_lines_name_the_round_tool_calls_and_tokens() -> None:
    assert cli.describe_progress(Progress("preparing", 0, 0, Usage())) == (
        "Reviewing: preparing the repository"
    )
    assert cli.describe_progress(Progress("running_tools", 2, 1, Usage(total_tokens=4380))) == (
        "Round 2: running tool calls · 1 tool call · 4,380 tokens"
    )
    assert cli.describe_progress(Progress("waiting_for_model", 3, 5, Usage())) == (
        "Round 3: waiting for the model · 5 tool calls · 0 tokens"
    )


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


def test_sigint_to_a_real_review_exits_130_with_the_document(
    widget: tuple[GitRepo, str, str], scripted_provider: ScriptedProvider
) -> None:
    repo, base, head = widget
    scripted_provider.script(Fault.delay(5.0, stop_turn(REVIEW)))
    env = {
        **os.environ,
        "OPENCODE_API_KEY": PROVIDER_KEY,
        "OPENCODE_BASE_URL": scripted_provider.base_url,
        "REVIEW_TIMEOUT_SECONDS": "30",
    }
    args = ["review", "--repo", str(repo.path), "--base", base, "--head", head, "--format", "json"]
    process = subprocess.Popen(
        [str(CONSOLE_SCRIPT), *args],
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


# --- serve -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.com", False),
        ("localhost.example.com", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert cli.is_loopback(host) is loopback


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[uvicorn.Config]]:
    """Record the server `serve` would run instead of running it."""
    started: list[uvicorn.Config] = []
    monkeypatch.setattr(
        uvicorn.Server, "run", lambda self, sockets=None: started.append(self.config)
    )
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield started
    for handler in root.handlers[:]:  # serve configured the service log: undo it
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)


def test_serve_refuses_a_public_address_without_service_keys(
    no_server: list[uvicorn.Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCODE_API_KEY", PROVIDER_KEY)
    result = run("serve", "--host", "0.0.0.0")
    assert result.exit_code == 2
    assert "PR_REVIEW_API_KEYS" in assert_one_error_line(result, "configuration_error")
    assert no_server == []


def test_serve_refuses_to_start_without_a_provider_key(no_server: list[uvicorn.Config]) -> None:
    result = run("serve")
    assert result.exit_code == 2
    assert "OPENCODE_API_KEY" in assert_one_error_line(result, "configuration_error")
    assert no_server == []


def test_serve_on_loopback_without_keys(
    no_server: list[uvicorn.Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCODE_API_KEY", PROVIDER_KEY)
    result = run("serve", "--port", "8123")
    assert result.exit_code == 0, result.output
    [config] = no_server
    assert (config.host, config.port) == ("127.0.0.1", 8123)
    assert config.access_log is False  # ours replaces uvicorn's, which logs query strings
    assert config.timeout_graceful_shutdown is not None


def test_serve_on_a_public_address_with_keys(
    no_server: list[uvicorn.Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCODE_API_KEY", PROVIDER_KEY)
    monkeypatch.setenv("PR_REVIEW_API_KEYS", "a-service-key")
    result = run("serve", "--host", "0.0.0.0")
    assert result.exit_code == 0, result.output
    assert no_server[0].host == "0.0.0.0"


def test_serve_on_a_port_in_use_is_one_line_and_exit_2(
    no_server: list[uvicorn.Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCODE_API_KEY", PROVIDER_KEY)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("serve", "--port", str(port))
    assert result.exit_code == 2
    line = assert_one_error_line(result, "configuration_error")
    assert f"Port {port} is already in use" in line
    assert no_server == []


def test_the_service_log_keeps_ours_and_drops_third_party_chatter() -> None:
    from pr_review_api.service.server import configure_service_logging

    stream = io.StringIO()
    root = logging.getLogger()
    level = root.level
    handler = configure_service_logging(stream)
    try:
        logging.getLogger("pr_review_api.access").info("method=GET path=/healthz status=200")
        logging.getLogger("pr_review_api.service.server").warning("out of EMFILE")
        logging.getLogger("uvicorn.error").info("Uvicorn running")
        logging.getLogger("httpx").info("HTTP Request: POST https://provider.example/v1/x")
        logging.getLogger("httpcore.connection").debug("connect_tcp.started host=github")
        logging.getLogger("httpx").warning("a third-party warning")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    logged = stream.getvalue()
    assert "path=/healthz" in logged
    assert "out of EMFILE" in logged
    assert "Uvicorn running" in logged
    assert "a third-party warning" in logged
    assert "provider.example" not in logged
    assert "connect_tcp" not in logged


# --- real processes ----------------------------------------------------------------------------


def _process(
    args: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **(env or {})}
    return subprocess.run(
        args, capture_output=True, text=True, env=environment, timeout=120, check=False
    )


def test_console_script_and_module_run(tmp_path: Path) -> None:
    assert CONSOLE_SCRIPT.exists()
    for command in ([str(CONSOLE_SCRIPT)], [sys.executable, "-m", "pr_review_api.cli"]):
        helped = _process([*command, "--help"])
        assert helped.returncode == 0
        assert helped.stdout == run("--help").stdout
        tools = _process([*command, "schema", "tools"])
        assert tools.returncode == 0
        assert json.loads(tools.stdout) == TOOLS


def test_exit_statuses_of_a_real_process(
    widget: tuple[GitRepo, str, str], scripted_provider: ScriptedProvider
) -> None:
    repo, base, head = widget
    review = [str(CONSOLE_SCRIPT), "review", "--repo", str(repo.path), "--base", base]
    env = {
        "OPENCODE_API_KEY": PROVIDER_KEY,
        "OPENCODE_BASE_URL": scripted_provider.base_url,
        "REVIEW_TIMEOUT_SECONDS": "30",
    }
    scripted_provider.script(stop_turn(REVIEW), stop_turn(REVIEW, finish_reason="length"))

    ok = _process([*review, "--head", head, "--format", "json"], env)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["review"] == REVIEW
    assert ok.stderr == ""

    ended = _process([*review, "--head", head], env)
    assert ended.returncode == 1
    assert ended.stderr.strip().endswith("(unsupported_finish_reason)")
    assert "Traceback" not in ended.stderr

    usage = _process([*review], env)
    assert usage.returncode == 2

    unconfigured = _process([*review, "--head", head], {"OPENCODE_API_KEY": ""})
    assert unconfigured.returncode == 2
    assert unconfigured.stderr.startswith("error: OPENCODE_API_KEY is not set")
    scripted_provider.assert_complete()


def _build_wheel(out: Path) -> Path:
    """`uv build --wheel` of this project, offline (hatchling comes from uv's cache)."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    root = Path(__file__).resolve().parents[2]
    built = subprocess.run(
        [uv, "build", "--wheel", "--offline", "--out-dir", str(out), str(root)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = out.glob("pr_review_api-*.whl")
    return wheel


def test_the_wheel_carries_every_module_and_file_of_the_package(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path / "dist")
    root = Path(__file__).resolve().parents[2] / "src"
    shipped = {
        path.relative_to(root).as_posix()
        for path in (root / "pr_review_api").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = archive.read("pr_review_api-0.1.0.dist-info/entry_points.txt").decode()
    assert "pr_review_api/py.typed" in names
    assert shipped <= names, sorted(shipped - names)
    assert "pr-review = pr_review_api.cli:main" in entry_points


def test_a_wheel_installed_in_a_fresh_venv_runs_from_anywhere(tmp_path: Path) -> None:
    """What `uv tool install` and `pipx install` do: the wheel in a venv of its own. The
    dependencies come from this project's environment (offline: no test touches the
    network); the package itself must come from the wheel, not from src/."""
    import sysconfig

    wheel = _build_wheel(tmp_path / "dist")
    venv = tmp_path / "tool"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        ["uv", "pip", "install", "--offline", "--no-deps", "--python", str(python), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    # A .pth in the new venv adds this environment's site-packages (its .pth files, such as
    # the editable install of src/, are not processed from there).
    [site] = venv.glob("lib/python*/site-packages")
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    command = venv / "bin" / "pr-review"

    def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(command), *args],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    helped = run_tool("--help")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout == run("--help").stdout
    tools = run_tool("schema", "tools")
    assert tools.returncode == 0, tools.stderr
    assert json.loads(tools.stdout) == TOOLS
    origin = subprocess.run(
        [str(python), "-c", "import pr_review_api; print(pr_review_api.__file__)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(origin.stdout.strip()).is_relative_to(venv)


def test_the_hostile_figures_are_printed_only_with_verbose() -> None:
    """A newcomer's `uv run pytest` is not followed by lines of figures (issue 14 item 8)."""
    root = Path(__file__).resolve().parents[2]
    one = (
        "tests/hostile/test_secret_hygiene.py"
        "::test_the_session_scanner_sees_every_level_and_changes_no_delivery"
    )

    def session(*flags: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *flags, one],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-2000:]
        return done.stdout

    assert "hostile-world figures" not in session("-q")
    assert "hostile-world figures" in session("-v")


# --- the README's copy of the help ------------------------------------------------------------


def generated_help() -> str:
    """The README's help section, as the commands print it today."""
    blocks = []
    for command in HELP_COMMANDS:
        result = run(*command, "--help")
        assert result.exit_code == 0
        shown = " ".join(["pr-review", *command, "--help"])
        blocks.append(f"```console\n$ {shown}\n{result.stdout}```")
    return f"{HELP_BEGIN}`{REGENERATE}` -->\n\n" + "\n\n".join(blocks) + f"\n\n{HELP_END}"


def test_readme_shows_the_current_help_texts() -> None:
    text = README.read_text(encoding="utf-8")
    start = text.index(HELP_BEGIN)
    end = text.index(HELP_END) + len(HELP_END)
    expected = generated_help()
    if os.environ.get("UPDATE_README_HELP") == "1":
        README.write_text(text[:start] + expected + text[end:], encoding="utf-8")
        return
    assert text[start:end] == expected, f"README.md's help is stale: run `{REGENERATE}`"


def test_readme_has_the_two_fresh_machine_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert (
        "python -m pip install uv && uv run --no-dev --locked pr-review review "
        "https://github.com/OWNER/REPO/pull/N" in text
    )
    assert "python -m pip install uv && uv run pytest" in text


def test_readme_configuration_table_names_every_setting() -> None:
    text = README.read_text(encoding="utf-8")
    for name in (
        "OPENCODE_API_KEY",
        "OPENCODE_BASE_URL",
        "OPENCODE_MODEL",
        "GITHUB_TOKEN",
        "GITHUB_SERVER_URL",
        "GITHUB_API_URL",
        "REVIEW_MAX_ROUNDS",
        "REVIEW_MAX_TOOL_CALLS",
        "REVIEW_MAX_TOOL_CALLS_PER_ROUND",
        "REVIEW_TIMEOUT_SECONDS",
        "PR_REVIEW_CACHE_DIR",
        "PR_REVIEW_API_KEYS",
        "PR_REVIEW_MAX_CONCURRENT_REVIEWS",
    ):
        assert f"| `{name}` |" in text, name
