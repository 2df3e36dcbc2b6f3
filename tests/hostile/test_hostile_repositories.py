"""Every tool over every entry of every hostile repository, and every escaping request path.

For each call the suite asserts: no byte from outside the repository or from its real `.git`
reaches a result; the process opened no file and started nothing but read-only git on that
repository's object store; nothing raised; every cap held (lines, matches, page size, result
bytes, diff bytes); and every refusal is `{"ok": false}` with one of the contract's codes and
a fixed message that quotes neither the path nor a local folder.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest

from pr_review_api.errors import InvalidModelResponse, ReviewError, ToolError, ToolErrorCode
from pr_review_api.git.paths import is_dot_git, split_path
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.jsonutil import compact_size, loads_strict
from pr_review_api.loop.final_review import parse_final_review
from pr_review_api.loop.run import run_review
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.settings import (
    MAX_DIFF_BYTES,
    MAX_READ_LINES,
    MAX_SEARCH_EXCERPT_CHARS,
    MAX_TOOL_RESULT_BYTES,
    load_settings,
)
from pr_review_api.tools import TOOLS_BY_NAME, ToolOutcome, execute_tool
from tests.conftest import PROVIDER_KEY
from tests.hostile.corpus import (
    ENVIRON_SENTINEL,
    FORBIDDEN,
    FULL_SCALE,
    LOOKALIKE_SENTINEL,
    NEEDLE,
    OUTSIDE_SENTINEL,
    Corpus,
    HostileRepo,
    build_corpus,
    build_partial_clone,
    many_path,
)
from tests.hostile.support import FIGURES, READ_ONLY_GIT, assert_confined, audit, git_subcommand

CODES = frozenset(get_args(ToolErrorCode))
RESULT_KEYS = {
    "list_repository_files": {"ok", "path", "paths", "truncated", "next_cursor"},
    "read_repository_file": {
        "ok",
        "path",
        "start_line",
        "end_line",
        "total_lines",
        "content",
        "truncated",
    },
    "search_repository": {"ok", "query", "path", "matches", "truncated"},
    "inspect_git_diff": {"ok", "paths", "diff", "bytes", "truncated"},
}
QUERIES = (
    NEEDLE,
    "HOSTILE-OUTSIDE",
    "HOSTILE-GITDIR",
    "HOSTILE-LOOKALIKE",
    "HOSTILE-ENVIRON",
    ".*[",
    "-e",
    "\\",
    '"',
)
# Subprocess-backed calls per repository in the default run; `-m slow` drives every path.
DEFAULT_SAMPLE = 80


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    return build_corpus(tmp_path_factory.mktemp("hostile-corpus"))


@pytest.fixture(autouse=True)
def environ_sentinel(monkeypatch: pytest.MonkeyPatch) -> None:
    """A value only /proc/self/environ could reveal."""
    monkeypatch.setenv("HOSTILE_ENVIRON_SENTINEL", ENVIRON_SENTINEL)


class Driver:
    """Runs tool calls on one repository and checks every result."""

    def __init__(self, hostile: HostileRepo, corpus: Corpus) -> None:
        self.hostile = hostile
        self.repo = PinnedRepository.open(hostile.git_dir, hostile.base, hostile.head)
        self.local_folders = (str(corpus.root), str(hostile.git_dir))
        self.calls: Counter[str] = Counter()
        self.refusals: Counter[str] = Counter()

    def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        validated = TOOLS_BY_NAME[tool].arguments.model_validate(arguments)
        outcome = execute_tool(self.repo, tool, validated)  # any exception fails the test
        self.calls[tool] += 1
        self.check(tool, arguments, outcome)
        return outcome

    def check(self, tool: str, arguments: dict[str, Any], outcome: ToolOutcome) -> None:
        where = f"{self.hostile.name}: {tool}({arguments!r:.200})"
        assert loads_strict(outcome.content) == outcome.result, where
        for sentinel in FORBIDDEN:
            assert sentinel not in outcome.content, f"{where} leaked {sentinel}"
        if tool != "inspect_git_diff":  # a diff shows committed text, look-alikes included
            assert LOOKALIKE_SENTINEL not in outcome.content, where
        if not outcome.ok:
            self._check_refusal(where, arguments, outcome.result)
            return
        assert set(outcome.result) == RESULT_KEYS[tool], where
        getattr(self, f"_check_{tool}")(where, arguments, outcome.result, outcome.content)

    def _check_refusal(self, where: str, arguments: dict[str, Any], result: dict[str, Any]) -> None:
        assert set(result) == {"ok", "error"}, where
        error = result["error"]
        assert set(error) == {"code", "message"}, where
        assert error["code"] in CODES, where
        message = error["message"]
        assert 0 < len(message) <= 120, where
        assert message.endswith("."), where
        for folder in self.local_folders:
            assert folder not in message, where
        for value in arguments.values():
            if isinstance(value, str) and len(value) > 3:
                assert value not in message, f"{where}: the message quotes the request"
        self.refusals[error["code"]] += 1

    def _listed_file(self, where: str, path: str) -> None:
        assert split_path(path) == path.split("/"), where
        assert not any(is_dot_git(part) for part in path.split("/")), where
        self.repo.resolve_file(path)  # a listed path is a regular file inside the tree

    def _check_list_repository_files(
        self, where: str, arguments: dict[str, Any], result: dict[str, Any], content: str
    ) -> None:
        paths = result["paths"]
        assert len(content.encode()) <= MAX_TOOL_RESULT_BYTES, where
        assert len(paths) <= arguments.get("limit", 100), where
        assert paths == sorted(set(paths)), where
        assert (result["next_cursor"] is not None) == result["truncated"], where
        for path in paths:
            self._listed_file(where, path)

    def _check_read_repository_file(
        self, where: str, arguments: dict[str, Any], result: dict[str, Any], content: str
    ) -> None:
        assert len(content.encode()) <= MAX_TOOL_RESULT_BYTES, where
        start, end = result["start_line"], result["end_line"]
        assert 0 <= end - start + 1 <= MAX_READ_LINES, where
        assert end <= result["total_lines"], where
        if arguments.get("end_line") is not None:
            assert end <= arguments["end_line"], where
        lines = result["content"].split("\n") if result["content"] else []
        assert len(lines) == end - start + 1, where
        for number, line in zip(itertools.count(start), lines, strict=False):
            assert line.startswith(f"{number}: "), where
        if end < result["total_lines"]:
            assert result["truncated"], where

    def _check_search_repository(
        self, where: str, arguments: dict[str, Any], result: dict[str, Any], content: str
    ) -> None:
        assert len(content.encode()) <= MAX_TOOL_RESULT_BYTES, where
        assert len(result["matches"]) <= arguments.get("limit", 50), where
        for match in result["matches"]:
            assert set(match) == {"path", "line", "excerpt"}, where
            assert match["line"] >= 1, where
            assert len(match["excerpt"]) <= MAX_SEARCH_EXCERPT_CHARS, where
            self._listed_file(where, match["path"])
            assert self.repo.is_searchable(match["path"]), where

    def _check_inspect_git_diff(
        self, where: str, arguments: dict[str, Any], result: dict[str, Any], content: str
    ) -> None:
        cap = arguments.get("max_bytes", 65536)
        assert result["bytes"] == len(result["diff"].encode()) <= cap <= MAX_DIFF_BYTES, where
        assert len(content.encode()) <= cap + compact_size(result["paths"]) + 100, where


def _calls_for(path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every tool on one requested path."""
    yield "list_repository_files", {"path": path}
    yield "list_repository_files", {"path": "", "cursor": path, "limit": 3}
    yield "read_repository_file", {"path": path}
    yield "read_repository_file", {"path": path, "start_line": 399, "end_line": 2000}
    yield "search_repository", {"query": NEEDLE, "path": path}
    yield "inspect_git_diff", {"paths": [path], "max_bytes": 4096}


