"""The one git error edge: a git failure while a review reads its pinned repository.

Issue 10 item 4 and issue 9 item 7. A `GitError`, an `OSError` or a timeout raised while a
tool runs, or while the final review's paths and lines are checked, becomes a contract error
(`tools.map_git_errors`): `invalid_repository` for a local `--repo` review, `github_unavailable`
(502) for a pull request. Never an exception outside the contract, never a 500, never a path.
A real corrupt loose object (its zlib checksum broken after committing, so git still reads the
header and the size but not the content) proves the same for the real readers.
"""

from __future__ import annotations

import asyncio
import copy
import errno
import hashlib
import json
import subprocess
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from pr_review_api import errors
from pr_review_api.errors import GitHubUnavailable, InvalidRepository, ReviewError
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.runner import GitError
from pr_review_api.git.store import RepositoryStore
from pr_review_api.loop import repo_config
from pr_review_api.loop import run as run_module
from pr_review_api.loop.final_review import parse_final_review
from pr_review_api.loop.run import LocalTarget, run_review
from pr_review_api.service.app import create_app
from pr_review_api.settings import Settings, load_settings
from pr_review_api.tools import (
    GIT_FAILURES,
    TOOLS_BY_NAME,
    ToolOutcome,
    execute_tool,
    map_git_errors,
)
from pr_review_api.tools.execute import REPOSITORY_UNREADABLE
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes import provider_server
from tests.fakes.github_server import FakeGitHub, fake_github
from tests.fakes.provider_server import ScriptedProvider, stop_turn, tool_call_turn
from tests.gitrepo import GitRepo, git

__all__ = ["fake_github"]  # the fixture, imported for this module's tests
scripted_provider = provider_server.scripted_provider

SECRET_PATH = "/srv/secret-cache/acme/widget.git"
NEEDLE = "needle_of_the_edge"
BIG = "".join(f"line {n} {NEEDLE} {n * 7919 % 10007}\n" for n in range(400))  # 12 KB, streamed
BASE_FILES = {"src/app.py": "def save(x):\n    store(x)\n", "README.md": "# widget\n"}
HEAD_FILES = {"src/app.py": BIG, "README.md": "# widget\n"}


def git_error() -> Exception:
    return GitError(["git", f"--git-dir={SECRET_PATH}", "cat-file"], 128, SECRET_PATH.encode())


def os_error() -> Exception:
    return OSError(errno.EMFILE, "Too many open files", SECRET_PATH)


def timeout() -> Exception:
    return subprocess.TimeoutExpired(["git", f"--git-dir={SECRET_PATH}", "grep"], 30.0)


FAILURES: dict[str, Callable[[], Exception]] = {
    "git_error": git_error,
    "os_error": os_error,
    "timeout": timeout,
}

# Each tool, one call of it, and the PinnedRepository method through which it reads git.
TOOL_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "list_repository_files": ("resolve_directory", {"path": "src"}),
    "read_repository_file": ("read_source", {"path": "src/app.py"}),
    "search_repository": ("grep", {"query": NEEDLE}),
    "inspect_git_diff": ("diff", {}),
}

REVIEW_WITH_A_LINE = {
    "summary": "One finding.",
    "findings": [
        {
            "severity": "low",
            "title": "A title",
            "explanation": "An explanation.",
            "path": "src/app.py",
            "line": 2,
            "evidence": "Some evidence.",
            "recommendation": "A recommendation.",
        }
    ],
    "notes": [],
}


# --- fixtures and helpers -----------------------------------------------------------------


@pytest.fixture
def widget(tmp_path: Path) -> tuple[GitRepo, str, str]:
    repo = GitRepo(tmp_path / "widget")
    base = repo.commit_files(BASE_FILES)
    head = repo.commit_files(HEAD_FILES, message="grow app.py")
    return repo, base, head


@pytest.fixture
def pinned(widget: tuple[GitRepo, str, str]) -> PinnedRepository:
    repo, base, head = widget
    return PinnedRepository.open(repo.git_dir, base, head)


def failing(method: str, failure: Callable[[], Exception]) -> Callable[..., Any]:
    """A stand-in for a PinnedRepository method that fails as git would."""
    if method == "grep":  # a generator: git fails while its output is read

        def broken_grep(*args: Any, **kwargs: Any) -> Iterator[Any]:
            raise failure()
            yield  # pragma: no cover

        return broken_grep

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise failure()

    return broken


def call(repo: PinnedRepository, name: str, arguments: dict[str, Any], **options: Any) -> Any:
    validated = TOOLS_BY_NAME[name].arguments.model_validate(arguments)
    return execute_tool(repo, name, validated, **options)


def assert_contract_error(
    raised: pytest.ExceptionInfo[ReviewError], expected: type[ReviewError]
) -> None:
    error = raised.value
    assert type(error) is expected
    assert error.code in {"invalid_repository", "github_unavailable"}
    assert error.status != 500
    assert error.message == REPOSITORY_UNREADABLE
    assert SECRET_PATH not in str(error)
    assert "secret" not in error.message
    assert error.__cause__ is None
    assert error.__suppress_context__


