"""The hostile suite's guards and its figures.

`secret_guard` runs around every test of this folder: it captures every log record of every
logger at DEBUG, and afterwards fails the test if a record, or a file the test left in its
`tmp_path`, holds the provider key, the GitHub token or the service key in any spelling
(see `support.secret_forms`).

Whenever this folder is part of the session (as in the default run), `SUITE_SCANNER` also
scans every log record of the *whole* session, every test of every folder, at every level,
without changing what any handler receives; a secret found fails the session, naming the
test. The figures the tests count are printed after the run with `-v`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from pr_review_api.loop.workspace import LocalTarget
from tests.gitrepo import LINK, GitRepo
from tests.hostile.provider_support import FILES
from tests.hostile.support import (
    FIGURES,
    RESOURCE_NOTES,
    SUITE_SCANNER,
    CapturingHandler,
    capture_all_logging,
    scan_tree,
)


@pytest.fixture(autouse=True)
def secret_guard(request: pytest.FixtureRequest) -> Iterator[CapturingHandler]:
    with capture_all_logging() as handler:
        yield handler
    assert not handler.leaked, f"secrets in log records: {handler.leaked[:3]}"
    FIGURES["log records scanned for secrets"] += handler.count
    if "tmp_path" in request.fixturenames:
        tmp_path = request.getfixturevalue("tmp_path")
        in_files = scan_tree(tmp_path)
        assert not in_files, f"secrets in files left behind: {in_files[:3]}"
        FIGURES["temporary folders scanned for secrets"] += 1


def pytest_collection_finish(session: pytest.Session) -> None:
    SUITE_SCANNER.install()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    SUITE_SCANNER.uninstall()
    if SUITE_SCANNER.leaked:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if SUITE_SCANNER.leaked:
        terminalreporter.section("secrets in log records", red=True)
        for test, text, found in SUITE_SCANNER.leaked[:20]:
            terminalreporter.write_line(f"{test}: {found}: {text}")
    if not FIGURES and not RESOURCE_NOTES:
        return
    if terminalreporter.config.get_verbosity() < 1:
        return  # they mean nothing to a newcomer's first run: shown with -v
    terminalreporter.section("hostile-world figures")
    terminalreporter.write_line(
        f"log records of the whole session scanned: {SUITE_SCANNER.scanned}"
    )
    for name, count in sorted(FIGURES.items()):
        terminalreporter.write_line(f"{name}: {count}")
    for name, note in RESOURCE_NOTES.items():
        terminalreporter.write_line(f"{name}: {note}")


# --- the hostile-provider tests' repository and event loop (test_hostile_*.py) ---------------


@pytest.fixture(scope="module")
def widget(tmp_path_factory: pytest.TempPathFactory) -> LocalTarget:
    repo = GitRepo(tmp_path_factory.mktemp("provider") / "widget")
    base = repo.commit_files({"src/app.py": "old\n", "README.md": "# Demo\n"})
    head = repo.commit_files(FILES, message="change")
    head = repo.commit_tree(
        {
            **{path: ("100644", text.encode()) for path, text in FILES.items()},
            "links/out": (LINK, b"../../outside"),
            "links/app": (LINK, b"../src/app.py"),
        },
        parent=head,
    )
    return LocalTarget(repo.path, base, head)


@pytest.fixture(scope="module")
def runner() -> Iterator[asyncio.Runner]:
    """One event loop for a whole property: its worker threads are made once, not per example."""
    with asyncio.Runner() as loop_runner:
        yield loop_runner