def _requests(hostile: HostileRepo, corpus: Corpus, sample: int | None) -> list[str]:
    paths = list(hostile.paths)
    if sample is not None and len(paths) > sample:
        paths = random.Random(hostile.name).sample(paths, sample)
    return list(dict.fromkeys([*corpus.probes, *paths]))


def _drive(hostile: HostileRepo, corpus: Corpus, sample: int | None) -> Driver:
    driver = Driver(hostile, corpus)
    requests = _requests(hostile, corpus, sample)
    with audit() as log:
        for path in requests:
            for tool, arguments in _calls_for(path):
                driver.call(tool, arguments)
        for path in hostile.paths:  # the in-memory tool over every entry, always
            driver.call("list_repository_files", {"path": path, "limit": 20})
        for query in QUERIES:
            driver.call("search_repository", {"query": query, "limit": 100})
        driver.call("inspect_git_diff", {"max_bytes": MAX_DIFF_BYTES})
        driver.call("inspect_git_diff", {"paths": requests[:50]})
        _list_everything(driver)
        for check in hostile.checks:
            outcome = driver.call(check.tool, dict(check.arguments))
            got = "ok" if outcome.ok else outcome.result["error"]["code"]
            assert got == check.expect, f"{hostile.name}: {check}"
    assert_confined(log, hostile.git_dir)
    FIGURES["hostile repositories"] += 1
    FIGURES["hostile paths tried"] += len(requests) + len(hostile.paths)
    FIGURES["hostile tool calls"] += sum(driver.calls.values())
    FIGURES["hostile refusals"] += sum(driver.refusals.values())
    FIGURES["hostile targeted checks"] += len(hostile.checks)
    return driver


