"""Every bench script runs on a small synthetic repository and prints its ratios.

Slow (each script builds or reuses `bench/.data/quick` and runs whole reviews), so not in the
default run: `uv run pytest -m slow tests/test_bench_smoke.py`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SCRIPTS = {
    "search": [],
    "listing": [],
    "tools": [],
    "prepare": [],
    "loop": ["--rounds", "10"],
    "concurrency": ["--counts", "1,5"],
    "oneshot": [],
    "workers": ["--workers", "1,2"],
    "wide": [],
    "index": [],
    "partial": ["--shares", "0.25,0.75"],
}
# Scripts that need no repository and print their own table (a simulation).
TABLES: dict[str, list[str]] = {"affinity": []}

# On the user's own repository: scripts that write new heads (listing, workers), clone a
# checkout (search, listing, oneshot) or start pr-review processes (oneshot). Not prepare: it
# drops the machine's page cache outside --quick.
ON_YOUR_REPOSITORY = ["search", "listing", "oneshot", "workers"]


def run_script(script: str, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", f"bench.{script}", "--runs", "1", *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def assert_prints_ratios(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert [cell.strip() for cell in table[0].split("|")[1:5]] == [
        "figure",
        "ours",
        "reference",
        "ratio",
    ]
    ratios = [row.split("|")[4].strip() for row in table[2:]]
    assert any(ratio.endswith("x") for ratio in ratios), done.stdout


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_bench_script_runs_quick_and_prints_ratios(script: str) -> None:
    assert_prints_ratios(run_script(script, "--quick", *SCRIPTS[script]))


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(TABLES))
def test_bench_table_script_runs_quick(script: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{script}", "--quick", *TABLES[script]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) == 10, done.stdout  # the header and nine scenarios


def _git(cwd: Path, *args: str) -> None:
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def _state(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under `root` (the .git folder included) with its mtime and size."""
    return {
        str(path.relative_to(root)): (path.lstat().st_mtime_ns, path.lstat().st_size)
        for path in [root, *root.rglob("*")]
    }


@pytest.fixture
def your_repository(tmp_path: Path) -> Path:
    repo = tmp_path / "yours"
    (repo / "src" / "pkg").mkdir(parents=True)
    for number in range(30):
        (repo / "src" / "pkg" / f"m{number}.py").write_text(f"def f{number}():\n    return 1\n")
    (repo / "README.md").write_text("a repository of the user's\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "one")
    (repo / "src" / "pkg" / "m3.py").write_text("def f3():\n    return 3\n")
    _git(repo, "commit", "-q", "-a", "-m", "two")
    return repo


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("script", ON_YOUR_REPOSITORY)
def test_bench_script_runs_on_your_repository_and_leaves_it_unchanged(
    script: str, your_repository: Path
) -> None:
    before = _state(your_repository)
    extra = ["--workers", "1"] if script == "workers" else []
    done = run_script(script, "--repo", str(your_repository), *extra)
    assert_prints_ratios(done)
    assert "your repository: 31 files" in done.stdout
    assert _state(your_repository) == before
