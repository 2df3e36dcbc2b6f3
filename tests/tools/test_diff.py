"""inspect_git_diff, rule by rule (seed/tool-calling.md, specification §7)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.git.repository import PinnedRepository
from tests.gitrepo import GitRepo, git
from tests.tools.support import (
    call,
    error_code,
    escaped_size,
    size,
)

# --- inspect_git_diff -----------------------------------------------------------------------

HEAVY_LINE = 'quotes " and \\ and \x01 controls\n'


@dataclass(frozen=True)
class DiffWorld:
    repo: GitRepo
    fork: str
    base: str
    head: str

    def pinned(self) -> PinnedRepository:
        return PinnedRepository.open(self.repo.git_dir, self.base, self.head)


@pytest.fixture(scope="module")
def diff_world(tmp_path_factory: pytest.TempPathFactory) -> DiffWorld:
    """A head branch that forked, and a base branch that advanced after the fork."""
    repo = GitRepo(tmp_path_factory.mktemp("diff") / "repo")
    fork = repo.commit_files(
        {"a.txt": "alpha\n", "b.txt": "bravo\n", "docs/c.md": "charlie\n"}, "fork point"
    )
    git(repo.path, "checkout", "-q", "-b", "feature")
    head = repo.commit_files(
        {"a.txt": "alpha\nhead change\n", "docs/c.md": "charlie\nhead docs\n"}, "head 1"
    )
    head = repo.commit_files({"heavy.txt": HEAVY_LINE * 8000}, "head 2")
    repo.checkout("main")
    base = repo.commit_files(
        {"b.txt": "bravo\nBASE ONLY change\n", "base_only.txt": "BASE ONLY file\n"}, "base"
    )
    return DiffWorld(repo, fork, base, head)


def test_diff_runs_from_the_merge_base_to_head(diff_world: DiffWorld) -> None:
    pinned = diff_world.pinned()
    assert pinned.revisions.merge_base_sha == diff_world.fork
    outcome = call(pinned, "inspect_git_diff", max_bytes=131072)
    diff = outcome.result["diff"]
    assert "+head change" in diff
    assert "+head docs" in diff
    assert "BASE ONLY" not in diff
    assert "base_only.txt" not in diff
    assert "b/b.txt" not in diff


def test_diff_result_has_the_contract_shape(diff_world: DiffWorld) -> None:
    outcome = call(diff_world.pinned(), "inspect_git_diff", paths=["a.txt"])
    assert outcome.result == {
        "ok": True,
        "paths": ["a.txt"],
        "diff": outcome.result["diff"],
        "bytes": len(outcome.result["diff"].encode()),
        "truncated": False,
    }
    assert outcome.result["diff"].startswith("diff --git a/a.txt b/a.txt\n")
    assert outcome.result["diff"].endswith(" alpha\n+head change\n")


def test_diff_is_narrowed_to_paths(diff_world: DiffWorld) -> None:
    diff = call(diff_world.pinned(), "inspect_git_diff", paths=["docs"]).result["diff"]
    assert "docs/c.md" in diff
    assert "a.txt" not in diff
    assert "heavy.txt" not in diff


def test_diff_paths_are_normalized_and_deduplicated(diff_world: DiffWorld) -> None:
    result = call(
        diff_world.pinned(), "inspect_git_diff", paths=["./a.txt", "a.txt", "docs/"]
    ).result
    assert result["paths"] == ["a.txt", "docs"]


def test_diff_paths_are_literal_not_globs(diff_world: DiffWorld) -> None:
    for path in ("*.txt", ":(glob)**", ":/a.txt"):
        assert call(diff_world.pinned(), "inspect_git_diff", paths=[path]).result["diff"] == ""


@pytest.mark.parametrize("max_bytes", [1, 10, 100, 4096])
def test_diff_is_capped_at_max_bytes(diff_world: DiffWorld, max_bytes: int) -> None:
    pinned = diff_world.pinned()
    full = call(pinned, "inspect_git_diff", max_bytes=131072).result["diff"]
    result = call(pinned, "inspect_git_diff", max_bytes=max_bytes).result
    assert result["truncated"] is True
    assert result["bytes"] == len(result["diff"].encode()) <= max_bytes
    assert full.startswith(result["diff"])


def test_diff_escaped_size_stays_within_max_bytes(diff_world: DiffWorld) -> None:
    result = call(diff_world.pinned(), "inspect_git_diff", paths=["heavy.txt"]).result
    assert result["truncated"] is True
    assert escaped_size(result["diff"]) <= 65536
    assert escaped_size(result["diff"]) > 60_000
    assert result["bytes"] < 65536  # escaping, not the raw bytes, bound the cut


def test_diff_whole_result_is_compact_json(diff_world: DiffWorld) -> None:
    outcome = call(diff_world.pinned(), "inspect_git_diff")
    assert outcome.content == json.dumps(outcome.result, separators=(",", ":"), ensure_ascii=False)
    assert size(outcome) <= 65536 + 200


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("..", "outside_repository"),
        ("../a.txt", "outside_repository"),
        ("docs/../a.txt", "outside_repository"),
        ("/etc/passwd", "outside_repository"),
        ("C:/x", "outside_repository"),
        (".git", "invalid_path"),
        (".git/config", "invalid_path"),
        (".GIT", "invalid_path"),
        ("a\\b", "invalid_path"),
        ("a\x00b", "invalid_path"),
        ("", "invalid_path"),
        (".", "invalid_path"),
    ],
)
def test_diff_paths_are_validated(diff_world: DiffWorld, path: str, code: str) -> None:
    outcome = call(diff_world.pinned(), "inspect_git_diff", paths=["a.txt", path])
    assert error_code(outcome) == code


@pytest.mark.parametrize("path", ["--output=x", "-R", "--ext-diff", "--textconv"])
def test_diff_option_like_paths_are_literal_and_create_no_file(
    diff_world: DiffWorld, tmp_path: Path, path: str
) -> None:
    outcome = call(diff_world.pinned(), "inspect_git_diff", paths=[path])
    assert outcome.result["diff"] == ""
    assert outcome.result["paths"] == [path]
    assert not (diff_world.repo.git_dir / "x").exists()
    assert not (diff_world.repo.path / "x").exists()
    assert not (tmp_path / "x").exists()


def test_diff_runs_git_with_the_exact_argument_vector(
    diff_world: DiffWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    pinned = diff_world.pinned()
    recorded: list[tuple[list[str], dict[str, Any]]] = []
    real_popen = subprocess.Popen

    def recording_popen(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        recorded.append((list(args), kwargs))
        return real_popen(args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", recording_popen)  # as pr_review_api.git_runner sees it
    call(pinned, "inspect_git_diff", paths=["a.txt", "docs"])
    [(argv, kwargs)] = recorded
    assert argv == [
        "git",
        f"--git-dir={diff_world.repo.git_dir}",
        "diff",
        "--no-ext-diff",
        "--no-textconv",
        diff_world.fork,
        diff_world.head,
        "--",
        "a.txt",
        "docs",
    ]
    assert not kwargs.get("shell")
    env = kwargs["env"]
    assert env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert env["GIT_CONFIG_GLOBAL"] == env["HOME"]  # os.devnull
    assert env["GIT_LITERAL_PATHSPECS"] == "1"
    config = {
        (env[f"GIT_CONFIG_KEY_{n}"], env[f"GIT_CONFIG_VALUE_{n}"])
        for n in range(int(env["GIT_CONFIG_COUNT"]))
    }
    assert {("core.pager", "cat"), ("diff.external", ""), ("core.quotePath", "true")} <= config


def _plant_hostile_config(repo: GitRepo, sentinel: Path) -> None:
    """Local config, attributes and hooks that would each run `touch sentinel`."""
    touch = f"sh -c 'touch {sentinel}'"
    with (repo.git_dir / "config").open("a") as config:
        config.write(
            f"[diff]\n\texternal = {touch}\n"
            f'[diff "evil"]\n\ttextconv = {touch}\n\tcommand = {touch}\n'
            f"[core]\n\tfsmonitor = {touch}\n\tpager = {touch}\n\thooksPath = hooks\n"
            f"[pager]\n\tdiff = {touch}\n\tgrep = {touch}\n"
            f'[filter "evil"]\n\tclean = {touch}\n\tsmudge = {touch}\n\tprocess = {touch}\n'
            "[color]\n\tui = always\n\tdiff = always\n\tgrep = always\n"
            "[grep]\n\tcolumn = true\n\tpatternType = perl\n"
            "[diff]\n\tnoprefix = true\n\tmnemonicPrefix = true\n"
        )
    attributes = "* diff=evil filter=evil\n"
    (repo.path / ".gitattributes").write_text(attributes)
    (repo.git_dir / "info").mkdir(exist_ok=True)
    (repo.git_dir / "info" / "attributes").write_text(attributes)
    for hooks in (repo.git_dir / "hooks", repo.path / "hooks"):
        hooks.mkdir(exist_ok=True)
        for name in ("post-checkout", "post-index-change", "reference-transaction", "pre-commit"):
            hook = hooks / name
            hook.write_text(f"#!/bin/sh\ntouch {sentinel}\n")
            hook.chmod(0o755)


def test_repository_config_cannot_run_commands_or_change_output(
    repo: GitRepo, tmp_path: Path
) -> None:
    base = repo.commit_files({"a.txt": "alpha\n", ".gitattributes": "* diff=evil\n"})
    head = repo.commit_files({"a.txt": "alpha\nneedle\n"})
    sentinel = tmp_path / "SENTINEL"
    _plant_hostile_config(repo, sentinel)
    pinned = PinnedRepository.open(repo.git_dir, base, head)

    diff = call(pinned, "inspect_git_diff").result["diff"]
    assert diff.startswith("diff --git a/a.txt b/a.txt\n")
    assert diff.endswith(" alpha\n+needle\n")
    assert "\x1b" not in diff
    search = call(pinned, "search_repository", query="needle").result
    assert search["matches"] == [{"path": "a.txt", "line": 2, "excerpt": "needle"}]
    assert call(pinned, "search_repository", query="a.*").result["matches"] == []
    assert call(pinned, "read_repository_file", path="a.txt").result["content"] == (
        "1: alpha\n2: needle"
    )
    assert call(pinned, "list_repository_files").result["paths"] == [".gitattributes", "a.txt"]
    assert not sentinel.exists()


@pytest.mark.parametrize("mode", ["log", "diff"])
def test_diff_shows_gitlink_shas_never_a_submodule_read_from_git_modules(
    tmp_path: Path, mode: str
) -> None:
    sub = GitRepo(tmp_path / "sub")
    sub.commit_files({"x.txt": "SUBMODULE CONTENT ONE\n"}, "SUBMODULE SUBJECT ONE")
    repo = GitRepo(tmp_path / "repo")
    repo.commit_files({"a.txt": "a\n"})
    git(
        repo.path,
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        str(sub.path),
        "lib",
    )
    base = repo.commit_files({}, "add submodule")
    new = sub.commit_files({"x.txt": "SUBMODULE CONTENT TWO\n"}, "SUBMODULE SUBJECT TWO")
    git(repo.path / "lib", "fetch", "-q", "origin")
    git(repo.path / "lib", "checkout", "-q", new)
    head = repo.commit_files({}, "bump submodule")
    with (repo.git_dir / "config").open("a") as config:
        config.write(f"[diff]\n\tsubmodule = {mode}\n")
    diff = call(PinnedRepository.open(repo.git_dir, base, head), "inspect_git_diff").result["diff"]
    assert f"+Subproject commit {new}" in diff
    assert "SUBMODULE" not in diff


def test_unrelated_histories_diff_from_the_base(repo: GitRepo) -> None:
    base = repo.commit_files({"a.txt": "alpha\n"})
    orphan = git(repo.path, "commit-tree", f"{base}^{{tree}}", "-m", "orphan")
    head = repo.commit_tree({"a.txt": ("100644", b"other\n")}, parent=orphan)
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    assert pinned.revisions.merge_base_sha == base
    assert "+other" in call(pinned, "inspect_git_diff").result["diff"]