def _list_everything(driver: Driver) -> list[str]:
    """Page through the whole tree; every listable file comes exactly once, in order."""
    cursor: str | None = None
    seen: list[str] = []
    for _ in range(10_000):
        outcome = driver.call("list_repository_files", {"limit": 200, "cursor": cursor})
        assert outcome.ok
        seen += outcome.result["paths"]
        cursor = outcome.result["next_cursor"]
        if cursor is None:
            break
    assert seen == driver.repo.snapshot.files
    return seen


def _healthy(corpus: Corpus) -> list[HostileRepo]:
    return [hostile for hostile in corpus.repos if not hostile.corrupt]


@pytest.mark.parametrize(
    "name", ["symlinks", "names", "content", "deep", "many", "modes", "diff", "missing_objects"]
)
def test_every_tool_over_every_entry_stays_inside_and_within_caps(
    corpus: Corpus, name: str
) -> None:
    hostile = next(h for h in corpus.repos if h.name == name)
    driver = _drive(hostile, corpus, DEFAULT_SAMPLE)
    assert sum(driver.refusals.values()) > 0
    assert driver.repo.snapshot.files, "the repository lists nothing"


def test_listing_never_shows_an_unreachable_or_escaping_entry(corpus: Corpus) -> None:
    names = next(h for h in corpus.repos if h.name == "names")
    listed = set(PinnedRepository.open(names.git_dir, names.base, names.head).snapshot.files)
    assert {"a/b", "odd/-rf"} <= listed
    for path in listed:
        assert ".." not in path.split("/")
        assert "\\" not in path
        assert "\n" not in path
        assert not any(is_dot_git(part) for part in path.split("/"))
    symlinks = next(h for h in corpus.repos if h.name == "symlinks")
    listed = set(
        PinnedRepository.open(symlinks.git_dir, symlinks.base, symlinks.head).snapshot.files
    )
    assert {"links/to_app", "links/chain", "chain/ok/l000"} <= listed
    assert not {"links/abs_passwd", "escape_abs", "into_git", "chain/over/l000"} & listed


