"""The Makefile's targets run what CI runs: `make check` is `.ci/run`, and `lint`,
`typecheck` and `test` are, in order, the very commands `.ci/run` runs after installing."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def recipes() -> dict[str, list[str]]:
    """Each target of the Makefile with the commands of its recipe."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in (ROOT / "Makefile").read_text(encoding="utf-8").splitlines():
        target = re.match(r"^([a-z][a-z-]*):(?!=)", line)
        if target:
            current = found.setdefault(target.group(1), [])
        elif line.startswith("\t") and current is not None:
            current.append(line.strip())
        elif not line.strip() or not line.startswith("#"):
            current = None
    return found


def ci_steps() -> list[str]:
    """The project's own commands in .ci/run (after installing uv and the locked packages)."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.startswith("uv run ")]


def test_check_is_exactly_the_ci_script() -> None:
    assert recipes()["check"] == [".ci/run"]
    assert (ROOT / ".ci" / "run").stat().st_mode & 0o111, ".ci/run must stay executable"


def test_lint_typecheck_and_test_are_the_ci_steps_in_order() -> None:
    found = recipes()
    steps = found["lint"] + found["typecheck"] + found["test"]
    assert steps == ci_steps()
    assert len(steps) == 5  # ruff check, ruff format --check, lint-imports, mypy, pytest


def test_the_habits_people_expect_are_there() -> None:
    assert {"check", "lint", "typecheck", "test", "test-fast", "bench", "fmt"} <= set(recipes())
    assert recipes()["test-fast"] == ["uv run pytest --fast"]


def test_make_bench_runs_every_bench_script() -> None:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    listed = re.search(r"^BENCH_SCRIPTS := (.+)$", text, re.MULTILINE)
    assert listed is not None
    scripts = {
        path.stem
        for path in (ROOT / "bench").glob("*.py")
        if "\ndef main(" in path.read_text(encoding="utf-8")
    }
    assert set(listed.group(1).split()) == scripts


def test_pre_commit_runs_the_lint_steps_ruff() -> None:
    text = (ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8")
    entries = re.findall(r"entry: (.+)", text)
    assert entries == ["uv run ruff check --fix", "uv run ruff format"]
    assert recipes()["fmt"] == [f"{entry} src tests bench" for entry in entries]
