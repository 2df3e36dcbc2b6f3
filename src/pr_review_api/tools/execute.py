"""Dispatch of a validated tool call, and the one git error edge of a review's reads.

`execute_tool` runs one call whose arguments passed every check; a tool-level failure
(`ToolError`) becomes the `{"ok": false, ...}` result the model receives. `map_git_errors`
is the one place where a git failure raised while the pinned repository is read (by a tool,
or by the final-review checks) becomes a contract error.

The mapping lives here rather than in `git/`: git failures only need translating where a
review reads a repository it has already pinned, and those readers are the tools and the
final-review checks (`loop/final_review.py` imports it from here). The layer below raises its
own errors (`GitError`, `OSError`, `subprocess.TimeoutExpired`) and stays free of the contract.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pr_review_api.errors import InvalidRepository, ReviewError, ToolError
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git_runner import GIT_FAILURES, GitError
from pr_review_api.jsonutil import dumps_compact
from pr_review_api.tools.arguments import (
    DiffArguments,
    ListFilesArguments,
    ReadFileArguments,
    SearchArguments,
    ToolArguments,
)
from pr_review_api.tools.diff import inspect_git_diff
from pr_review_api.tools.list_files import list_repository_files
from pr_review_api.tools.read_file import read_repository_file
from pr_review_api.tools.search import search_repository

logger = logging.getLogger(__name__)


REPOSITORY_UNREADABLE = "The repository's data at the pinned commits could not be read."


@contextmanager
def map_git_errors(error: type[ReviewError] = InvalidRepository) -> Iterator[None]:
    """Turn a git failure inside the block into `error` with a fixed message.

    Why a review error and not a tool result: the contract's tool codes all describe the
    request (a path, a range, a kind of file), and none says "the repository could not be
    read". A git failure at a pinned commit is a repository problem (a corrupt or missing
    object, git killed or out of descriptors, a read that never finished), not something the
    model asked for wrongly: reusing a tool code (`path_not_found` for a file that exists)
    would tell the model something false, and it could not do better on the next call, since
    every later read of that object fails the same way. So the review ends with a contract
    error. `error` is chosen by who supplied the repository: `InvalidRepository` for a local
    `--repo` (the user's input; CLI exit 2), `GitHubUnavailable` for a pull request fetched
    into the cache (502), as `loop/run.py` passes it.

    The message is fixed: a `GitError`'s stderr, an `OSError`'s file name and a timeout's
    command line may hold local paths, so they are logged by kind only and never shown.
    """
    try:
        yield
    except GIT_FAILURES as exc:
        logger.warning("reading a pinned repository failed: %s", _kind(exc))
        raise error(REPOSITORY_UNREADABLE) from None


def _kind(exc: BaseException) -> str:
    if isinstance(exc, GitError):
        return str(exc)  # "git <subcommand> exited with status N": no arguments, no stderr
    if isinstance(exc, OSError) and exc.errno is not None:
        return f"{type(exc).__name__} (errno {exc.errno})"
    return type(exc).__name__


@dataclass(frozen=True)
class Tool:
    """A tool the model may call: its argument model and implementation."""

    name: str
    arguments: type[ToolArguments]
    run: Callable[[PinnedRepository, Any], dict[str, Any]]


TOOLS_BY_NAME: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool("list_repository_files", ListFilesArguments, list_repository_files),
        Tool("read_repository_file", ReadFileArguments, read_repository_file),
        Tool("search_repository", SearchArguments, search_repository),
        Tool("inspect_git_diff", DiffArguments, inspect_git_diff),
    )
}


@dataclass(frozen=True)
class ToolOutcome:
    """A tool's result document and its compact JSON, as the model will receive it."""

    result: dict[str, Any]
    content: str

    @property
    def ok(self) -> bool:
        return bool(self.result.get("ok"))

    @property
    def truncated(self) -> bool:
        return bool(self.result.get("truncated", False))

    @property
    def preview_text(self) -> str:
        """What a trace shows: the file or diff text, an error's message, else the JSON."""
        if not self.ok:
            return str(self.result["error"]["message"])
        for key in ("content", "diff"):
            if key in self.result:
                return str(self.result[key])
        return self.content


def execute_tool(
    repo: PinnedRepository,
    name: str,
    arguments: ToolArguments,
    *,
    unreadable: type[ReviewError] = InvalidRepository,
) -> ToolOutcome:
    """Run a validated call; a tool-level failure becomes an `ok: false` result.

    A git failure raises `unreadable` (see `map_git_errors`): it is never a tool result,
    and never an exception outside the contract.
    """
    try:
        with map_git_errors(unreadable):
            result = TOOLS_BY_NAME[name].run(repo, arguments)
    except ToolError as error:
        result = error.to_result()
    return ToolOutcome(result, dumps_compact(result))
