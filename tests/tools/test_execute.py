"""Dispatch: every tool failure is an `ok: false` result with a contract code."""

from __future__ import annotations

from typing import Any

import pytest

from pr_review_api import tools
from pr_review_api.git.repository import PinnedRepository
from tests.tools.support import (
    ERROR_CODES,
    call,
    error_code,
)

# --- every result ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("list_repository_files", {"path": "nope"}),
        ("read_repository_file", {"path": "links/to_outside"}),
        ("search_repository", {"query": "x", "path": "README.md/x"}),
        ("inspect_git_diff", {"paths": [".git"]}),
    ],
)
def test_tool_failures_are_ok_false_results_with_a_contract_code(
    pinned: PinnedRepository, name: str, arguments: dict[str, Any]
) -> None:
    outcome = call(pinned, name, **arguments)
    assert outcome.ok is False
    assert error_code(outcome) in ERROR_CODES
    assert outcome.preview_text == outcome.result["error"]["message"]
    assert str(pinned.git_dir) not in outcome.content


# --- the package ------------------------------------------------------------------------------


def test_the_package_exports_its_public_names_in_a_sorted_all() -> None:
    def isort_key(name: str) -> tuple[int, str]:  # ruff's RUF022: CONSTANTS, Classes, functions
        kind = 0 if name.isupper() else 1 if name[0].isupper() else 2
        return kind, name

    assert tools.__all__ == sorted(tools.__all__, key=isort_key)
    assert len(set(tools.__all__)) == len(tools.__all__)
    for name in tools.__all__:
        assert getattr(tools, name) is not None
    public = {name for name in vars(tools) if not name.startswith("_")}
    modules = {"arguments", "budget", "execute", "schemas"}
    modules |= {"list_files", "read_file", "search", "diff"}  # one per tool
    assert public - modules == set(tools.__all__)
    assert "tools_json" not in public  # dead code once: tests dump TOOLS
