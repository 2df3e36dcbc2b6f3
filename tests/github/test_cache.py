"""The repository cache: fetching, pinning, locking, eviction and hardening, one test per rule.

Every test runs real git against the fake GitHub on loopback (`tests/fakes/github_server.py`),
which serves bare repositories through `git http-backend`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import secrets
import stat
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.errors import ConfigurationError, GitHubUnavailable, PullRequestNotFound
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.runner import run_git
from pr_review_api.github import cache_files
from pr_review_api.github import checkout as cache_module
from pr_review_api.github.checkout import (
    HEAD_MOVED,
    PreparedPullRequest,
    RepositoryCache,
    fetch_config,
    open_pull_request,
)
from pr_review_api.github.client import PullRequestMetadata, parse_pull_request_url
from pr_review_api.settings import Settings
from tests.conftest import GITHUB_TOKEN
from tests.fakes.github_server import FakeGitHub, PullRequestFixture, fake_github
from tests.gitrepo import FILE, GITLINK, LINK, git

__all__ = ["fake_github"]  # the fixture, imported for this module's tests

TOKEN_FORMS = (
    GITHUB_TOKEN,
    base64.b64encode(f"x-access-token:{GITHUB_TOKEN}".encode()).decode(),
    base64.b64encode(GITHUB_TOKEN.encode()).decode().rstrip("="),
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Launch:
    """One process started during a test."""

    argv: list[str]
    env: dict[str, str]


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> list[Launch]:
    """Record the argument vector and environment of every process started."""
    recorded: list[Launch] = []
    original = subprocess.Popen

    class Recording(original):  # type: ignore[valid-type, misc]
        def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
            argv = [args] if isinstance(args, (str, bytes)) else list(args)
            env = kwargs.get("env")
            recorded.append(Launch([os.fsdecode(a) for a in argv], dict(env or {})))
            super().__init__(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Recording)
    return recorded


def our_git(launches: list[Launch]) -> list[Launch]:
    """The git processes pr-review started (not the fake server's or the fixtures')."""
    return [
        launch
        for launch in launches
        if launch.argv[:1] == ["git"] and "GIT_CONFIG_COUNT" in launch.env
    ]


def config_of(launch: Launch) -> list[tuple[str, str]]:
    count = int(launch.env["GIT_CONFIG_COUNT"])
    return [
        (launch.env[f"GIT_CONFIG_KEY_{i}"], launch.env[f"GIT_CONFIG_VALUE_{i}"])
        for i in range(count)
    ]


async def review(url: str, settings: Settings) -> PreparedPullRequest:
    async with open_pull_request(url, settings) as prepared:
        return prepared


def diff_of(prepared: PreparedPullRequest) -> str:
    metadata = prepared.metadata
    pinned = PinnedRepository.open(prepared.git_dir, metadata.base_sha, metadata.head_sha)
    data, truncated = pinned.diff([], 10**6)
    assert not truncated
    return data.decode()


def has_object(git_dir: Path, sha: str) -> bool:
    done = run_git(git_dir, ["cat-file", "-e", f"{sha}^{{commit}}"], check=False)
    return done.returncode == 0


def refs_of(git_dir: Path) -> list[str]:
    return git(git_dir, "for-each-ref", "--format=%(refname)").split()


def upload_pack_bytes(fake: FakeGitHub, owner: str, repo: str) -> int:
    return sum(
        r.response_bytes
        for r in fake.git_requests(owner, repo)
        if r.path.endswith("/git-upload-pack")
    )


def files_under(folder: Path) -> Iterator[Path]:
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            yield path


# --- fetching and pinning ---


@pytest.mark.anyio
async def test_review_pins_the_metadata_base_and_head(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request(
        "acme", "widget", 7, base={"a.py": "one\n"}, head={"a.py": "two\n"}
    )
    settings = fake_github.settings(tmp_path / "cache")
    async with open_pull_request(pull.url + "/files", settings) as prepared:
        assert prepared.info.url == pull.url
        assert (prepared.metadata.base_sha, prepared.metadata.head_sha) == (
            pull.base_sha,
            pull.head_sha,
        )
        assert has_object(prepared.git_dir, pull.base_sha)
        assert has_object(prepared.git_dir, pull.head_sha)
        assert "-one\n+two" in diff_of(prepared)
    assert prepared.git_dir.is_relative_to(tmp_path / "cache")


@pytest.mark.anyio
async def test_git_data_comes_from_the_server_repository_url(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    await review(pull.url, fake_github.settings(tmp_path / "cache"))
    paths = {r.path for r in fake_github.git_requests()}
    assert paths == {"/acme/widget.git/info/refs", "/acme/widget.git/git-upload-pack"}


@pytest.mark.anyio
async def test_only_the_pull_head_and_base_branch_are_fetched(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 3, base={"a.py": "base\n"})
    origin = pull.origin
    other_branch = origin.commit({"other.txt": "other branch\n"}, pull.base_sha)
    origin.set_branch("other", other_branch)
    tagged = origin.commit({"tag.txt": "tagged\n"}, pull.base_sha)
    origin.publish(tagged, "refs/tags/v1")
    other_pull = origin.commit({"pull4.txt": "another pull request\n"}, pull.base_sha)
    origin.set_pull_head(4, other_pull)
    prepared = await review(pull.url, fake_github.settings(tmp_path / "cache"))
    for sha in (other_branch, tagged, other_pull):
        assert not has_object(prepared.git_dir, sha)
    refs = refs_of(prepared.git_dir)
    assert len(refs) == 2
    assert "refs/pr-review/pull/3" in refs
    assert any(ref.startswith("refs/pr-review/base/") for ref in refs)


@pytest.mark.anyio
async def test_base_branch_that_advanced_stays_out_of_the_diff(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    origin = fake_github.origin("acme", "widget")
    branch_point = origin.commit({"shared.py": "shared\n", "feature.py": "old\n"}, None)
    head = origin.commit({"feature.py": "PULL-REQUEST-CHANGE\n"}, branch_point)
    advanced = origin.commit({"shared.py": "BASE-ONLY-CHANGE\n"}, branch_point)
    origin.set_branch("main", advanced)
    origin.set_pull_head(9, head)
    fake_github.set_pull("acme", "widget", 9, base_sha=advanced, head_sha=head)
    prepared = await review(
        f"{fake_github.server_url}/acme/widget/pull/9", fake_github.settings(tmp_path / "c")
    )
    pinned = PinnedRepository.open(prepared.git_dir, advanced, head)
    assert pinned.revisions.merge_base_sha == branch_point
    diff = diff_of(prepared)
    assert "PULL-REQUEST-CHANGE" in diff
    assert "BASE-ONLY-CHANGE" not in diff


@pytest.mark.anyio
async def test_second_review_of_the_repository_fetches_only_new_objects(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    bulk = {f"data/{i:03}.txt": secrets.token_hex(2048) + "\n" for i in range(150)}  # ~600 KB
    first = fake_github.pull_request("acme", "widget", 1, base=bulk)
    settings = fake_github.settings(tmp_path / "cache")
    await review(first.url, settings)
    first_bytes = upload_pack_bytes(fake_github, "acme", "widget")
    assert first_bytes > 300_000
    second = fake_github.pull_request("acme", "widget", 2, head={"small.txt": "small change\n"})
    prepared = await review(second.url, settings)
    second_bytes = upload_pack_bytes(fake_github, "acme", "widget") - first_bytes
    assert fake_github.fetches("acme", "widget") == 2
    assert second_bytes < first_bytes / 50
    assert "small change" in diff_of(prepared)


@pytest.mark.anyio
async def test_new_head_of_the_same_pull_request_fetches_only_new_objects(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    bulk = {f"data/{i:03}.txt": secrets.token_hex(2048) + "\n" for i in range(150)}
    pull = fake_github.pull_request("acme", "widget", 1, base=bulk)
    settings = fake_github.settings(tmp_path / "cache")
    await review(pull.url, settings)
    first_bytes = upload_pack_bytes(fake_github, "acme", "widget")
    new_head = pull.origin.commit({"fix.txt": "review comments addressed\n"}, pull.head_sha)
    pull.origin.set_pull_head(1, new_head)
    fake_github.set_pull("acme", "widget", 1, base_sha=pull.base_sha, head_sha=new_head)
    prepared = await review(pull.url, settings)
    assert prepared.metadata.head_sha == new_head
    assert upload_pack_bytes(fake_github, "acme", "widget") - first_bytes < first_bytes / 50


@pytest.mark.anyio
async def test_repeat_review_of_the_same_head_fetches_nothing(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    settings = fake_github.settings(tmp_path / "cache")
    first = await review(pull.url, settings)
    before = len(fake_github.git_requests())
    second = await review(pull.url, settings)
    assert second.git_dir == first.git_dir
    assert len(fake_github.git_requests()) == before
    assert len(fake_github.api_requests()) == 2  # the metadata is always read afresh


@pytest.mark.anyio
async def test_moved_head_is_reported_instead_of_reviewed(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    pushed = pull.origin.commit({"late.txt": "pushed after the metadata was read\n"}, pull.head_sha)
    pull.origin.set_pull_head(7, pushed)  # the API still names the old head
    with pytest.raises(GitHubUnavailable) as caught:
        await review(pull.url, fake_github.settings(tmp_path / "cache"))
    assert caught.value.message == HEAD_MOVED
    assert "moved" in caught.value.message


@pytest.mark.anyio
async def test_force_pushed_head_is_reported(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    rewritten = pull.origin.commit({"rewritten.txt": "history rewritten\n"}, pull.base_sha)
    pull.origin.set_pull_head(7, rewritten)
    with pytest.raises(GitHubUnavailable, match="head moved"):
        await review(pull.url, fake_github.settings(tmp_path / "cache"))


@pytest.mark.anyio
async def test_base_commit_missing_from_the_base_branch_is_reported(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    elsewhere = pull.origin.commit({"x.txt": "never on main\n"}, None)
    fake_github.set_pull("acme", "widget", 7, base_sha=elsewhere, head_sha=pull.head_sha)
    with pytest.raises(GitHubUnavailable, match="base commit"):
        await review(pull.url, fake_github.settings(tmp_path / "cache"))


@pytest.mark.anyio
async def test_pull_request_not_found_reaches_no_git(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    with pytest.raises(PullRequestNotFound):
        await review(
            f"{fake_github.server_url}/acme/missing/pull/1", fake_github.settings(tmp_path / "c")
        )
    assert fake_github.git_requests() == []


@pytest.mark.anyio
async def test_git_failure_is_github_unavailable_with_a_fixed_message(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    fake_github.set_pull("acme", "ghost", 7, base_sha="a" * 40, head_sha="b" * 40)  # no repository
    with pytest.raises(GitHubUnavailable) as caught:
        await review(
            f"{fake_github.server_url}/acme/ghost/pull/7", fake_github.settings(tmp_path / "cache")
        )
    assert caught.value.message == cache_module.FETCH_FAILED
    rendered = "".join(traceback.format_exception(caught.value))
    assert "fatal" not in rendered
    assert str(tmp_path) not in rendered


@pytest.mark.anyio
async def test_base_branch_is_checked_before_git_sees_it(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    settings = fake_github.settings(tmp_path / "cache")
    ref = parse_pull_request_url(pull.url, settings)
    metadata = PullRequestMetadata(pull.base_sha, pull.head_sha, "--upload-pack=touch x", "", "")
    with pytest.raises(GitHubUnavailable, match="not valid"):
        RepositoryCache(settings).prepare(ref, metadata)
    bad_sha = PullRequestMetadata("HEAD", pull.head_sha, "main", "", "")
    with pytest.raises(GitHubUnavailable, match="not valid"):
        RepositoryCache(settings).prepare(ref, bad_sha)
    assert fake_github.git_requests() == []


# --- the token ---


@pytest.mark.anyio
async def test_token_is_sent_to_the_api_and_git_and_appears_nowhere_else(
    fake_github: FakeGitHub,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    launches: list[Launch],
) -> None:
    caplog.set_level(logging.DEBUG)
    fake_github.require_token = GITHUB_TOKEN  # the server refuses anything else
    pull = fake_github.pull_request("acme", "widget", 7)
    cache_dir = tmp_path / "cache"
    settings = fake_github.settings(cache_dir, token=GITHUB_TOKEN)
    prepared = await review(pull.url, settings)
    assert "two" not in diff_of(prepared)
    moving = fake_github.pull_request("acme", "widget", 8)
    moved = pull.origin.commit({"late.txt": "late\n"}, moving.head_sha)
    pull.origin.set_pull_head(8, moved)  # a git-side failure, after a fetch with the token
    failures: list[BaseException] = []
    for url in (moving.url, f"{fake_github.server_url}/acme/widget/pull/9"):
        try:
            await review(url, settings)
        except (GitHubUnavailable, PullRequestNotFound) as exc:
            failures.append(exc)
    assert len(failures) == 2
    # Sent: as a bearer token to the API, as a basic credential to git.
    assert {r.authorization for r in fake_github.api_requests()} == {f"Bearer {GITHUB_TOKEN}"}
    git_auth = {r.authorization for r in fake_github.git_requests()}
    assert git_auth == {f"Basic {TOKEN_FORMS[1]}"}
    # Nowhere else: messages, tracebacks, logs, argument vectors, files in the cache.
    for failure in failures:
        rendered = "".join(traceback.format_exception(failure)) + repr(failure)
        assert not any(form in rendered for form in TOKEN_FORMS)
    for record in caplog.records:
        text = record.getMessage() + repr(record.args)
        assert not any(form in text for form in TOKEN_FORMS)
    assert our_git(launches)
    for launch in launches:
        assert not any(form in arg for form in TOKEN_FORMS for arg in launch.argv)
    for launch in our_git(launches):  # in the environment only as the scoped header
        for key, value in config_of(launch):
            if any(form in value for form in TOKEN_FORMS):
                assert key == f"http.{fake_github.server_url}/.extraHeader"
                assert launch.argv[2] == "fetch"
    assert list(files_under(cache_dir))
    for path in files_under(cache_dir):
        data = path.read_bytes()
        assert not any(form.encode() in data for form in TOKEN_FORMS), path.name


def test_token_header_is_scoped_to_the_server_origin(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    settings = fake_github.settings(tmp_path / "cache", token=GITHUB_TOKEN)
    git_dir = tmp_path / "probe.git"
    git(tmp_path, "init", "-q", "--bare", str(git_dir))
    other_origin = (
        f"http://localhost:{fake_github.port}/acme/widget.git"  # same server, other origin
    )
    run_git(git_dir, ["ls-remote", "--end-of-options", other_origin], config=fetch_config(settings))
    run_git(
        git_dir,
        ["ls-remote", "--end-of-options", pull.url.rsplit("/pull/", 1)[0] + ".git"],
        config=fetch_config(settings),
    )
    first, second = [r for r in fake_github.git_requests() if r.path.endswith("/info/refs")]
    assert first.authorization is None
    assert second.authorization == f"Basic {TOKEN_FORMS[1]}"


@pytest.mark.anyio
async def test_no_token_means_no_authorization_anywhere(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    await review(pull.url, fake_github.settings(tmp_path / "cache"))
    assert all(r.authorization is None for r in fake_github.requests)


@pytest.mark.anyio
async def test_git_does_not_follow_redirects(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    fake_github.git_redirect = f"http://localhost:{fake_github.port}"  # another origin
    with pytest.raises(GitHubUnavailable, match="failed"):
        await review(pull.url, fake_github.settings(tmp_path / "cache", token=GITHUB_TOKEN))
    hosts = {r.headers["host"] for r in fake_github.requests}
    assert hosts == {f"127.0.0.1:{fake_github.port}"}  # the redirect target was never asked


# --- hardening ---


@pytest.mark.anyio
async def test_every_git_invocation_is_hardened(
    fake_github: FakeGitHub, tmp_path: Path, launches: list[Launch]
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    await review(pull.url, fake_github.settings(tmp_path / "cache", token=GITHUB_TOKEN))
    invocations = our_git(launches)
    assert {
        launch.argv[2] if launch.argv[1].startswith("--git-dir") else launch.argv[1]
        for launch in invocations
    } >= {
        "init",
        "fetch",
        "cat-file",
        "check-ref-format",
        "rev-parse",
    }
    for launch in invocations:
        env = launch.env
        assert set(env) <= {"PATH", "LANG", "LC_ALL", "HOME"} | {
            key for key in env if key.startswith("GIT_")
        }
        assert env["GIT_CONFIG_NOSYSTEM"] == "1"
        assert env["GIT_CONFIG_GLOBAL"] == os.devnull
        assert env["HOME"] == os.devnull
        assert env["GIT_TERMINAL_PROMPT"] == "0"
        assert env["GIT_LFS_SKIP_SMUDGE"] == "1"
        config = dict(config_of(launch))
        assert config["core.hooksPath"] == os.devnull
        assert config["diff.external"] == ""
        assert config["transfer.fsckObjects"] == "true"
        assert config["fetch.fsckObjects"] == "true"
        assert config["submodule.recurse"] == "false"
        assert config["protocol.allow"] == "never"
    (fetch,) = [launch for launch in invocations if "fetch" in launch.argv]
    assert fetch.env["GIT_ALLOW_PROTOCOL"] == "http"
    config = dict(config_of(fetch))
    assert config["protocol.http.allow"] == "always"
    assert "protocol.https.allow" not in config
    argv = fetch.argv
    for option in (
        "--no-tags",
        "--no-recurse-submodules",
        "--no-write-fetch-head",
        "--no-auto-maintenance",
    ):
        assert option in argv
    end = argv.index("--end-of-options")
    assert argv[end + 1 :] == [
        f"{fake_github.server_url}/acme/widget.git",
        "+refs/pull/7/head:refs/pr-review/pull/7",
        argv[-1],
    ]
    assert argv[-1].startswith("+refs/heads/main:refs/pr-review/base/")
    (init,) = [launch for launch in invocations if "init" in launch.argv]
    assert "--template=" in init.argv


def test_only_the_configured_scheme_is_allowed(fake_github: FakeGitHub, tmp_path: Path) -> None:
    https = Settings(github_server_url="https://ghe.example.com", pr_review_cache_dir=tmp_path)
    assert fetch_config(https).allowed_protocols == ("https",)
    local = fake_github.settings(tmp_path)
    assert fetch_config(local).allowed_protocols == ("http",)
    git_dir = tmp_path / "probe.git"
    git(tmp_path, "init", "-q", "--bare", str(git_dir))
    for url in (
        f"file://{fake_github.origin('acme', 'widget').bare}",
        "ext::sh -c true",
        "ssh://127.0.0.1/x",
    ):
        done = run_git(
            git_dir, ["ls-remote", "--end-of-options", url], config=fetch_config(local), check=False
        )
        assert done.returncode != 0


def _hostile_config(sentinels: Path, hooks: Path) -> str:
    def run(name: str) -> str:
        return f"touch {sentinels / name}"

    return f"""
