"""Fixtures shared by the whole suite."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from pr_review_api.settings import Settings
from tests.gitrepo import GitRepo

# The `environment` fixture (tests/environment.py) and the fakes' fixtures (`scripted_provider`,
# `fake_github`, `fake_gitlab`, `fake_gitlab_notes`, `fake_gitlab_statuses`, `fake_gitlab_threads`),
# for every test: a test asks for one by name and never imports it.
# tests/README.md says which fake to use when.
pytest_plugins = [
    "tests.fakes.provider_server",
    "tests.fakes.github_server",
    "tests.fakes.gitlab_server",
    "tests.fakes.gitlab_notes",
    "tests.fakes.gitlab_statuses",
    "tests.fakes.gitlab_threads",
    "tests.fakes.gitlab_issues",
    "tests.fakes.gitea_server",
    "tests.fakes.gitea_reviews",
    "tests.environment",  # last: it imports the fakes it names, registered above
]

# Distinctive secrets: tests assert they never appear in any output, log, trace or file.
PROVIDER_KEY = "sk-test-PROVIDER-SECRET-7f3a9c"
GITHUB_TOKEN = "ghp_test-GITHUB-SECRET-41be02"
GITLAB_TOKEN = "glpat-test-GITLAB-SECRET-93c1d7"
GITEA_TOKEN = "gitea-test-GITEA-SECRET-5d82e4"
# The login GITHUB_TOKEN belongs to on the fake GitHub, where a test says so.
BOT = "pr-review-bot"

# The fast tier (`uv run pytest --fast`), the inner loop: the unit level on every core. It leaves
# out two folders, the hostile-world suite and the PostgreSQL job suite, and every test marked
# `e2e` (a real process of pr-review, PostgreSQL or a browser; whole reviews through the service
# and the fakes; a repository the size of a budget). The default run (CI, `make test`) still
# runs all of them.
# tests/test_fast_tier_coverage.py checks it still tests every rule of the protocol seed.
_FAST_SKIPS = ("hostile", "jobs")
FAST_SKIP_MARK = "e2e"
# More workers than this spend more CPU collecting the suite than they save.
_MOST_FAST_WORKERS = 8
# Many tests wait on git, sockets, subprocesses and deadlines rather than compute: three workers a
# core keep the cores busy (on 2 idle cores, with warm bytecode caches: 98-112 s with two workers a
# core, 83 s with three, 86 s with four).
_FAST_WORKERS_PER_CORE = 3


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="the fast tier: skip tests/hostile, tests/jobs and tests marked e2e, and run on "
        "three workers a core (pytest-xdist) unless -n says otherwise; CI runs everything",
    )


# Property tests draw their full number of examples in the default run; the fast tier draws at
# most this many of each, enough for the inner loop to meet each property's shapes. Set before
# any test module is imported (the decorators read it then), in every xdist worker too.
FAST_TIER_MAX_EXAMPLES = 20
_FAST_TIER_ENV = "PR_REVIEW_TEST_FAST_TIER"


def examples(full: int) -> int:
    """A property test's number of examples: `full` in the default run, fewer in the fast tier."""
    return min(full, FAST_TIER_MAX_EXAMPLES) if os.environ.get(_FAST_TIER_ENV) else full


# No property test is timed: Hypothesis's default 200 ms deadline for a test case failed a
# loaded machine's run (`test_every_accepted_form_normalises_to_a_fixed_point` took 300 ms once
# and 7 ms when Hypothesis tried it again). A test that sets its own deadline keeps it.
hypothesis_settings.register_profile("untimed", deadline=None)
UNTIMED = hypothesis_settings.get_profile("untimed")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--fast"):
        # Shells may set PYTHONDONTWRITEBYTECODE (this machine's do): every process of the
        # tier (each worker, each pr-review or background process a test starts) then compiled
        # the package, its libraries and the tests' rewritten asserts from source, every run
        # (194 s of CPU where the same run with the caches took 128 s). The inner loop writes
        # its caches (`__pycache__`, ignored by git) before the workers start, so they and
        # their processes write them too; the default run leaves the variable as it is.
        sys.dont_write_bytecode = False
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ[_FAST_TIER_ENV] = "1"
        hypothesis_settings.register_profile("fast", UNTIMED, max_examples=FAST_TIER_MAX_EXAMPLES)
        hypothesis_settings.load_profile("fast")
    else:
        hypothesis_settings.load_profile("untimed")


