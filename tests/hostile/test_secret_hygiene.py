"""Secret hygiene: the provider key, the GitHub token and the service key never appear in a
response, a trace, a log record, an exception, a process's argument list, or a file in the
cache or temporary folders, whatever the provider and GitHub answer.

Every surface is driven with all three secrets configured and with upstreams that echo them
back (a provider error body quoting the key and the Authorization header, a GitHub error
quoting the token): the review function, the HTTP service on a real socket, and the command
line. `secret_guard` (conftest.py) captures every log record at DEBUG around each test; the
first test also checks that capture itself saw the service's own log lines.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from pr_review_api.cli import commands as cli
from pr_review_api.errors import ConfigurationError, ReviewError
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import ChangeTarget, LocalTarget
from pr_review_api.service.app import create_app
from pr_review_api.settings import Settings, load_settings
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import (
    Fault,
    Reply,
    ScriptedProvider,
    body_reply,
    stop_turn,
    tool_call_turn,
)
from tests.gitrepo import GitRepo
from tests.hostile.support import (
    FIGURES,
    SERVICE_KEY,
    SUITE_SCANNER,
    CapturingHandler,
    SuiteLogScanner,
    audit,
    exception_text,
    leaks,
    live_server,
    scan_tree,
)

ECHO = f"Authorization: Bearer {PROVIDER_KEY}; token {GITHUB_TOKEN}".encode()
REVIEW = {"summary": "fine", "findings": [], "notes": ["checked"]}


def tool_turn() -> dict[str, Any]:
    return tool_call_turn(
        [
            ("c1", "read_repository_file", {"path": "README.md"}),
            ("c2", "search_repository", {"query": "secret"}),
            ("c3", "inspect_git_diff", {}),
            ("c4", "list_repository_files", {}),
        ]
    )


# Provider answers that quote the secrets back; none may reach the user.
ECHOING_FAULTS: dict[str, Reply] = {
    "401": Fault.status(401, body=ECHO),
    "403": Fault.status(403, body=ECHO),
    "429": Fault.rate_limited("3", body=ECHO),
    "500": Fault.status(500, body=ECHO),
    # (Not in a header: httpcore's own DEBUG trace prints response headers verbatim.)
    "302": Fault.status(302, headers={"Location": "http://127.0.0.1:9/"}, body=ECHO),
    "text/html": body_reply(ECHO, content_type="text/html"),
    "not-json": body_reply(ECHO),
    "truncated-json": Fault.truncated_json(stop_turn(ECHO.decode())),
    "reset": Fault.reset_mid_body(stop_turn(ECHO.decode()), after=80),
    "bad-final": body_reply(json.dumps(stop_turn(ECHO.decode())).encode()),
    "bad-tool-call": body_reply(
        json.dumps(tool_call_turn([("c9", "run_shell", {"cmd": ECHO.decode()})])).encode()
    ),
}


@pytest.fixture
def widget(tmp_path: Path) -> LocalTarget:
    repo = GitRepo(tmp_path / "widget")
    base = repo.commit_files({"README.md": "# Widget\n"})
    head = repo.commit_files({"README.md": "# Widget\nsecret handling\n", "a.py": "x = 1\n"})
    return LocalTarget(repo.path, base, head)


@pytest.fixture
def private_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary folder of the test's own, so whatever lands there can be scanned."""
    folder = tmp_path / "tmpdir"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    assert scan_tree(folder) == []


def settings_for(provider: ScriptedProvider, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "opencode_api_key": PROVIDER_KEY,
        "opencode_base_url": provider.base_url,
        "github_token": GITHUB_TOKEN,
        "pr_review_api_keys": SERVICE_KEY,
        "review_timeout_seconds": 30,
    }
    values.update(overrides)
    return load_settings(**values)


def assert_clean(what: str, *texts: str | bytes) -> None:
    for text in texts:
        found = leaks(text)
        assert not found, f"{what}: {found}"
    FIGURES["outputs scanned for secrets"] += len(texts)


def test_capture_sees_the_service_logs_and_no_secret(
    secret_guard: CapturingHandler, widget: LocalTarget, private_temp: Path
) -> None:
    """All logging is captured (the provider's request line is there), and none leaks."""
    with ScriptedProvider() as provider:
        provider.script(tool_turn(), stop_turn(REVIEW))
        result = asyncio.run(
            run_review(widget, settings_for(provider), ReviewOptions(include_trace=True))
        )
    assert result.trace is not None
    assert_clean("review with trace", result.model_dump_json())
    assert any("provider request: status=200" in text for text in secret_guard.texts)
    assert any(text.startswith("DEBUG") for text in secret_guard.texts)
    logging.getLogger("pr_review_api.test").debug("the guard sees %s", "DEBUG records")
    assert any("the guard sees DEBUG records" in text for text in secret_guard.texts)


