"""What the git error edge tests share: the failures injected, a repository, a corrupt object."""

from __future__ import annotations

import errno
import hashlib
import subprocess
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.errors import ReviewError
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git_runner import GitError
from pr_review_api.tools import (
    TOOLS_BY_NAME,
    execute_tool,
)
from pr_review_api.tools.execute import REPOSITORY_UNREADABLE

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