[core]
    fsmonitor = {run("fsmonitor")}
    hooksPath = {hooks}
    pager = {run("pager")}
    sshCommand = {run("ssh")}
    askPass = {run("askpass")}
    attributesFile = {sentinels.parent / "evil-attributes"}
[filter "evil"]
    clean = {run("filter-clean")}
    smudge = {run("filter-smudge")}
    process = {run("filter-process")}
    required = true
[diff "evil"]
    command = {run("diff-command")}
    textconv = {run("diff-textconv")}
[diff]
    external = {run("diff-external")}
[merge "evil"]
    driver = {run("merge-driver")}
[credential]
    helper = !{run("credential-helper")}
[protocol]
    allow = always
[fetch]
    recurseSubmodules = true
[submodule]
    recurse = true
[gc]
    auto = 1
[maintenance]
    auto = true
[uploadpack]
    packObjectsHook = {run("pack-objects-hook")}
[alias]
    fetch = !{run("alias")}
"""


def _plant_hooks(hooks: Path, sentinels: Path) -> None:
    hooks.mkdir(parents=True, exist_ok=True)
    for name in (
        "reference-transaction",
        "post-checkout",
        "post-merge",
        "pre-auto-gc",
        "fsmonitor-watchman",
    ):
        hook = hooks / name
        hook.write_text(f"#!/bin/sh\ntouch {sentinels / ('hook-' + name)}\n")
        hook.chmod(0o755)


@pytest.mark.anyio
async def test_hostile_content_and_configuration_run_nothing(
    fake_github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sentinels = tmp_path / "sentinels"
    sentinels.mkdir()
    evil = tmp_path / "evil"
    evil_hooks = evil / "hooks"
    _plant_hooks(evil_hooks, sentinels)
    (tmp_path / "evil-attributes").write_text("* filter=evil diff=evil merge=evil\n")
    (evil / ".gitconfig").write_text(_hostile_config(sentinels, evil_hooks))
    (evil / ".config" / "git").mkdir(parents=True)
    (evil / ".config" / "git" / "config").write_text(_hostile_config(sentinels, evil_hooks))
    (evil / ".config" / "git" / "attributes").write_text("* filter=evil diff=evil\n")
    templates = evil / "templates"
    _plant_hooks(templates / "hooks", sentinels)
    script = evil / "script"
    script.write_text(f"#!/bin/sh\ntouch {sentinels / 'script'}\n")
    script.chmod(0o755)
    # 1. A hostile process environment: none of it may reach git.
    for name, value in {
        "HOME": str(evil),
        "XDG_CONFIG_HOME": str(evil / ".config"),
        "GIT_CONFIG_GLOBAL": str(evil / ".gitconfig"),
        "GIT_CONFIG_SYSTEM": str(evil / ".gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "",
        "GIT_CONFIG_PARAMETERS": f"'core.fsmonitor'='touch {sentinels / 'parameters'}'",
        "GIT_TEMPLATE_DIR": str(templates),
        "GIT_EXTERNAL_DIFF": str(script),
        "GIT_ASKPASS": str(script),
        "SSH_ASKPASS": str(script),
        "GIT_SSH_COMMAND": str(script),
        "GIT_PAGER": str(script),
        "GIT_EDITOR": str(script),
        "GIT_ALLOW_PROTOCOL": "ext:file:http:https",
        "GIT_TRACE": str(sentinels / "trace"),
        "GIT_TRACE_PACKET": str(sentinels / "trace-packet"),
        "GIT_TRACE_CURL": str(sentinels / "trace-curl"),
    }.items():
        monkeypatch.setenv(name, value)

    # 2. Hostile repository content on the server: drivers in .gitattributes, a submodule
    # on the same server, and symbolic links out of the tree and into .git.
    submodule = fake_github.pull_request("evil", "submodule", 1)
    origin = fake_github.origin("acme", "widget")
    gitmodules = (
        f'[submodule "sub"]\n\tpath = sub\n\turl = {fake_github.server_url}/evil/submodule.git\n'
    )
    tree = {
        ".gitattributes": (
            FILE,
            b"* filter=evil diff=evil merge=evil text eol=crlf\n*.py textconv=evil\n",
        ),
        ".gitmodules": (FILE, gitmodules.encode()),
        "sub": (GITLINK, submodule.head_sha.encode()),
        "src/app.py": (FILE, b"print('base')\n"),
        "escape": (LINK, str(sentinels / "symlink-target").encode()),
        "up": (LINK, b"../../../../../../../../tmp"),
        "into-git": (LINK, b".git/config"),
        "loop": (LINK, b"loop"),
    }
    base = origin.work.commit_tree(tree, message="base")
    head = origin.work.commit_tree(
        {
            **tree,
            "src/app.py": (FILE, b"print('head')\n"),
            "sub": (GITLINK, submodule.base_sha.encode()),
        },
        parent=base,
        message="head",
    )
    origin.set_branch("main", base)
    origin.set_pull_head(5, head)
    fake_github.set_pull("acme", "widget", 5, base_sha=base, head_sha=head)
    cache_dir = tmp_path / "cache"
    settings = fake_github.settings(cache_dir, token=GITHUB_TOKEN)
    url = f"{fake_github.server_url}/acme/widget/pull/5"
    prepared = await review(url, settings)
    pinned = PinnedRepository.open(prepared.git_dir, base, head)
    assert "print('head')" in diff_of(prepared)
    assert ("M", "src/app.py") in pinned.changed_files()
    assert pinned.read_source(pinned.resolve_file("src/app.py")) == "print('head')\n"

    # 3. A tampered cache repository (defence in depth): its config, attributes and hooks
    # name the same commands; a second fetch and diff must still run none of them.
    git_dir = prepared.git_dir
    with (git_dir / "config").open("a") as config:
        config.write(_hostile_config(sentinels, git_dir / "hooks"))
    (git_dir / "info").mkdir(exist_ok=True)
    (git_dir / "info" / "attributes").write_text("* filter=evil diff=evil merge=evil\n")
    _plant_hooks(git_dir / "hooks", sentinels)
    newer = origin.work.commit_tree(
        {**tree, "src/app.py": (FILE, b"print('newer')\n")}, parent=head
    )
    origin.set_pull_head(5, newer)
    fake_github.set_pull("acme", "widget", 5, base_sha=base, head_sha=newer)
    again = await review(url, settings)
    assert "print('newer')" in diff_of(again)
    PinnedRepository.open(again.git_dir, base, newer).changed_files()

    assert sorted(path.name for path in sentinels.iterdir()) == []
    assert not any(r.path.startswith("/evil/submodule.git") for r in fake_github.requests)
    assert not [path for path in cache_dir.rglob("*") if path.is_symlink()]
    assert not [
        path for path in cache_dir.rglob("*") if path.name in ("sub", "src", "escape", "app.py")
    ]


@pytest.mark.anyio
async def test_objects_are_checked_on_fetch(fake_github: FakeGitHub, tmp_path: Path) -> None:
    sentinel = tmp_path / "sentinel"
    origin = fake_github.origin("acme", "widget")
    gitmodules = f'[submodule "x"]\n\tpath = x\n\turl = -oProxyCommand=touch {sentinel}\n'
    base = origin.work.commit_tree({"a.txt": (FILE, b"a\n")})
    head = origin.work.commit_tree(
        {"a.txt": (FILE, b"a\n"), ".gitmodules": (FILE, gitmodules.encode())}, parent=base
    )
    origin.set_branch("main", base)
    origin.set_pull_head(1, head)
    fake_github.set_pull("acme", "widget", 1, base_sha=base, head_sha=head)
    with pytest.raises(GitHubUnavailable) as caught:
        await review(
            f"{fake_github.server_url}/acme/widget/pull/1", fake_github.settings(tmp_path / "c")
        )
    assert caught.value.message == cache_module.FETCH_FAILED
    assert not sentinel.exists()


# --- concurrency ---


@pytest.mark.anyio
async def test_concurrent_reviews_of_one_pull_request_fetch_once(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request(
        "acme", "widget", 7, base={"a.py": "one\n"}, head={"a.py": "two\n"}
    )
    fake_github.git_delay = 0.05  # widen the window in which fetches could overlap
    settings = fake_github.settings(tmp_path / "cache")

    async def one() -> str:
        async with open_pull_request(pull.url, settings) as prepared:
            text = await asyncio.to_thread(diff_of, prepared)
            await asyncio.sleep(0.02)
            return text

    diffs = await asyncio.gather(*(one() for _ in range(6)))
    assert all("+two" in text for text in diffs)
    assert fake_github.fetches("acme", "widget") == 1


@pytest.mark.anyio
async def test_concurrent_reviews_of_different_pull_requests_share_one_store(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pulls = [
        fake_github.pull_request("acme", "widget", n, head={f"change{n}.py": f"CHANGE-{n}\n"})
        for n in range(1, 6)
    ]
    fake_github.git_delay = 0.02
    settings = fake_github.settings(tmp_path / "cache")

    async def one(pull: PullRequestFixture) -> tuple[Path, str]:
        async with open_pull_request(pull.url, settings) as prepared:
            return prepared.git_dir, await asyncio.to_thread(diff_of, prepared)

    results = await asyncio.gather(*(one(pull) for pull in pulls))
    assert len({git_dir for git_dir, _ in results}) == 1
    for number, (_, diff) in enumerate(results, start=1):
        assert f"CHANGE-{number}" in diff
        assert sum(f"CHANGE-{n}" in diff for n in range(1, 6)) == 1
    assert len(list((tmp_path / "cache" / "repositories").iterdir())) == 1


_WORKER = """
import asyncio, sys
from pr_review_api.github.checkout import open_pull_request
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.settings import load_settings