@pytest.mark.parametrize("fault", sorted(ECHOING_FAULTS))
@pytest.mark.parametrize("after_tools", [False, True], ids=["round-1", "round-2"])
def test_provider_echoes_never_reach_the_caller(
    widget: LocalTarget, private_temp: Path, fault: str, after_tools: bool
) -> None:
    with ScriptedProvider() as provider:
        if after_tools:
            provider.script(tool_turn())
        provider.script(ECHOING_FAULTS[fault])
        with pytest.raises(ReviewError) as raised:
            asyncio.run(
                run_review(widget, settings_for(provider), ReviewOptions(include_trace=True))
            )
        request = provider.requests[-1]
    assert_clean(f"error for {fault}", exception_text(raised.value))
    # The key travels in the Authorization header only: never in the body the provider sees.
    assert request.headers["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert_clean("request body", request.body)
    FIGURES["secret-echoing faults"] += 1


def _publish(server: FakeGitHub) -> str:
    pull = server.pull_request(
        "acme", "widget", 7, base={"README.md": "# W\n"}, head={"a.py": "x = 1\n"}
    )
    return pull.url


def test_pull_request_reviews_keep_the_token_out_of_everything(
    tmp_path: Path, private_temp: Path
) -> None:
    server = FakeGitHub(tmp_path / "github")
    server.require_token = GITHUB_TOKEN
    cache = tmp_path / "cache"
    try:
        url = _publish(server)
        with ScriptedProvider() as provider:
            provider.script(tool_turn(), stop_turn(REVIEW), tool_turn(), stop_turn(REVIEW))
            settings = server.settings(
                cache,
                token=GITHUB_TOKEN,
                opencode_api_key=PROVIDER_KEY,
                opencode_base_url=provider.base_url,
            )
            with audit() as log:
                for _ in range(2):  # a fetch, then a cache hit
                    result = asyncio.run(
                        run_review(ChangeTarget(url), settings, ReviewOptions(include_trace=True))
                    )
                    assert_clean("pull-request review", result.model_dump_json())
        # The token did reach GitHub, on both the API and the git side.
        assert any(r.authorization == f"Bearer {GITHUB_TOKEN}" for r in server.api_requests())
        assert server.git_requests()
        assert all(r.status != 401 for r in server.git_requests())
        for argv, _cwd in log.processes:  # a process listing shows argument vectors
            assert_clean("git argument vector", " ".join(argv))
        assert log.processes

        # GitHub failing while quoting the token back.
        for status in (401, 403, 404, 500):
            server.respond("acme", "widget", 7, status, f"bad credentials {GITHUB_TOKEN}")
            with pytest.raises(ReviewError) as raised:
                asyncio.run(run_review(ChangeTarget(url), settings))
            assert_clean(f"GitHub {status}", exception_text(raised.value))
        # Git refusing the token: the fetch fails, and says nothing of the token.
        server.set_pull("acme", "widget", 8, base_sha="1" * 40, head_sha="2" * 40)
        server.require_token = "another-token"
        with pytest.raises(ReviewError) as raised:
            asyncio.run(run_review(ChangeTarget(url.replace("/7", "/8")), settings))
        assert_clean("git fetch refused", exception_text(raised.value))
    finally:
        server.close()
    assert scan_tree(cache) == [], "the cache folder holds a secret"
    FIGURES["cache folders scanned for secrets"] += 1


def test_the_http_service_never_echoes_a_secret(tmp_path: Path, private_temp: Path) -> None:
    server = FakeGitHub(tmp_path / "github")
    server.require_token = GITHUB_TOKEN
    try:
        url = _publish(server)
        with ScriptedProvider() as provider:
            provider.script(
                tool_turn(), stop_turn(REVIEW), Fault.status(401, body=ECHO), stop_turn(REVIEW)
            )
            settings = server.settings(
                tmp_path / "cache",
                token=GITHUB_TOKEN,
                opencode_api_key=PROVIDER_KEY,
                opencode_base_url=provider.base_url,
                pr_review_api_keys=(SERVICE_KEY,),
            )
            with live_server(create_app(settings), settings) as base, httpx.Client() as client:
                auth = {"Authorization": f"Bearer {SERVICE_KEY}"}
                requests: list[tuple[dict[str, str], Any]] = [
                    (auth, {"pull_request_url": url, "include_trace": True}),  # success
                    (auth, {"pull_request_url": url}),  # provider 401 echoing the key
                    ({"Authorization": f"Bearer {SERVICE_KEY}x"}, {"pull_request_url": url}),
                    ({"Authorization": f"Basic {SERVICE_KEY}"}, {"pull_request_url": url}),
                    (auth, {"pull_request_url": PROVIDER_KEY}),
                    (auth, {"pull_request_url": url, "token": GITHUB_TOKEN}),
                    (auth, {"pull_request_url": url.replace("http://", f"http://{GITHUB_TOKEN}@")}),
                    (
                        auth,
                        {"pull_request_url": f"{url}?access_token={GITHUB_TOKEN}#{PROVIDER_KEY}"},
                    ),
                    (auth, [PROVIDER_KEY, GITHUB_TOKEN]),
                ]
                statuses = []
                for headers, body in requests:
                    response = client.post(
                        f"{base}/v1/reviews", json=body, headers=headers, timeout=60
                    )
                    statuses.append(response.status_code)
                    assert_clean(f"response {response.status_code}", response.text)
                    assert_clean("response headers", json.dumps(dict(response.headers)))
                for path in ("/healthz", "/openapi.json", "/v1/nowhere"):
                    response = client.get(f"{base}{path}", headers=auth)
                    assert_clean(f"GET {path}", response.text)
        # A query or fragment is dropped from a pull-request URL (specification §3).
        assert statuses == [200, 502, 401, 401, 422, 422, 422, 200, 422]
    finally:
        server.close()


def test_the_command_line_never_prints_a_secret(
    widget: LocalTarget, monkeypatch: pytest.MonkeyPatch, private_temp: Path
) -> None:
    with ScriptedProvider() as provider:
        monkeypatch.setenv("OPENCODE_API_KEY", PROVIDER_KEY)
        monkeypatch.setenv("GITHUB_TOKEN", GITHUB_TOKEN)
        monkeypatch.setenv("OPENCODE_BASE_URL", provider.base_url)
        runner = CliRunner()
        args = ["review", "--repo", str(widget.repo), "--base", widget.base, "--head", widget.head]
        outputs = []
        for output_format in ("text", "json", "markdown", "sarif"):
            provider.script(tool_turn(), stop_turn(REVIEW))
            done = runner.invoke(cli.main, [*args, "--format", output_format, "--trace"])
            assert done.exit_code == 0, done.output
            outputs.append(done.output)
        for output_format in ("text", "json"):
            provider.script(Fault.status(401, body=ECHO))
            done = runner.invoke(cli.main, [*args, "--format", output_format])
            assert done.exit_code == 1
            outputs.append(done.output)
        # Configuration mistakes next to the secrets are named, never quoted.
        monkeypatch.setenv("OPENCODE_BASE_URL", f"http://user:{PROVIDER_KEY}@127.0.0.1:9/v1")
        done = runner.invoke(cli.main, args)
        assert done.exit_code == 2
        outputs.append(done.output)
        monkeypatch.setenv("OPENCODE_BASE_URL", provider.base_url)
        monkeypatch.setenv("GITHUB_API_URL", f"https://{GITHUB_TOKEN}@api.example.invalid")
        done = runner.invoke(cli.main, args)
        assert done.exit_code == 2
        outputs.append(done.output)
    for output in outputs:
        assert_clean("command-line output", output)


def test_settings_and_configuration_errors_never_show_a_secret() -> None:
    settings = load_settings(
        opencode_api_key=PROVIDER_KEY, github_token=GITHUB_TOKEN, pr_review_api_keys=SERVICE_KEY
    )
    assert_clean("settings repr", repr(settings), str(settings), str(settings.model_dump()))
    bad: list[dict[str, Any]] = [
        {"opencode_base_url": f"https://{PROVIDER_KEY}@opencode.example"},
        {"opencode_base_url": f"https://h.example/v1?key={PROVIDER_KEY}"},
        {"github_api_url": f"https://x:{GITHUB_TOKEN}@api.github.com"},
        {"github_server_url": f"ftp://{GITHUB_TOKEN}"},
        {"review_max_rounds": PROVIDER_KEY},
        {"opencode_model": PROVIDER_KEY * 20},
    ]
    for overrides in bad:
        with pytest.raises(ConfigurationError) as raised:
            load_settings(opencode_api_key=PROVIDER_KEY, github_token=GITHUB_TOKEN, **overrides)
        assert_clean(f"configuration error {sorted(overrides)}", exception_text(raised.value))


def test_a_key_that_cannot_be_a_header_is_refused_without_quoting_it(
    widget: LocalTarget,
) -> None:
    with ScriptedProvider() as provider:
        settings = settings_for(provider, opencode_api_key=f"{PROVIDER_KEY}\n\x00é")
        with pytest.raises(ReviewError) as raised:
            asyncio.run(run_review(widget, settings))
        assert provider.requests == []
    assert raised.value.code == "configuration_error"
    assert_clean("unusable key", exception_text(raised.value))


def test_the_session_scanner_sees_every_level_and_changes_no_delivery() -> None:
    """The whole-session scanner (conftest.py) reads records no handler would get, and
    hands on exactly those a handler would have got without it."""
    SUITE_SCANNER.uninstall()  # a private scanner, so the planted secret fails nothing
    scanner = SuiteLogScanner()
    logger = logging.getLogger("pr_review_api.hostile.scanner-check")
    received: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            received.append(record.getMessage())

    keep = Keep(logging.DEBUG)
    logger.addHandler(keep)
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    try:
        scanner.install()
        logger.debug("debug %s", PROVIDER_KEY)
        logger.warning("warning without secrets")
        scanner.uninstall()
    finally:
        scanner.uninstall()
        logger.removeHandler(keep)
        logger.propagate = True
        SUITE_SCANNER.install()
    assert [test for test, _, _ in scanner.leaked] == [os.environ["PYTEST_CURRENT_TEST"]]
    assert scanner.scanned == 2
    assert received == ["warning without secrets"]
