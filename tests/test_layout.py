"""The tests mirror the modules, as tests/README.md says: `src/pr_review_api/<package>/<module>.py`
is tested in `tests/<package>/test_<module>.py` (or `test_<module>_<part>.py`), or the README
names the module with the reason it has no file; a test file that mirrors no module is named
there too. A module added, moved or renamed without its test file fails here, not in a year.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "pr_review_api"
TESTS = ROOT / "tests"
README = TESTS / "README.md"
MODULES_HEADING = "### Modules without a file of their own"
FILES_HEADING = "### Test files of no one module"
# Folders that are not packages (tests/README.md says why).
NOT_PACKAGES = ("hostile", "fakes")


def modules() -> list[Path]:
    """Every module of the package, relative to it (`loop/run.py`), packages' `__init__` aside."""
    found = SOURCE.rglob("*.py")
    return sorted(p.relative_to(SOURCE) for p in found if p.name != "__init__.py")


def every_test_file() -> list[Path]:
    """Every test file, relative to tests/, the folders that are not packages aside."""
    found = (p.relative_to(TESTS) for p in TESTS.rglob("test_*.py"))
    return sorted(p for p in found if p.parts[0] not in NOT_PACKAGES)


def mirrors(test: Path, module: Path) -> bool:
    """Whether `test` (relative to tests/) is a file of `module` (relative to the package)."""
    if test.parent != module.parent:
        return False
    stem = "main" if module.stem == "__main__" else module.stem
    return test.stem == f"test_{stem}" or test.stem.startswith(f"test_{stem}_")


def section(heading: str) -> str:
    """The README's text under `heading`, up to the next heading."""
    text = README.read_text(encoding="utf-8")
    assert heading in text, f"tests/README.md lost its {heading!r}"
    return re.split(r"\n#{1,3} ", text.split(heading, 1)[1], maxsplit=1)[0]


def bullets(heading: str) -> list[list[str]]:
    """The code spans of each bullet under `heading`, in order."""
    items = re.split(r"\n- ", section(heading))[1:]
    return [re.findall(r"`([^`]+)`", item) for item in items]


@cache
def listed_modules() -> frozenset[Path]:
    """The modules the README names (a path of the package, never a test file's)."""
    spans = (span for item in bullets(MODULES_HEADING) for span in item)
    return frozenset(
        Path(span)
        for span in spans
        if span.endswith(".py") and not span.startswith("tests/") and "test_" not in span
    )


@cache
def listed_test_files() -> frozenset[Path]:
    """The test files the README names; a bare `test_x.py` lies in the folder last named in its
    bullet (`tests/jobs/`, or the folder of the file before it). A module named beside one
    (`github/app_auth.py`) is not a test file."""
    named: set[Path] = set()
    for item in bullets(FILES_HEADING):
        folder = Path()
        for span in item:
            path = Path(span.removeprefix("tests/"))
            if span.endswith("/"):
                folder = path
            elif span.endswith(".py") and span.startswith("tests/"):
                folder = path.parent
                named.add(path)
            elif span.endswith(".py") and path.name.startswith("test_"):
                named.add(folder / path)
    return frozenset(named)


def test_every_module_has_its_test_file_or_is_named_in_the_readme() -> None:
    files = every_test_file()
    missing = [
        str(module)
        for module in modules()
        if module not in listed_modules() and not any(mirrors(t, module) for t in files)
    ]
    assert not missing, (
        f"no tests/<package>/test_<module>.py, nor a line in tests/README.md: {missing}"
    )


def test_every_module_the_readme_names_exists_and_still_has_no_file() -> None:
    files = every_test_file()
    gone = [str(m) for m in listed_modules() if not (SOURCE / m).is_file()]
    assert not gone, f"tests/README.md names modules that are gone: {gone}"
    mirrored = [str(m) for m in listed_modules() if any(mirrors(t, m) for t in files)]
    assert not mirrored, f"these have their test file now; take them off the README: {mirrored}"


def test_every_test_file_mirrors_a_module_or_is_named_in_the_readme() -> None:
    every = modules()
    stray = [
        str(test)
        for test in every_test_file()
        if test not in listed_test_files() and not any(mirrors(test, m) for m in every)
    ]
    assert not stray, f"mirror a module, or say in tests/README.md what they test: {stray}"


def test_every_test_file_the_readme_names_exists_and_mirrors_no_module() -> None:
    every = modules()
    gone = [str(t) for t in listed_test_files() if not (TESTS / t).is_file()]
    assert not gone, f"tests/README.md names test files that are gone: {gone}"
    mirroring = [str(t) for t in listed_test_files() if any(mirrors(t, m) for m in every)]
    assert not mirroring, f"these mirror a module; take them off the README: {mirroring}"


def test_the_rule_reads_a_mirror_as_the_readme_says() -> None:
    run, tests = Path("loop/run.py"), Path("loop")
    assert mirrors(tests / "test_run.py", run)
    assert mirrors(tests / "test_run_rules.py", run)
    assert not mirrors(tests / "test_runner.py", run)
    assert not mirrors(Path("test_run.py"), run)
    assert mirrors(Path("cli/test_main.py"), Path("cli/__main__.py"))