async def main() -> None:
    async with open_pull_request(sys.argv[1], load_settings()) as pull:
        pinned = PinnedRepository.open(pull.git_dir, pull.metadata.base_sha, pull.metadata.head_sha)
        print(pinned.diff([], 10**6)[0].decode())

asyncio.run(main())
"""


def test_concurrent_reviews_in_separate_processes(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pulls = [
        fake_github.pull_request("acme", "widget", n, head={"f.py": f"PROCESS-{n}\n"})
        for n in (1, 2)
    ]
    fake_github.git_delay = 0.2
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "GITHUB_SERVER_URL": fake_github.server_url,
        "GITHUB_API_URL": fake_github.api_url,
        "PR_REVIEW_CACHE_DIR": str(tmp_path / "cache"),
    }
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, pulls[i % 2].url],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(3)
    ]
    outputs = [worker.communicate(timeout=60) for worker in workers]
    for i, (worker, (out, err)) in enumerate(zip(workers, outputs, strict=True)):
        assert worker.returncode == 0, err.decode()
        assert f"+PROCESS-{pulls[i % 2].number}" in out.decode()
    assert fake_github.fetches("acme", "widget") == 2


@pytest.mark.anyio
async def test_cancelled_review_releases_its_hold(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    fake_github.git_delay = 0.5
    settings = fake_github.settings(tmp_path / "cache").model_copy(
        update={"pr_review_cache_max_bytes": 0}
    )
    task = asyncio.create_task(review(pull.url, settings))
    for _ in range(1000):  # until the fetch has started
        if fake_github.git_requests():
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    cache = RepositoryCache(settings)
    for _ in range(200):  # the fetch thread finishes, then lets go of the repository
        if cache.evict():
            break
        await asyncio.sleep(0.05)
    assert not list((tmp_path / "cache" / "repositories").iterdir())


# --- the cache folder and eviction ---


def test_cache_path_is_a_hash_of_server_owner_and_repository(tmp_path: Path) -> None:
    settings = Settings(pr_review_cache_dir=tmp_path / "cache")
    cache = RepositoryCache(settings)
    ref = parse_pull_request_url("https://github.com/Acme/Widget/pull/7", settings)
    same = parse_pull_request_url("https://github.com/acme/widget/pull/8", settings)
    other = parse_pull_request_url("https://github.com/acme/widget2/pull/7", settings)
    key = cache.key(ref)
    assert len(key) == 32
    assert all(c in "0123456789abcdef" for c in key)
    assert cache.repository(ref) == tmp_path / "cache" / "repositories" / key
    assert cache.key(same) == key  # GitHub names are case-insensitive
    assert cache.key(other) != key
    ghes = RepositoryCache(
        Settings(github_server_url="https://ghe.example.com", pr_review_cache_dir=tmp_path)
    )
    assert (
        ghes.key(
            parse_pull_request_url("https://ghe.example.com/acme/widget/pull/7", ghes.settings)
        )
        != key
    )
    for name in ("..", "...", ".git", "-x", "a.b"):
        assert name not in cache.repository(ref).parts


@pytest.mark.anyio
async def test_cache_folder_is_private(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    await review(pull.url, fake_github.settings(tmp_path / "cache"))
    for folder in ("", "repositories", "locks", "trash"):
        assert stat.S_IMODE((tmp_path / "cache" / folder).stat().st_mode) == 0o700


@pytest.mark.anyio
async def test_unusable_cache_folder_is_a_configuration_error(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    with pytest.raises(ConfigurationError) as caught:
        await review(pull.url, fake_github.settings(blocker / "cache"))
    assert "PR_REVIEW_CACHE_DIR" in caught.value.message
    assert str(tmp_path) not in caught.value.message


async def _review_each(fake: FakeGitHub, settings: Settings, names: list[str]) -> dict[str, Path]:
    repositories: dict[str, Path] = {}
    for name in names:
        pull = fake.pull_request("acme", name, 1, base={f"{name}.txt": secrets.token_hex(8192)})
        repositories[name] = (await review(pull.url, settings)).git_dir.parent
    return repositories


@pytest.mark.anyio
async def test_least_recently_used_repositories_are_evicted_first(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    settings = fake_github.settings(tmp_path / "cache")
    repositories = await _review_each(fake_github, settings, ["a", "b", "c"])
    for when, name in enumerate(["b", "a", "c"]):  # b least recently used, c most
        os.utime(repositories[name] / "last-used", (1_000_000 + when, 1_000_000 + when))
    sizes = {name: cache_files.tree_size(path) for name, path in repositories.items()}
    bound = sizes["a"] + sizes["c"] + 1
    cache = RepositoryCache(settings.model_copy(update={"pr_review_cache_max_bytes": bound}))
    assert cache.total_size() == sum(sizes.values())
    assert cache.evict() == [repositories["b"].name]
    assert not repositories["b"].exists()
    assert repositories["a"].exists()
    assert repositories["c"].exists()
    assert cache.evict() == []  # within the bound now
    assert cache.total_size() <= bound


@pytest.mark.anyio
async def test_fetch_trims_the_cache_to_its_bound(fake_github: FakeGitHub, tmp_path: Path) -> None:
    settings = fake_github.settings(tmp_path / "cache")
    repositories = await _review_each(fake_github, settings, ["a", "b"])
    tight = settings.model_copy(update={"pr_review_cache_max_bytes": 1})
    fresh = await _review_each(fake_github, tight, ["c"])
    assert not repositories["a"].exists()
    assert not repositories["b"].exists()
    assert fresh["c"].exists()  # the repository being reviewed is kept, even over the bound
    assert not list((tmp_path / "cache" / "trash").iterdir())


@pytest.mark.anyio
async def test_repository_in_use_is_never_evicted(fake_github: FakeGitHub, tmp_path: Path) -> None:
    settings = fake_github.settings(tmp_path / "cache")
    tight = settings.model_copy(update={"pr_review_cache_max_bytes": 1})
    held = fake_github.pull_request("acme", "held", 1)
    other = fake_github.pull_request("acme", "other", 1)
    async with open_pull_request(held.url, settings) as prepared:
        other_dir = (await review(other.url, tight)).git_dir  # its fetch trims to one byte
        assert prepared.git_dir.exists()
        assert RepositoryCache(tight).evict() == [other_dir.parent.name]  # only "other" goes
        assert prepared.git_dir.exists()
        assert "change-1.txt" in diff_of(prepared)
        RepositoryCache(tight).evict()
        assert prepared.git_dir.exists()
    assert RepositoryCache(tight).evict() != []
    assert not prepared.git_dir.exists()


@pytest.mark.anyio
async def test_evicted_repository_is_fetched_again(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = fake_github.pull_request("acme", "widget", 7, head={"x.py": "AGAIN\n"})
    settings = fake_github.settings(tmp_path / "cache")
    first = await review(pull.url, settings)
    RepositoryCache(settings.model_copy(update={"pr_review_cache_max_bytes": 0})).evict()
    assert not first.git_dir.exists()
    again = await review(pull.url, settings)
    assert "+AGAIN" in diff_of(again)
    assert fake_github.fetches("acme", "widget") == 2


def test_interrupted_repository_creation_is_redone(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    settings = fake_github.settings(tmp_path / "cache")
    cache = RepositoryCache(settings)
    ref = parse_pull_request_url(pull.url, settings)
    half = cache.repository(ref) / "git"
    (half / "objects").mkdir(parents=True)  # a crash left a folder without HEAD
    (cache.repository(ref) / "git.new").mkdir()
    prepared = asyncio.run(review(pull.url, settings))
    assert has_object(prepared.git_dir, pull.head_sha)
    assert not (cache.repository(ref) / "git.new").exists()


def test_fetch_lock_is_exclusive_and_use_lock_is_shared(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    shared = cache_files.lock(path, shared=True, timeout=0)
    assert shared is not None
    again = cache_files.lock(path, shared=True, timeout=0)
    assert again is not None
    assert cache_files.lock(path, shared=False, timeout=0.05) is None
    os.close(shared)
    os.close(again)
    exclusive = cache_files.lock(path, shared=False, timeout=0)
    assert exclusive is not None
    got: list[int | None] = []
    waiter = threading.Thread(
        target=lambda: got.append(cache_files.lock(path, shared=True, timeout=5))
    )
    waiter.start()
    time.sleep(0.1)
    assert got == []
    os.close(exclusive)
    waiter.join()
    assert got[0] is not None
    os.close(got[0])


# --- measurement ---


def _fast_import(work: Path, files: dict[str, str]) -> str:
    """Commit a large tree in one `git fast-import` stream (no working tree involved)."""
    stream = [b"commit refs/heads/fast-import\ncommitter T <t@example.invalid> 1700000000 +0000\n"]
    stream.append(b"data 4\nbulk\n")
    for path, content in files.items():
        data = content.encode()
        stream.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")
    stream.append(b"done\n")
    git(work, "fast-import", "--quiet", "--done", input_bytes=b"".join(stream))
    return git(work, "rev-parse", "refs/heads/fast-import")


@pytest.mark.slow
@pytest.mark.anyio
async def test_fetch_of_a_10000_file_repository(fake_github: FakeGitHub, tmp_path: Path) -> None:
    origin = fake_github.origin("acme", "big")
    # About 1.3 KB of barely compressible text per file: a 13 MB tree.
    files = {
        f"pkg{i // 100:03}/module{i % 100:03}.py": f"VALUE_{i} = '{secrets.token_hex(640)}'\n"
        for i in range(10_000)
    }
    started = time.perf_counter()
    base = _fast_import(origin.work.path, files)
    head = origin.commit({"pkg000/module000.py": "CHANGED = True\n"}, base, "change")
    origin.set_branch("main", base)
    origin.set_pull_head(1, head)
    fake_github.set_pull("acme", "big", 1, base_sha=base, head_sha=head)
    built = time.perf_counter() - started
    settings = fake_github.settings(tmp_path / "cache")
    url = f"{fake_github.server_url}/acme/big/pull/1"

    started = time.perf_counter()
    first = await review(url, settings)
    first_seconds = time.perf_counter() - started
    first_bytes = upload_pack_bytes(fake_github, "acme", "big")

    started = time.perf_counter()
    await review(url, settings)
    same_head_seconds = time.perf_counter() - started

    newer = origin.commit({"pkg001/module001.py": "ALSO_CHANGED = True\n"}, head, "more")
    origin.set_pull_head(1, newer)
    fake_github.set_pull("acme", "big", 1, base_sha=base, head_sha=newer)
    started = time.perf_counter()
    await review(url, settings)
    new_head_seconds = time.perf_counter() - started
    new_head_bytes = upload_pack_bytes(fake_github, "acme", "big") - first_bytes

    size = RepositoryCache(settings).total_size()
    report = {
        "files": len(files),
        "build_seconds": round(built, 2),
        "first_fetch_seconds": round(first_seconds, 3),
        "first_fetch_bytes": first_bytes,
        "repeat_same_head_seconds": round(same_head_seconds, 3),
        "repeat_new_head_seconds": round(new_head_seconds, 3),
        "repeat_new_head_bytes": new_head_bytes,
        "cache_bytes": size,
        "cache_bound_bytes": settings.pr_review_cache_max_bytes,
    }
    print(json.dumps(report))
    assert "CHANGED = True" in diff_of(first)
    assert new_head_bytes < first_bytes / 100
    assert same_head_seconds < first_seconds


# --- healing: a failed fetch leaves nothing behind, a killed one is cleaned up next time ---


def partial_data(cache_dir: Path) -> list[Path]:
    """Partial packs, quarantine directories and lock files anywhere in the cache's git data."""
    repositories = cache_dir / "repositories"
    patterns = ("*/git/objects/pack/tmp_*", "*/git/objects/incoming-*", "*/git/**/*.lock")
    return [path for pattern in patterns for path in repositories.glob(pattern)]


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A 5 MiB tmpfs for the cache; skipped where mounting is not permitted."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip("mounting a small file system is not permitted here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