def usable_cores() -> int:
    """The cores this process may run on (a container's share, not the host's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """`--fast` runs on three pytest-xdist workers a core, work-stealing; the default run of the
    whole suite (no paths given: CI, `make test`) on one worker a core, since its real processes
    (PostgreSQL, browsers, `pr-review`) need a core of their own more than the unit tests do.
    Set before xdist turns `-n` into workers; not in a worker itself, not when `-n` was given
    (`-n 0`: one process), and not for --collect-only or --pdb."""
    if (
        not config.pluginmanager.hasplugin("xdist")
        or hasattr(config, "workerinput")
        or config.getoption("numprocesses", None) is not None
        or config.getoption("collectonly")
        or config.getoption("usepdb")
    ):
        return
    if config.getoption("--fast"):
        workers = min(_FAST_WORKERS_PER_CORE * usable_cores(), _MOST_FAST_WORKERS)
    elif config.args_source == pytest.Config.ArgsSource.TESTPATHS:
        workers = usable_cores()
    else:
        return
    if workers < 2:
        return
    config.option.numprocesses = workers
    if config.getoption("dist") == "no":
        # Each worker starts on its own contiguous half of the suite, so a module's fixtures
        # (a hostile world, a corpus) are mostly built once, and takes the other's tests when
        # its own run out: no slow file finishes alone (on 2 shared cores it took 140 s where
        # `loadfile` took 188 s).
        config.option.dist = "worksteal"


def in_fast_tier(item: pytest.Item, root: Path) -> bool:
    """Whether `--fast` keeps this test."""
    parts = item.path.resolve().relative_to(root).parts
    in_skipped_folder = bool(parts) and parts[0] in _FAST_SKIPS
    return not in_skipped_folder and item.get_closest_marker(FAST_SKIP_MARK) is None


# How many tests the session runs, when it runs a whole tier as the README's commands do
# (`uv run pytest` or `uv run pytest --fast`, no paths, -k or -m of its own): tests/test_docs.py
# holds the README's "about N tests" to it. Empty for any other selection.
WHOLE_TIER: dict[str, int] = {}


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    addopts = list(config.getini("addopts"))
    default_marks = addopts[addopts.index("-m") + 1] if "-m" in addopts else ""
    if (
        config.args_source is pytest.Config.ArgsSource.TESTPATHS
        and not config.getoption("keyword")
        and config.getoption("markexpr") == default_marks
        and not config.getoption("deselect")
    ):
        tier = "fast" if config.getoption("--fast") else "default"
        WHOLE_TIER[tier] = len(session.items)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """`--fast` never imports the two folders it leaves out: each worker would otherwise import
    and collect them (their conftests, a few hundred tests) only to deselect every one."""
    if not config.getoption("--fast"):
        return None
    root = Path(__file__).resolve().parent
    if collection_path.parent == root and collection_path.name in _FAST_SKIPS:
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--fast"):
        return
    root = Path(__file__).resolve().parent
    kept: list[pytest.Item] = []
    skipped: list[pytest.Item] = []
    for item in items:
        (kept if in_fast_tier(item, root) else skipped).append(item)
    if skipped:
        config.hook.pytest_deselected(items=skipped)
        items[:] = kept


# The developer's environment as it was, for the opt-in real-provider test only.
ORIGINAL_ENVIRONMENT = dict(os.environ)

# The prefixes of the variables the program reads (tests/environment.py builds them).
OUR_VARIABLES = (
    "OPENCODE_",
    "GITHUB_",
    "GITLAB_",
    "GITEA_",
    "REVIEW_",
    "PR_REVIEW_",
)


@pytest.fixture(scope="session")
def data_root() -> Iterator[Path]:
    """Where each test's PR_REVIEW_DATA_DIR lies. Not under pytest's basetemp: the embedded
    PostgreSQL runs as another user when the tests run as root, and every new pytest session
    of the same user tightens the basetemp's parent back to 0700 (as tests/jobs/conftest.py)."""
    folder = Path(tempfile.mkdtemp(prefix="prr-data-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data_root: Path) -> None:
    """No setting leaks in from the developer's shell or a .env file."""
    for name in list(os.environ):
        if name.startswith(OUR_VARIABLES):
            monkeypatch.delenv(name)
    # Indexes and saved snapshots go to the cache, the embedded PostgreSQL to the data folder:
    # never the developer's own (`home_folders_untouched` checks it for the whole session).
    monkeypatch.setenv("PR_REVIEW_CACHE_DIR", str(tmp_path / "pr-review-cache"))
    monkeypatch.setenv("PR_REVIEW_DATA_DIR", str(data_root / tmp_path.name))
    monkeypatch.chdir(tmp_path)


def default_folders() -> list[Path]:
    """The folders the settings write to when nothing overrides them (read from the model)."""
    fields = Settings.model_fields
    defaults = (fields[name].default for name in ("pr_review_cache_dir", "pr_review_data_dir"))
    return [Path(value).expanduser() for value in defaults]


def listing(folder: Path) -> set[str] | None:
    """What a folder holds at its top (None when it does not exist)."""
    return {entry.name for entry in folder.iterdir()} if folder.is_dir() else None


@pytest.fixture(scope="session", autouse=True)
def home_folders_untouched() -> Iterator[None]:
    """No test writes to the user's own cache or data folder (a test once made a PostgreSQL
    cluster under ~/.local/share/pr-review). The folders may exist before
    the session, with the user's own data: they must hold the same entries after it."""
    before = {folder: listing(folder) for folder in default_folders()}
    yield
    after = {folder: listing(folder) for folder in default_folders()}
    changed = [str(folder) for folder in before if before[folder] != after[folder]]
    assert not changed, f"the test session wrote to the user's own folders: {changed}"


@functools.cache
def uv_cache_dir() -> str:
    """uv's cache as uv resolves it here (UV_CACHE_DIR, XDG_CACHE_HOME or the default): a uv
    a test runs offline, with a HOME of its own, finds there what the suite's `uv sync` put."""
    done = subprocess.run(
        ["uv", "cache", "dir"], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


@functools.cache
def release_commit() -> str:
    """This repository's HEAD: what a CI file's pinned release commit stands for in its test."""
    done = subprocess.run(
        ["git", "-C", str(Path(__file__).resolve().parents[1]), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def offline_runner(tmp_path: Path) -> dict[str, str]:
    """A CI runner's environment for a test's job: this PATH, a HOME of its own (pr-review's
    cache goes under it, not the user's), temporary files in the test's folder, and uv offline
    on the packages the suite's own `uv sync` put in its cache."""
    home = tmp_path / "home"
    home.mkdir()
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "TMPDIR": str(tmp_path),
        "UV_OFFLINE": "1",
        "UV_CACHE_DIR": uv_cache_dir(),
    }


@pytest.fixture
def anyio_backend() -> str:
    """`@pytest.mark.anyio` tests run on asyncio only."""
    return "asyncio"


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    """An empty repository with a working tree."""
    return GitRepo(tmp_path / "repo")
