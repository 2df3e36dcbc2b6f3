"""The one git error edge, end to end: `run_review` and the HTTP service (specification §5).

A git failure while a review prepares or reads its repository, or a corrupt object in the
pull-request cache, ends the review with a contract code: `invalid_repository` for a local
review, `github_unavailable` (502) for a pull request, never a 500 and never a path.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from pr_review_api import git_runner as runner
from pr_review_api.cli import commands as cli
from pr_review_api.errors import InvalidRepository, ReviewError
from pr_review_api.fetch import cache as checkout
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.loop import workspace as workspace_module
from pr_review_api.loop.run import run_review
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.settings import Settings, load_settings
from pr_review_api.tools.execute import REPOSITORY_UNREADABLE
from tests.builders import final_turn
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.environment import Environment
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import ScriptedProvider, stop_turn, tool_call_turn
from tests.gitrepo import GitRepo, git
from tests.in_process import service
from tests.tools.git_failures import (
    BASE_FILES,
    BIG,
    FAILURES,
    HEAD_FILES,
    NEEDLE,
    REVIEW_WITH_A_LINE,
    SECRET_PATH,
    TOOL_CALLS,
    assert_contract_error,
    blob_id,
    corrupt_file,
    corrupt_loose_object,
    failing,
)

# --- through run_review and the HTTP service --------------------------------------------------


# Whole reviews through the service and the fakes: the default run, not --fast (the unit
# level of the same edge is tests/tools/test_git_error_edge.py).
pytestmark = pytest.mark.e2e


def local_settings(provider: ScriptedProvider) -> Settings:
    return load_settings(
        opencode_api_key=PROVIDER_KEY,
        opencode_base_url=provider.base_url,
        review_timeout_seconds=30,
    )


def test_a_local_review_of_a_corrupt_object_ends_with_invalid_repository(
    scripted_provider: ScriptedProvider, widget: tuple[GitRepo, str, str]
) -> None:
    repo, base, head = widget
    corrupt_loose_object(repo.git_dir, blob_id(BIG))
    scripted_provider.script(
        tool_call_turn([("call_1", "read_repository_file", {"path": "src/app.py"})])
    )
    target = LocalTarget(repo.path, base, head)
    with pytest.raises(ReviewError) as raised:
        asyncio.run(run_review(target, local_settings(scripted_provider)))
    assert_contract_error(raised, InvalidRepository)


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("where", ["git_dir", "resolve_commit", "open", "changed_files"])
def test_a_git_failure_preparing_a_local_review_is_invalid_repository(
    *,
    scripted_provider: ScriptedProvider,
    widget: tuple[GitRepo, str, str],
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    failure: str,
) -> None:
    # Siblings before the loop: finding the git directory, pinning the commits, listing the
    # changed files. Each failure is invalid_repository (CLI exit 2), and no model is asked.
    repo, base, head = widget
    if where == "git_dir":
        monkeypatch.setattr(workspace_module, "run_git", failing("run_git", FAILURES[failure]))
    elif where == "resolve_commit":
        monkeypatch.setattr(workspace_module, "resolve_commit", failing(where, FAILURES[failure]))
    elif where == "open":
        monkeypatch.setattr(PinnedRepository, "open", failing("open", FAILURES[failure]))
    else:
        monkeypatch.setattr(PinnedRepository, where, failing(where, FAILURES[failure]))
    target = LocalTarget(repo.path, base, head)
    with pytest.raises(ReviewError) as raised:
        asyncio.run(run_review(target, local_settings(scripted_provider)))
    assert type(raised.value) is InvalidRepository
    assert SECRET_PATH not in raised.value.message
    assert scripted_provider.requests == []


@pytest.mark.parametrize("output_format", ["json", "text"])
def test_the_cli_reviewing_a_corrupt_object_exits_2_with_invalid_repository(
    scripted_provider: ScriptedProvider,
    widget: tuple[GitRepo, str, str],
    environment: Environment,
    output_format: str,
) -> None:
    repo, base, head = widget
    corrupt_loose_object(repo.git_dir, blob_id(BIG))
    scripted_provider.script(
        tool_call_turn([("call_1", "read_repository_file", {"path": "src/app.py"})])
    )
    environment(scripted_provider, timeout=30)
    args = ["review", "--repo", str(repo.path), "--base", base, "--head", head]
    result = CliRunner().invoke(cli.main, [*args, "--format", output_format], prog_name="pr-review")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert str(repo.path) not in result.output
    if output_format == "json":
        document = json.loads(result.stdout)
        assert document["error"] == {"code": "invalid_repository", "message": REPOSITORY_UNREADABLE}
    else:
        assert REPOSITORY_UNREADABLE in result.output


def pull_settings(fake: FakeGitHub, provider: ScriptedProvider, tmp_path: Path) -> Settings:
    return fake.settings(
        tmp_path / "cache",
        token=GITHUB_TOKEN,
        opencode_api_key=PROVIDER_KEY,
        opencode_base_url=provider.base_url,
        review_timeout_seconds=60,
    )


def assert_github_unavailable(response: httpx.Response, tmp_path: Path) -> None:
    assert response.status_code == 502, response.text
    assert response.json() == {
        "error": {"code": "github_unavailable", "message": REPOSITORY_UNREADABLE},
        "termination_reason": None,
        "trace": None,
    }
    for secret in (str(tmp_path), SECRET_PATH, PROVIDER_KEY, GITHUB_TOKEN):
        assert secret not in response.text


# Where a pull request review meets git: each tool's method, and the final checks' two.
SCRIPTS: dict[str, tuple[str, list[dict[str, Any]]]] = {
    tool: (method, [tool_call_turn([("call_1", tool, arguments)])])
    for tool, (method, arguments) in TOOL_CALLS.items()
} | {
    "final_review_" + method: (method, [stop_turn(REVIEW_WITH_A_LINE)])
    for method in ("resolve_file", "line_counts")
}


@pytest.mark.anyio
@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("where", SCRIPTS)
async def test_a_git_failure_during_a_pull_request_review_is_never_a_500(
    *,
    fake_github: FakeGitHub,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    failure: str,
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7, base=BASE_FILES, head=HEAD_FILES)
    method, script = SCRIPTS[where]
    scripted_provider.script(*copy.deepcopy(script))
    monkeypatch.setattr(PinnedRepository, method, failing(method, FAILURES[failure]))
    async with service(pull_settings(fake_github, scripted_provider, tmp_path)) as client:
        response = await client.post("/v1/reviews", json={"pull_request_url": pull.url})
    assert_github_unavailable(response, tmp_path)


@pytest.mark.anyio
@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("where", ["open", "changed_files"])
async def test_a_git_failure_pinning_a_pull_request_is_github_unavailable_not_500(
    *,
    fake_github: FakeGitHub,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    failure: str,
) -> None:
    # A sibling of the tools' edge: pinning the fetched commits (the index, the merge base,
    # the changed files) reads the cache with git too, before the model is asked.
    pull = fake_github.pull_request("acme", "widget", 7, base=BASE_FILES, head=HEAD_FILES)
    monkeypatch.setattr(PinnedRepository, where, failing(where, FAILURES[failure]))
    async with service(pull_settings(fake_github, scripted_provider, tmp_path)) as client:
        response = await client.post("/v1/reviews", json={"pull_request_url": pull.url})
    assert_github_unavailable(response, tmp_path)
    assert scripted_provider.requests == []


@pytest.mark.anyio
@pytest.mark.parametrize("failure", ["os_error", "timeout"])
@pytest.mark.parametrize("subcommand", ["cat-file", "check-ref-format", "rev-parse"])
async def test_a_git_failure_checking_the_cache_is_github_unavailable_not_500(
    *,
    fake_github: FakeGitHub,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    subcommand: str,
    failure: str,
) -> None:
    # A sibling in the fetch cache: its checks run git with check=False (a failed git is a
    # "no"), but git that cannot start (EMFILE) or finish in time raised past every handler.
    pull = fake_github.pull_request("acme", "widget", 7, base=BASE_FILES, head=HEAD_FILES)
    real = runner.run_git  # what checkout imported

    def run_git(git_dir: Path | None, args: list[str], **options: Any) -> Any:
        if args and args[0] == subcommand:
            raise FAILURES[failure]()
        return real(git_dir, args, **options)

    monkeypatch.setattr(checkout, "run_git", run_git)
    async with service(pull_settings(fake_github, scripted_provider, tmp_path)) as client:
        response = await client.post("/v1/reviews", json={"pull_request_url": pull.url})
    assert response.status_code == 502, response.text
    assert response.json()["error"]["code"] == "github_unavailable"
    for secret in (str(tmp_path), SECRET_PATH, PROVIDER_KEY, GITHUB_TOKEN):
        assert secret not in response.text
    assert scripted_provider.requests == []


def cached_loose_object(cache: Path, oid: str) -> Path:
    """The cached blob's loose object file; a fetch keeps packs, so unpack them first."""
    [objects] = [path for path in cache.rglob("objects") if (path / "pack").is_dir()]
    for pack in list((objects / "pack").glob("*.pack")):
        data = pack.read_bytes()
        for kept in objects.joinpath("pack").glob(pack.stem + ".*"):
            kept.unlink()
        git(objects.parent, "unpack-objects", "-q", input_bytes=data)
    return objects / oid[:2] / oid[2:]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "script",
    [
        [tool_call_turn([("call_1", "read_repository_file", {"path": "src/app.py"})])],
        [tool_call_turn([("call_1", "search_repository", {"query": NEEDLE})])],
        [tool_call_turn([("call_1", "inspect_git_diff", {})])],
        [stop_turn(REVIEW_WITH_A_LINE)],
    ],
    ids=["read", "search", "diff", "line_check"],
)
async def test_a_corrupt_object_in_the_cache_is_github_unavailable_not_500(
    fake_github: FakeGitHub,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    script: list[dict[str, Any]],
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7, base=BASE_FILES, head=HEAD_FILES)
    scripted_provider.script(final_turn(summary="ok"), *script)
    async with service(pull_settings(fake_github, scripted_provider, tmp_path)) as client:
        body = {"pull_request_url": pull.url}
        warm = await client.post("/v1/reviews", json=body)
        assert warm.status_code == 200, warm.text  # the cache now holds the pull request
        corrupt_file(cached_loose_object(tmp_path / "cache", blob_id(BIG)))
        response = await client.post("/v1/reviews", json=body)
    assert_github_unavailable(response, tmp_path)