def test_many_files_page_in_byte_order(corpus: Corpus) -> None:
    many = next(h for h in corpus.repos if h.name == "many")
    driver = Driver(many, corpus)
    listed = [p for p in _list_everything(driver) if p.startswith("many/")]
    assert listed == sorted(listed, key=lambda p: p.encode())
    assert listed.index("many/a-b") < listed.index("many/a.b") < listed.index("many/a/b")
    assert listed.index("many/a/c/d") < listed.index("many/a0")
    assert many_path(0) in listed


def test_final_review_paths_over_the_corpus_are_files_inside_or_refused(corpus: Corpus) -> None:
    tried = 0
    for hostile in _healthy(corpus):
        repo = PinnedRepository.open(hostile.git_dir, hostile.base, hostile.head)
        for path in [*corpus.probes, *hostile.paths[:400]]:
            finding = {
                "severity": "low",
                "title": "t",
                "explanation": "e",
                "path": path,
                "line": 1,
                "evidence": "e",
                "recommendation": "r",
            }
            content = _json({"summary": "s", "findings": [finding], "notes": []})
            try:
                repo.resolve_file(path)
                inside = True
            except ToolError:
                inside = False
            try:
                parse_final_review(content, repo)
                accepted = True
            except InvalidModelResponse:
                accepted = False
            assert not accepted or inside, f"{hostile.name}: accepted {path!r}"
            tried += 1
    FIGURES["final-review paths tried"] += tried


def _json(document: dict[str, Any]) -> str:
    return json.dumps(document, ensure_ascii=False)


def _review_error(target: LocalTarget) -> ReviewError:
    settings = load_settings(
        opencode_api_key=PROVIDER_KEY,
        opencode_base_url="http://127.0.0.1:9/v1",  # never reached: preparation fails first
        review_timeout_seconds=30,
    )
    with pytest.raises(ReviewError) as raised:
        asyncio.run(run_review(target, settings))
    return raised.value


def test_a_corrupt_tree_ends_the_review_as_invalid_repository(corpus: Corpus) -> None:
    hostile = next(h for h in corpus.repos if h.name == "corrupt_empty_name")
    error = _review_error(LocalTarget(hostile.repo.path, hostile.base, hostile.head))
    assert error.code == "invalid_repository"
    assert str(corpus.root) not in error.message
    FIGURES["hostile repositories"] += 1


def test_a_partial_clone_ends_the_review_as_invalid_repository_without_fetching(
    tmp_path: Path,
) -> None:
    clone = build_partial_clone(tmp_path)
    with audit() as log:
        error = _review_error(LocalTarget(clone.path, "HEAD", "HEAD"))
    assert error.code == "invalid_repository"
    assert str(tmp_path) not in error.message
    subcommands = {git_subcommand(argv) for argv, _ in log.processes}
    assert subcommands <= READ_ONLY_GIT  # the promisor fetch git wanted was refused
    FIGURES["hostile repositories"] += 1


def test_working_tree_links_point_outside_yet_nothing_follows_them(corpus: Corpus) -> None:
    """The on-disk links are real (a file-system reader would follow them); git's are inert."""
    hostile = corpus.repos[0]
    on_disk = hostile.repo.path / "escape_abs"
    assert on_disk.is_symlink()
    assert OUTSIDE_SENTINEL in on_disk.read_text()
    assert os.path.realpath(hostile.repo.path / "escape_rel") == str(corpus.outside)
    driver = Driver(hostile, corpus)
    for path in ("escape_rel", "escape_abs", "into_git"):
        outcome = driver.call("read_repository_file", {"path": path})
        assert outcome.result["error"]["code"] == "outside_repository"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_full_corpus_every_tool_over_every_entry(tmp_path: Path) -> None:
    corpus = build_corpus(tmp_path, FULL_SCALE)
    for hostile in _healthy(corpus):
        _drive(hostile, corpus, None)