@pytest.mark.anyio
async def test_a_fetch_that_fills_the_disk_leaves_no_partial_pack(
    fake_github: FakeGitHub, small_filesystem: Path
) -> None:
    # 12 MB of hex digits is about 6 MB of pack: more than the 5 MiB file system holds.
    big = fake_github.pull_request("acme", "huge", 1, head={"blob.txt": secrets.token_hex(6 << 20)})
    small = fake_github.pull_request("acme", "small", 2, head={"a.py": "fine\n"})
    settings = fake_github.settings(small_filesystem / "cache")
    with pytest.raises(GitHubUnavailable):
        await review(big.url, settings)
    assert partial_data(small_filesystem / "cache") == []
    # The cache is not wedged: another repository, then the same one, can still be reviewed.
    prepared = await review(small.url, settings)
    assert has_object(prepared.git_dir, small.head_sha)
    with pytest.raises(GitHubUnavailable):
        await review(big.url, settings)
    assert partial_data(small_filesystem / "cache") == []


@pytest.mark.anyio
async def test_leftovers_of_a_killed_fetch_are_removed_by_the_next_one(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7, head={"a.py": "one\n"})
    settings = fake_github.settings(tmp_path / "cache")
    git_dir = (await review(pull.url, settings)).git_dir
    # What a fetch killed with SIGKILL leaves: a partial pack, a quarantine, ref locks.
    (git_dir / "objects/pack/tmp_pack_Ab12Cd").write_bytes(os.urandom(1 << 20))
    (git_dir / "objects/incoming-XyZ123").mkdir()
    (git_dir / "refs/pr-review/pull/7.lock").write_text("0" * 40 + "\n")
    (git_dir / "packed-refs.lock").write_text("")
    newer = pull.origin.commit({"a.py": "two\n"}, pull.head_sha, "newer")
    pull.origin.set_pull_head(7, newer)
    fake_github.set_pull("acme", "widget", 7, base_sha=pull.base_sha, head_sha=newer)
    prepared = await review(pull.url, settings)
    assert prepared.metadata.head_sha == newer
    assert has_object(git_dir, newer)
    assert partial_data(tmp_path / "cache") == []


@pytest.mark.anyio
async def test_unused_repositories_are_evicted_before_a_fetch_needs_the_space(
    fake_github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = fake_github.pull_request("acme", "old", 1)
    new = fake_github.pull_request("acme", "new", 2)
    settings = fake_github.settings(tmp_path / "cache")
    old_dir = (await review(old.url, settings)).git_dir
    # The file system now has less free space than a fetch wants: the unused one goes first.
    monkeypatch.setattr(cache_module, "FETCH_RESERVE_BYTES", 1 << 62)
    fetched: list[bool] = []
    real_fetch = RepositoryCache._fetch

    def watching(self: RepositoryCache, git_dir: Path, *args: Any) -> None:
        fetched.append(old_dir.exists())
        real_fetch(self, git_dir, *args)

    monkeypatch.setattr(RepositoryCache, "_fetch", watching)
    prepared = await review(new.url, settings)
    assert fetched == [False]  # evicted before the fetch started
    assert has_object(prepared.git_dir, new.head_sha)
