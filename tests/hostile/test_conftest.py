"""The hostile suite's figures (conftest.py) are printed after a session only with `-v`: a
newcomer's `uv run pytest` is not followed by lines of figures.

Each check is a real pytest process, kept small so that it costs about a second even on a
busy machine (the first version ran a test module that imports the whole
service, with every installed plugin, twice, and reached the 120 s timeout under load): the
hostile conftest is loaded as the only plugin (`-p`, no plugin autoload) and runs around one
test of a few lines, in a folder of this test's own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import logging


def test_probe():
    logging.getLogger("probe").warning("nothing secret")
"""


def session(tmp_path: Path, *flags: str) -> str:
    """The output of a pytest session of one probe test under the hostile conftest."""
    probe = tmp_path / "probe"
    probe.mkdir(exist_ok=True)
    (probe / "test_probe.py").write_text(PROBE, encoding="utf-8")
    environment = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.hostile.conftest",
            f"--basetemp={tmp_path / 'basetemp'}",
            f"--rootdir={probe}",
            *flags,
            str(probe / "test_probe.py"),
        ],
        cwd=ROOT,  # where `tests` is importable from
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
    return done.stdout


def test_the_hostile_figures_are_printed_only_with_verbose(tmp_path: Path) -> None:
    assert "hostile-world figures" not in session(tmp_path, "-q")
    verbose = session(tmp_path, "-v")
    assert "hostile-world figures" in verbose
    assert "log records scanned for secrets: 1" in verbose
