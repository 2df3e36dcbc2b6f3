"""Git hardening, proved in the style of git's own test suite: plant a trap, run, check the
sentinel file is missing (`test_path_is_missing`).

Every trap runs `touch <sentinels>/<name>` if git ever executes it: hooks (in `.git/hooks` and
in a `core.hooksPath`), `core.fsmonitor`, clean/smudge/process filters, textconv and external
diff drivers, `diff.external`, pagers, `remote.*.uploadpack` and an `ext::` remote, credential
helpers and askpass, `gpg.program` behind a signed commit, `core.alternateRefsCommand`, all
through the repository's own config, an `include.path`, `info/attributes` and the tree's
`.gitattributes`; plus the environment: `GIT_EXTERNAL_DIFF`, `GIT_PAGER`, `GIT_TRACE*`,
`GIT_CONFIG_PARAMETERS`, `GIT_EXEC_PATH`, a hostile `$HOME/.gitconfig`, proxies.

Each trap is first shown to be live: plain git (no hardening) springs it in a twin
repository. Then pr-review does everything it does with git (open, the four tools, the
changed files, final-review checks, a whole local review, a whole pull-request review
through the cache) and the sentinel folder must stay empty.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pr_review_api.git.repository import PinnedRepository, resolve_commit
from pr_review_api.loop.final_review import parse_final_review
from pr_review_api.loop.run import run_review
from pr_review_api.loop.workspace import ChangeTarget, LocalTarget
from pr_review_api.settings import load_settings
from pr_review_api.tools import TOOLS_BY_NAME, execute_tool
from tests.builders import final_turn
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import ScriptedProvider, tool_call_turn
from tests.gitrepo import GitRepo, git
from tests.hostile.corpus import ObjectWriter
from tests.hostile.support import FIGURES

HOOKS = (
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "sendemail-validate",
    "fsmonitor-watchman",
    "p4-changelist",
    "p4-prepare-changelist",
    "p4-post-changelist",
    "p4-pre-submit",
    "post-index-change",
)
GITATTRIBUTES = (
    "* diff=trap merge=trap\n*.py filter=trap\n*.txt filter=lfs diff=lfs merge=lfs -text\n"
)


def touch(sentinels: Path, name: str) -> str:
    """A shell command that creates the sentinel `name`."""
    return f"touch {shlex.quote(str(sentinels / name))}"


def trap_script(sentinels: Path, name: str) -> str:
    """An executable that creates the sentinel `name`, then acts as `cat`: it works both where
    git runs a shell command (filters, textconv) and where it runs a program (gpg.program)."""
    script = sentinels.parent / "traps" / name
    script.parent.mkdir(exist_ok=True)
    script.write_text(f'#!/bin/sh\n{touch(sentinels, name)}\nexec cat "$@"\n')
    script.chmod(0o755)
    return json.dumps(str(script))


def hostile_config(sentinels: Path, hooks_path: Path, include: Path) -> str:
    """A repository config whose every command is a trap."""

    def trap(name: str) -> str:
        return trap_script(sentinels, name)

    return f"""