def corrupt_loose_object(git_dir: Path, oid: str) -> None:
    """Break the zlib checksum of a loose object: git reads its header and size, then fails."""
    corrupt_file(git_dir / "objects" / oid[:2] / oid[2:])


def corrupt_file(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    assert zlib.decompress(bytes(raw)).startswith(b"blob ")
    raw[-4:] = bytes(byte ^ 0xFF for byte in raw[-4:])
    path.chmod(0o644)
    path.write_bytes(bytes(raw))
    with pytest.raises(zlib.error):
        zlib.decompress(bytes(raw))


def blob_id(content: str) -> str:
    data = content.encode("utf-8")
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# --- the mapping --------------------------------------------------------------------------


def test_the_git_failures_mapped_are_git_errors_os_errors_and_timeouts() -> None:
    assert set(GIT_FAILURES) == {GitError, OSError, subprocess.TimeoutExpired}
    for make in FAILURES.values():
        assert isinstance(make(), GIT_FAILURES)


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("expected", [InvalidRepository, GitHubUnavailable])
def test_map_git_errors_turns_each_failure_into_the_given_contract_error(
    failure: str, expected: type[ReviewError]
) -> None:
    with pytest.raises(ReviewError) as raised, map_git_errors(expected):
        raise FAILURES[failure]()
    assert_contract_error(raised, expected)


def test_map_git_errors_passes_tool_and_review_errors_through_unchanged() -> None:
    tool_error = errors.ToolError("path_not_found", "The requested path does not exist.")
    with pytest.raises(errors.ToolError) as raised_tool, map_git_errors():
        raise tool_error
    assert raised_tool.value is tool_error
    timeout_error = errors.ReviewTimeout()
    with pytest.raises(errors.ReviewTimeout) as raised_review, map_git_errors():
        raise timeout_error
    assert raised_review.value is timeout_error


def test_map_git_errors_logs_the_kind_of_failure_never_a_path(
    caplog: pytest.LogCaptureFixture,
) -> None:
    for make in FAILURES.values():
        with pytest.raises(InvalidRepository), map_git_errors():
            raise make()
    text = caplog.text
    assert "git cat-file exited with status 128" in text
    assert f"errno {errno.EMFILE}" in text
    assert "TimeoutExpired" in text
    assert SECRET_PATH not in text
    assert "secret" not in text


# --- each tool --------------------------------------------------------------------------------


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("tool", TOOL_CALLS)
def test_a_git_failure_in_each_tool_is_a_contract_error_not_an_exception(
    pinned: PinnedRepository, monkeypatch: pytest.MonkeyPatch, tool: str, failure: str
) -> None:
    method, arguments = TOOL_CALLS[tool]
    assert call(pinned, tool, arguments).ok  # the call works before git is broken
    monkeypatch.setattr(PinnedRepository, method, failing(method, FAILURES[failure]))
    with pytest.raises(ReviewError) as raised:
        call(pinned, tool, arguments)
    assert_contract_error(raised, InvalidRepository)


@pytest.mark.parametrize("failure", FAILURES)
def test_a_git_failure_in_a_tool_of_a_pull_request_review_is_github_unavailable(
    pinned: PinnedRepository, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    monkeypatch.setattr(PinnedRepository, "read_source", failing("read_source", FAILURES[failure]))
    with pytest.raises(ReviewError) as raised:
        call(pinned, "read_repository_file", {"path": "src/app.py"}, unreadable=GitHubUnavailable)
    assert_contract_error(raised, GitHubUnavailable)


def test_a_tool_error_is_still_an_ok_false_result(pinned: PinnedRepository) -> None:
    outcome: ToolOutcome = call(pinned, "read_repository_file", {"path": "missing.py"})
    assert outcome.result == {
        "ok": False,
        "error": {"code": "path_not_found", "message": "The requested path does not exist."},
    }


# --- the final-review checks ----------------------------------------------------------------


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("method", ["resolve_file", "line_counts"])
@pytest.mark.parametrize("expected", [InvalidRepository, GitHubUnavailable])
def test_a_git_failure_in_the_final_review_checks_is_a_contract_error(
    *,
    pinned: PinnedRepository,
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    failure: str,
    expected: type[ReviewError],
) -> None:
    content = json.dumps(REVIEW_WITH_A_LINE)
    assert parse_final_review(content, pinned).findings[0].line == 2  # valid before
    monkeypatch.setattr(PinnedRepository, method, failing(method, FAILURES[failure]))
    with pytest.raises(ReviewError) as raised:
        parse_final_review(content, pinned, unreadable=expected)
    assert_contract_error(raised, expected)


# --- a real corrupt loose object -------------------------------------------------------------


@pytest.fixture
def corrupt(widget: tuple[GitRepo, str, str]) -> PinnedRepository:
    """The widget with the head's src/app.py blob corrupted on disk, pinned afterwards."""
    repo, base, head = widget
    corrupt_loose_object(repo.git_dir, blob_id(BIG))
    return PinnedRepository.open(repo.git_dir, base, head)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read_repository_file", {"path": "src/app.py"}),
        ("search_repository", {"query": NEEDLE}),
        ("search_repository", {"query": NEEDLE, "path": "src/app.py"}),
        ("inspect_git_diff", {}),
        ("inspect_git_diff", {"paths": ["src/app.py"]}),
    ],
)
def test_a_corrupt_loose_object_read_by_a_tool_is_a_contract_error(
    corrupt: PinnedRepository, tool: str, arguments: dict[str, Any]
) -> None:
    with pytest.raises(ReviewError) as raised:
        call(corrupt, tool, arguments)
    assert_contract_error(raised, InvalidRepository)


