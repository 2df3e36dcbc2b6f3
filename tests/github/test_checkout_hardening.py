"""The repository cache (fetch/cache.py): every git invocation is hardened, and hostile
content or configuration in a fetched repository runs nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pr_review_api.errors import GitHubUnavailable
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git_runner import run_git
from pr_review_api.github import checkout as cache_module
from pr_review_api.github.git_http import fetch_config
from pr_review_api.settings import Settings
from tests.conftest import GITHUB_TOKEN
from tests.fakes.github_server import FakeGitHub
from tests.github.support import Launch, config_of, diff_of, our_git, review
from tests.gitrepo import FILE, GITLINK, LINK, git

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
    assert fetch_config(https, None).allowed_protocols == ("https",)
    local = fake_github.settings(tmp_path)
    assert fetch_config(local, None).allowed_protocols == ("http",)
    git_dir = tmp_path / "probe.git"
    git(tmp_path, "init", "-q", "--bare", str(git_dir))
    for url in (
        f"file://{fake_github.repository('acme', 'widget').bare}",
        "ext::sh -c true",
        "ssh://127.0.0.1/x",
    ):
        config = fetch_config(local, None)
        done = run_git(git_dir, ["ls-remote", "--end-of-options", url], config=config, check=False)
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
    origin = fake_github.repository("acme", "widget")
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
    origin = fake_github.repository("acme", "widget")
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
