"""`pr-review` as a real process (cli/__main__.py and the console script), and as an
installed wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pr_review_api.tools import TOOLS
from tests.cli.support import CONSOLE_SCRIPT, run
from tests.environment import review_variables
from tests.fakes.provider_server import ScriptedProvider, stop_turn
from tests.gitrepo import GitRepo
from tests.results import SERVICE_REVIEW as REVIEW

# --- real processes ----------------------------------------------------------------------------


# Real `pr-review` processes, a wheel and a fresh venv: the default run, not --fast.
pytestmark = pytest.mark.e2e


def _process(
    args: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **(env or {})}
    return subprocess.run(
        args, capture_output=True, text=True, env=environment, timeout=120, check=False
    )


def test_console_script_and_module_run(tmp_path: Path) -> None:
    assert CONSOLE_SCRIPT.exists()
    for command in ([str(CONSOLE_SCRIPT)], [sys.executable, "-m", "pr_review_api.cli"]):
        helped = _process([*command, "--help"])
        assert helped.returncode == 0
        assert helped.stdout == run("--help").stdout
        # What it reviews, in its first sentence (docs/cli.md).
        first = " ".join(helped.stdout.split("\n\n")[1].split())
        assert "Gitea and Forgejo pull requests, GitLab merge requests and local git" in first
        tools = _process([*command, "schema", "tools"])
        assert tools.returncode == 0
        assert json.loads(tools.stdout) == TOOLS


# A Ctrl-C arriving while the command line's modules load, at a point chosen by a finder that
# raises it when the command module is imported (a real Ctrl-C cannot be aimed there).
_INTERRUPTED_LOADING = """
import sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "pr_review_api.cli.commands":
            raise KeyboardInterrupt
        return None
sys.meta_path.insert(0, Interrupt())
import pr_review_api.cli
"""


def test_a_ctrl_c_while_the_command_line_loads_exits_130_without_a_traceback() -> None:
    interrupted = _process([sys.executable, "-c", _INTERRUPTED_LOADING])
    assert interrupted.returncode == 130
    assert interrupted.stderr == ""


def test_exit_statuses_of_a_real_process(
    widget: tuple[GitRepo, str, str], scripted_provider: ScriptedProvider
) -> None:
    repo, base, head = widget
    review = [str(CONSOLE_SCRIPT), "review", "--repo", str(repo.path), "--base", base]
    env = review_variables(scripted_provider, timeout=30)
    scripted_provider.script(stop_turn(REVIEW), stop_turn(REVIEW, finish_reason="length"))

    ok = _process([*review, "--head", head, "--format", "json"], env)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["review"] == REVIEW
    assert ok.stderr == ""

    ended = _process([*review, "--head", head], env)
    assert ended.returncode == 1
    assert ended.stderr.strip().endswith("(unsupported_finish_reason)")
    assert "Traceback" not in ended.stderr

    usage = _process([*review], env)
    assert usage.returncode == 2

    unconfigured = _process([*review, "--head", head], {"OPENCODE_API_KEY": ""})
    assert unconfigured.returncode == 2
    assert unconfigured.stderr.startswith("error: OPENCODE_API_KEY is not set")
    scripted_provider.assert_complete()


def _build_wheel(out: Path) -> Path:
    """`uv build --wheel` of this project, offline (hatchling comes from uv's cache)."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    root = Path(__file__).resolve().parents[2]
    built = subprocess.run(
        [uv, "build", "--wheel", "--offline", "--out-dir", str(out), str(root)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = out.glob("pr_review_api-*.whl")
    return wheel


def test_the_wheel_carries_every_module_and_file_of_the_package(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path / "dist")
    root = Path(__file__).resolve().parents[2] / "src"
    shipped = {
        path.relative_to(root).as_posix()
        for path in (root / "pr_review_api").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = archive.read("pr_review_api-0.1.0.dist-info/entry_points.txt").decode()
    assert "pr_review_api/py.typed" in names
    assert shipped <= names, sorted(shipped - names)
    assert "pr-review = pr_review_api.cli:main" in entry_points


def test_a_wheel_installed_in_a_fresh_venv_runs_from_anywhere(tmp_path: Path) -> None:
    """What `uv tool install` and `pipx install` do: the wheel in a venv of its own. The
    dependencies come from this project's environment (offline: no test touches the
    network); the package itself must come from the wheel, not from src/."""
    import sysconfig

    wheel = _build_wheel(tmp_path / "dist")
    venv = tmp_path / "tool"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        ["uv", "pip", "install", "--offline", "--no-deps", "--python", str(python), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    # A .pth in the new venv adds this environment's site-packages (its .pth files, such as
    # the editable install of src/, are not processed from there).
    [site] = venv.glob("lib/python*/site-packages")
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    command = venv / "bin" / "pr-review"

    def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(command), *args],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    helped = run_tool("--help")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout == run("--help").stdout
    tools = run_tool("schema", "tools")
    assert tools.returncode == 0, tools.stderr
    assert json.loads(tools.stdout) == TOOLS
    origin = subprocess.run(
        [str(python), "-c", "import pr_review_api; print(pr_review_api.__file__)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(origin.stdout.strip()).is_relative_to(venv)