[core]
\thooksPath = {hooks_path}
\tfsmonitor = {trap("fsmonitor")}
\tpager = {trap("pager")}
\tsshCommand = {trap("ssh-command")}
\tgitProxy = {trap("git-proxy")}
\taskPass = {trap("askpass")}
\talternateRefsCommand = {trap("alternate-refs")}
\teditor = {trap("editor")}
[pager]
\tdiff = {trap("pager-diff")}
\tgrep = {trap("pager-grep")}
\tlog = {trap("pager-log")}
[diff]
\texternal = {trap("diff-external")}
[diff "trap"]
\ttextconv = {trap("textconv")}
\tcommand = {trap("diff-driver")}
[diff "lfs"]
\ttextconv = {trap("textconv-lfs")}
[filter "trap"]
\tclean = {trap("filter-clean")}
\tsmudge = {trap("filter-smudge")}
\trequired = true
[filter "lfs"]
\tclean = {trap("lfs-clean")}
\tsmudge = {trap("lfs-smudge")}
\tprocess = {trap("lfs-process")}
[merge "trap"]
\tdriver = {trap("merge-driver")}
[credential]
\thelper = {json.dumps("!" + touch(sentinels, "credential-helper") + "; true")}
[gpg]
\tprogram = {trap("gpg")}
[gpg "ssh"]
\tprogram = {trap("gpg-ssh")}
[log]
\tshowSignature = true
[uploadpack]
\tpackObjectsHook = {trap("pack-objects-hook")}
[protocol "ext"]
\tallow = always
[remote "origin"]
\turl = {json.dumps("ext::sh -c " + touch(sentinels, "ext-remote").replace(" ", "% "))}
\tuploadpack = {trap("uploadpack")}
\treceivepack = {trap("receivepack")}
\tfetch = +refs/heads/*:refs/remotes/origin/*
[remote "plain"]
\turl = {include.parent / "elsewhere.git"}
\tuploadpack = {trap("uploadpack-plain")}
[include]
\tpath = {include}
[sequence]
\teditor = {trap("sequence-editor")}
"""


def plant_hooks(folder: Path, sentinels: Path, prefix: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in HOOKS:
        hook = folder / name
        hook.write_text(f"#!/bin/sh\n{touch(sentinels, prefix + name)}\n")
        hook.chmod(0o755)


@dataclass(frozen=True)
class Trapped:
    """A repository whose every git extension point is a trap."""

    repo: GitRepo
    base: str
    head: str
    signed: str
    sentinels: Path


def build_trapped(root: Path) -> Trapped:
    sentinels = root / "sentinels"
    sentinels.mkdir(parents=True)
    repo = GitRepo(root / "repo")
    base = repo.commit_files(
        {"README.md": "# Trapped\n", ".gitattributes": GITATTRIBUTES, "a.txt": "one\n"},
        message="base",
    )
    head = repo.commit_files({"a.txt": "one\ntwo\n", "src/app.py": "x = 1  # needle\n"})
    # A commit carrying a (fake) signature: `log --show-signature` would run gpg.program.
    writer = ObjectWriter(repo.git_dir)
    tree = git(repo.path, "rev-parse", f"{head}^{{tree}}")
    signature = "gpgsig -----BEGIN PGP SIGNATURE-----\n \n =trap\n -----END PGP SIGNATURE-----"
    raw = (
        f"tree {tree}\nparent {head}\nauthor T <t@example.invalid> 1767225600 +0000\n"
        f"committer T <t@example.invalid> 1767225600 +0000\n{signature}\n\nsigned\n"
    )
    signed = writer._object(b"commit", raw.encode())
    git_dir = repo.git_dir
    plant_hooks(git_dir / "hooks", sentinels, "hook-")
    plant_hooks(root / "hooks-path", sentinels, "hooks-path-")
    include, conditional = root / "included.config", root / "included-if.config"
    include.write_text(
        f"[core]\n\tfsmonitor = {json.dumps(touch(sentinels, 'included-fsmonitor'))}\n"
        f'[includeIf "gitdir:{git_dir}"]\n\tpath = {conditional}\n'
    )
    conditional.write_text(
        f"[diff]\n\texternal = {json.dumps(touch(sentinels, 'included-if-diff-external'))}\n"
    )
    with (git_dir / "config").open("a") as config:
        config.write(hostile_config(sentinels, root / "hooks-path", include))
    (git_dir / "info").mkdir(exist_ok=True)
    (git_dir / "info" / "attributes").write_text(GITATTRIBUTES)
    (git_dir / ".gitattributes").write_text(GITATTRIBUTES)  # git's cwd is the git dir
    elsewhere = root / "elsewhere.git"
    git(root, "init", "-q", "--bare", str(elsewhere))
    (git_dir / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (git_dir / "objects" / "info" / "alternates").write_text(f"{elsewhere / 'objects'}\n")
    return Trapped(repo, base, head, signed, sentinels)


def sprung(sentinels: Path) -> list[str]:
    return sorted(path.name for path in sentinels.iterdir())


def plain_git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> None:
    """Git with no hardening at all, as a careless tool would run it; failures are fine."""
    base = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "T",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "T",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        check=False,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def hostile_environment(root: Path, sentinels: Path) -> dict[str, str]:
    """Variables a careless git invocation would inherit from the service's environment."""
    home = root / "evil-home"
    (home / ".config" / "git").mkdir(parents=True, exist_ok=True)
    evil = f"[core]\n\tfsmonitor = {json.dumps(touch(sentinels, 'home-fsmonitor'))}\n"
    evil += f"[diff]\n\texternal = {json.dumps(touch(sentinels, 'home-diff-external'))}\n"
    (home / ".gitconfig").write_text(evil)
    (home / ".config" / "git" / "config").write_text(evil)
    exec_path = root / "evil-exec-path"
    exec_path.mkdir(exist_ok=True)
    for program in ("git-upload-pack", "git-remote-http", "git-remote-https", "git-grep"):
        script = exec_path / program
        script.write_text(f"#!/bin/sh\n{touch(sentinels, 'exec-path-' + program)}\n")
        script.chmod(0o755)
    command = touch(sentinels, "env-command")
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
        "GIT_CONFIG_SYSTEM": str(home / ".gitconfig"),
        "GIT_CONFIG_PARAMETERS": f"'core.fsmonitor'='{touch(sentinels, 'env-parameters')}'",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "diff.external",
        "GIT_CONFIG_VALUE_0": touch(sentinels, "env-config-count"),
        "GIT_EXTERNAL_DIFF": command,
        "GIT_PAGER": command,
        "PAGER": command,
        "GIT_EDITOR": command,
        "GIT_SSH_COMMAND": command,
        "GIT_ASKPASS": command,
        "SSH_ASKPASS": command,
        "GIT_EXEC_PATH": str(exec_path),
        "GIT_TRACE": str(sentinels / "trace"),
        "GIT_TRACE_PACKET": str(sentinels / "trace-packet"),
        "GIT_TRACE_PERFORMANCE": str(sentinels / "trace-performance"),
        "GIT_TRACE2": str(sentinels / "trace2"),
        "GIT_TRACE2_EVENT": str(sentinels / "trace2-event"),
        "GIT_TRACE_CURL": str(sentinels / "trace-curl"),
        "GIT_DIR": str(root / "not-the-repository"),
        "GIT_WORK_TREE": str(root),
        "GIT_INDEX_FILE": str(sentinels / "index"),
        "GIT_OBJECT_DIRECTORY": str(root / "no-objects"),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(root / "no-objects"),
        "GIT_ALLOW_PROTOCOL": "ext:file:http:https",
        "GIT_PROTOCOL_FROM_USER": "1",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "ALL_PROXY": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9",
    }


def test_the_planted_traps_are_live_for_plain_git(tmp_path: Path) -> None:
    """The control: git run without pr-review's hardening springs the traps."""
    twin = build_trapped(tmp_path)
    path = twin.repo.path
    plain_git(path, "diff", twin.base, twin.head)  # external diff (from an includeIf)
    plain_git(path, "diff", "--no-ext-diff", twin.base, twin.head)  # textconv
    plain_git(path, "status")  # fsmonitor (from an include), a process filter
    plain_git(path, "add", "src/app.py")  # clean filter
    plain_git(path, "commit", "-q", "--allow-empty", "-m", "x")  # hooks
    plain_git(path, "log", "-1", "--show-signature", twin.signed)  # gpg
    plain_git(path, "fetch", "-q", "origin")  # ext:: remote
    plain_git(path, "fetch", "-q", "plain")  # uploadpack
    plain_git(
        path,
        "diff",
        twin.base,
        twin.head,
        env={"GIT_EXTERNAL_DIFF": touch(twin.sentinels, "env-command"), "GIT_TRACE": "1"},
    )
    plain_git(path, "status", env={"GIT_TRACE": str(twin.sentinels / "trace")})
    fired = set(sprung(twin.sentinels))
    # By kind, so that a git version springing a neighbouring trap instead still counts.
    kinds = {
        "hooks": {name for name in fired if name.startswith(("hook-", "hooks-path-"))},
        "fsmonitor": fired & {"fsmonitor", "included-fsmonitor"},
        "filters": fired & {"filter-clean", "filter-smudge", "lfs-clean", "lfs-process"},
        "diff drivers": fired
        & {"textconv", "textconv-lfs", "diff-driver", "diff-external", "included-if-diff-external"},
        "remotes": fired & {"ext-remote", "uploadpack", "uploadpack-plain"},
        "gpg": fired & {"gpg"},
        "environment": fired & {"env-command", "trace"},
    }
    dead = sorted(kind for kind, names in kinds.items() if not names)
    assert not dead, f"kinds of trap plain git did not spring: {dead} (fired: {sorted(fired)})"
    FIGURES["git traps shown live"] += len(fired)


@pytest.fixture
def trapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Trapped]:
    twin = build_trapped(tmp_path)
    for name, value in hostile_environment(tmp_path, twin.sentinels).items():
        monkeypatch.setenv(name, value)
    yield twin
    assert sprung(twin.sentinels) == []  # test_path_is_missing, for every trap at once
    FIGURES["git trap runs with no sentinel"] += 1


def test_every_repository_operation_springs_no_trap(trapped: Trapped) -> None:
    git_dir = trapped.repo.git_dir
    pager = touch(trapped.sentinels, "grep-pager")
    for revision in ("HEAD", trapped.base, "main", trapped.signed):
        assert resolve_commit(git_dir, revision) is not None
    for head in (trapped.head, trapped.signed):
        repo = PinnedRepository.open(git_dir, trapped.base, head)
        repo.changed_files()
        calls = [
            ("list_repository_files", {}),
            ("read_repository_file", {"path": "a.txt"}),
            ("read_repository_file", {"path": "src/app.py"}),
            ("search_repository", {"query": "needle"}),
            ("search_repository", {"query": "one", "path": "a.txt"}),
            ("inspect_git_diff", {}),
            ("inspect_git_diff", {"paths": ["a.txt", ".gitattributes"]}),
            # Option injection: each of these would write or run something if git read it
            # as an option rather than as a pathspec or a pattern.
            ("inspect_git_diff", {"paths": [f"--output={trapped.sentinels}/diff-output"]}),
            ("search_repository", {"query": f"--open-files-in-pager={pager}"}),
            ("search_repository", {"query": "-O" + pager}),
            ("search_repository", {"query": "x", "path": f"--output={trapped.sentinels}/x"}),
        ]
        for name, arguments in calls:
            outcome = execute_tool(
                repo, name, TOOLS_BY_NAME[name].arguments.model_validate(arguments)
            )
            assert outcome.ok or outcome.result["error"]["code"] == "path_not_found", name
        review = {
            "summary": "s",
            "findings": [
                {
                    "severity": "low",
                    "title": "t",
                    "explanation": "e",
                    "path": "a.txt",
                    "line": 2,
                    "evidence": "e",
                    "recommendation": "r",
                }
            ],
            "notes": [],
        }
        parse_final_review(json.dumps(review), repo)


def _scripted_review(provider: ScriptedProvider) -> None:
    provider.script(
        tool_call_turn(
            [
                ("c1", "list_repository_files", {}),
                ("c2", "read_repository_file", {"path": "a.txt"}),
                ("c3", "search_repository", {"query": "needle"}),
                ("c4", "inspect_git_diff", {}),
            ]
        ),
        final_turn(summary="ok"),
    )


def test_a_whole_local_review_springs_no_trap(trapped: Trapped) -> None:
    with ScriptedProvider() as provider:
        _scripted_review(provider)
        settings = load_settings(opencode_api_key=PROVIDER_KEY, opencode_base_url=provider.base_url)
        target = LocalTarget(trapped.repo.path, trapped.base, trapped.head)
        result = asyncio.run(run_review(target, settings))
        provider.assert_complete()
    assert result.termination_reason == "final_review"
    assert result.tool_calls == 4


def test_a_whole_pull_request_review_through_the_cache_springs_no_trap(
    trapped: Trapped, tmp_path: Path
) -> None:
    server = FakeGitHub(tmp_path / "fake-github")
    try:
        pull = server.pull_request(
            "acme",
            "trapped",
            7,
            base={".gitattributes": GITATTRIBUTES, "a.txt": "one\n"},
            head={
                "a.txt": "one\ntwo\n",
                ".gitmodules": '[submodule "x"]\n\tpath = x\n\turl = ext::sh -c touch% /tmp/x\n',
            },
        )
        with ScriptedProvider() as provider:
            _scripted_review(provider)
            settings = server.settings(
                tmp_path / "cache",
                token=GITHUB_TOKEN,
                opencode_api_key=PROVIDER_KEY,
                opencode_base_url=provider.base_url,
            )
            result = asyncio.run(run_review(ChangeTarget(pull.url), settings))
            provider.assert_complete()
    finally:
        server.close()
    assert result.termination_reason == "final_review"
    cache_git = [path for path in (tmp_path / "cache").rglob("hooks") if path.is_dir()]
    for hooks in cache_git:  # the cache's own repositories hold no live hook either
        assert not [hook for hook in hooks.iterdir() if not hook.name.endswith(".sample")]
