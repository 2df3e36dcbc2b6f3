"""Every bench script runs on a small synthetic repository and prints its ratios.

Slow (each script builds or reuses `bench/.data/quick` and runs whole reviews), so not in the
default run: `uv run pytest -m slow tests/test_bench_smoke.py`.
"""

from __future__ import annotations

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
}


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_bench_script_runs_quick_and_prints_ratios(script: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{script}", "--quick", "--runs", "1", *SCRIPTS[script]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert [cell.strip() for cell in table[0].split("|")[1:5]] == [
        "figure",
        "ours",
        "reference",
        "ratio",
    ]
    ratios = [row.split("|")[4].strip() for row in table[2:]]
    assert any(ratio.endswith("x") for ratio in ratios), done.stdout