def test_a_corrupt_loose_object_leaves_the_other_files_readable(corrupt: PinnedRepository) -> None:
    outcome = call(corrupt, "read_repository_file", {"path": "README.md"})
    assert outcome.ok
    assert outcome.result["content"] == "1: # widget"
    assert call(corrupt, "list_repository_files", {}).result["paths"] == ["README.md", "src/app.py"]


def test_a_corrupt_loose_object_named_by_a_finding_line_is_a_contract_error(
    corrupt: PinnedRepository,
) -> None:
    with pytest.raises(ReviewError) as raised:
        parse_final_review(json.dumps(REVIEW_WITH_A_LINE), corrupt)
    assert_contract_error(raised, InvalidRepository)


def test_a_diff_over_a_blob_missing_from_the_store_stays_an_ok_result(repo: GitRepo) -> None:
    # A missing blob is absent from the head's index (ls-tree says BAD), not corrupt: the
    # model cannot read it either, and the diff is what git could show (tests/hostile).
    base = repo.commit_files({"ok.txt": "fine\n"})
    ok = git(repo.path, "rev-parse", "HEAD:ok.txt")
    listing = f"100644 blob {ok}\tok.txt\n100644 blob {'1' * 40}\tgone.txt\n"
    tree = git(repo.path, "mktree", "--missing", input_bytes=listing.encode())
    head = git(repo.path, "commit-tree", tree, "-p", base, "-m", "a missing blob")
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    for arguments in ({}, {"paths": ["gone.txt"]}):
        assert call(pinned, "inspect_git_diff", arguments).ok


@pytest.mark.parametrize("failure", FAILURES)
def test_a_git_failure_reading_the_repository_config_ignores_the_file_with_its_note(
    widget: tuple[GitRepo, str, str], monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    # A sibling: .pr-review.toml is read from the base with git before the loop; a failure
    # there (a timeout included) ignores the file with the fixed note, never a 500.
    repo, base, _ = widget
    monkeypatch.setattr(repo_config, "run_git", failing("run_git", FAILURES[failure]))
    loaded = repo_config.load_repo_config(repo.git_dir, base)
    assert loaded.config == repo_config.RepoConfig()
    assert loaded.note is not None
    assert repo_config.REASON_UNREADABLE in loaded.note


# --- through run_review and the HTTP service --------------------------------------------------


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
@pytest.mark.parametrize("where", ["git_dir", "open", "changed_files"])
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
        monkeypatch.setattr(run_module, "run_git", failing("run_git", FAILURES[failure]))
    elif where == "open":
        monkeypatch.setattr(RepositoryStore, "open", failing("open", FAILURES[failure]))
        monkeypatch.setattr(PinnedRepository, "open", failing("open", FAILURES[failure]))
    else:
        monkeypatch.setattr(PinnedRepository, where, failing(where, FAILURES[failure]))
    target = LocalTarget(repo.path, base, head)
    with pytest.raises(ReviewError) as raised:
        asyncio.run(run_review(target, local_settings(scripted_provider)))
    assert type(raised.value) is InvalidRepository
    assert SECRET_PATH not in raised.value.message
    assert scripted_provider.requests == []


@asynccontextmanager
async def service(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The real app in process, its lifespan run, driven over ASGI."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://testserver", timeout=60
        ) as client:
            yield client


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
    owner = RepositoryStore if where == "open" else PinnedRepository
    monkeypatch.setattr(owner, where, failing(where, FAILURES[failure]))
    async with service(pull_settings(fake_github, scripted_provider, tmp_path)) as client:
        response = await client.post("/v1/reviews", json={"pull_request_url": pull.url})
    assert_github_unavailable(response, tmp_path)
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
    scripted_provider.script(stop_turn({"summary": "ok", "findings": [], "notes": []}), *script)
    async with service(pull_settings(fake_github, scripted_provider, tmp_path)) as client:
        body = {"pull_request_url": pull.url}
        warm = await client.post("/v1/reviews", json=body)
        assert warm.status_code == 200, warm.text  # the cache now holds the pull request
        corrupt_file(cached_loose_object(tmp_path / "cache", blob_id(BIG)))
        response = await client.post("/v1/reviews", json=body)
    assert_github_unavailable(response, tmp_path)
