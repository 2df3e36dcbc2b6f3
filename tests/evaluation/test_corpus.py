"""The corpus in eval/ is sound: enough cases of every kind, real sources named, every
golden issue exists at the head and lies in the diff the model sees, and no defect is found by
pointing at the first changed line (eval/baseline.py, the reviewer with no model)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from pr_review_api.errors import InvalidRequest
from pr_review_api.evaluation.corpus import (
    CLEAN_KINDS,
    DEFECT_KINDS,
    MAX_CASE_FILE_BYTES,
    BuiltCorpus,
    build_corpus,
    check_case,
    head_files,
    load_built,
    load_source,
)
from pr_review_api.evaluation.scoring import LINE_SLACK, Located, matches

EVAL = Path(__file__).resolve().parents[2] / "eval"


def _load_baseline() -> ModuleType:
    """eval/baseline.py, the committed script itself (eval/ is not a package)."""
    spec = importlib.util.spec_from_file_location("eval_baseline", EVAL / "baseline.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


baseline = _load_baseline()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BuiltCorpus]:
    target = tmp_path_factory.mktemp("corpus") / "built"
    return target, build_corpus(EVAL, target)


def test_corpus_has_30_cases_8_clean_every_defect_kind_and_3_languages() -> None:
    cases = load_source(EVAL)
    kinds = Counter(str(case.kind) for case in cases)
    assert len(cases) >= 30
    assert sum(kinds[kind] for kind in CLEAN_KINDS) >= 8
    assert set(DEFECT_KINDS) <= set(kinds)
    assert len({case.language for case in cases}) >= 3


def test_every_case_names_its_real_source_and_licence() -> None:
    permissive = {"PSF-2.0", "MIT", "BSD-3-Clause", "Apache-2.0"}
    for case in load_source(EVAL):
        assert case.source.project
        assert case.source.file
        assert case.source.licence in permissive, case.id
        first_line = case.base[0].text.splitlines()[0]
        assert case.source.project.split()[0] in first_line or "CPython" in first_line, case.id


def test_every_golden_issue_exists_at_the_head_and_lies_in_the_diff(
    built: tuple[Path, BuiltCorpus],
) -> None:
    folder, corpus = built
    problems = [problem for case in corpus.cases for problem in check_case(folder, case)]
    assert problems == []


def test_no_defect_case_is_found_by_pointing_at_its_first_changed_line(
    built: tuple[Path, BuiltCorpus],
) -> None:
    # Each defect case has harmless changes before its defect: the first changed line of the
    # diff lies outside every golden range widened by the matching slack, so the no-model
    # baseline (one finding there) matches nothing.
    folder, corpus = built
    found = []
    for case in corpus.cases:
        if case.kind in CLEAN_KINDS:
            continue
        first = baseline.first_change(folder / case.repository, case.base, case.head)
        assert isinstance(first, Located), case.id
        if any(matches(first, issue) for issue in case.golden):
            found.append(f"{case.id}: {first.path}:{first.line}")
    assert LINE_SLACK == 3
    assert found == []


def test_multi_file_cases_change_a_harmless_file_first() -> None:
    cases = load_source(EVAL)
    several = [c for c in cases if len({edit.path for edit in c.edit}) >= 2]
    defects = [c for c in several if c.kind not in CLEAN_KINDS]
    assert len(defects) >= 4
    assert len(several) - len(defects) >= 1
    for case in defects:
        first = min(edit.path for edit in case.edit)
        assert all(issue.path != first for issue in case.golden), case.id
    assert len({c.language for c in defects}) >= 2


def _commit(repo: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        (repo / name).write_text(text)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"],
        cwd=repo,
        check=True,
    )
    done = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def test_the_baseline_points_at_the_first_hunk_of_the_first_file_in_path_order(
    tmp_path: Path,
) -> None:
    subprocess.run(["git", "init", "-q", tmp_path], check=True)
    base = _commit(tmp_path, {"a.py": "1\n2\n3\n4\n", "b.py": "x\n"})
    # a.py loses its third line (a removal names the line before it); b.py changes line 1.
    head = _commit(tmp_path, {"a.py": "1\n2\n4\n", "b.py": "y\n"})
    assert baseline.first_change(tmp_path, base, head) == Located("a.py", 2)
    assert baseline.first_change(tmp_path, base, base) is None


def test_a_built_corpus_reads_back_with_the_same_cases(built: tuple[Path, BuiltCorpus]) -> None:
    folder, corpus = built
    assert load_built(folder) == corpus
    assert len({case.head for case in corpus.cases}) == len(corpus.cases)


def test_builds_are_reproducible(tmp_path: Path, built: tuple[Path, BuiltCorpus]) -> None:
    again = build_corpus(EVAL, tmp_path / "again")
    assert [(c.base, c.head) for c in again.cases] == [(c.base, c.head) for c in built[1].cases]


def test_check_case_reports_a_golden_line_outside_the_diff(
    built: tuple[Path, BuiltCorpus],
) -> None:
    folder, corpus = built
    case = next(c for c in corpus.cases if c.golden)
    issue = case.golden[0]
    moved = issue.model_copy(update={"lines": (1, 1)})
    past = issue.model_copy(update={"lines": (10_000, 10_000)})
    problems = check_case(folder, case.model_copy(update={"golden": [moved, past]}))
    assert any("not inside the diff" in p or "touches no changed line" in p for p in problems)
    assert any("past the end" in p for p in problems)


def test_an_edit_whose_old_text_is_not_unique_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "x.toml").write_text(
        'id = "x"\nkind = "docs"\nlanguage = "python"\ntitle = "t"\n'
        '[source]\nproject = "p"\nlicence = "MIT"\nfile = "f"\n'
        '[[base]]\npath = "a.py"\ntext = "a\\na\\n"\n'
        '[[edit]]\npath = "a.py"\nold = "a"\nnew = "b"\n'
    )
    (case,) = load_source(tmp_path)
    with pytest.raises(InvalidRequest, match="exactly once"):
        head_files(case)


@pytest.mark.parametrize(
    "text",
    [
        "not toml = =",
        'id = "Bad Id"',
        'id = "x"\nkind = "refactor"\nlanguage = "c"\ntitle = "t"\n'
        '[source]\nproject = "p"\nlicence = "MIT"\nfile = "f"\n'
        '[[base]]\npath = "../escape.py"\ntext = ""\n'
        '[[edit]]\npath = "a.py"\nold = ""\nnew = "x"\n',
    ],
)
def test_an_invalid_case_file_is_named_without_its_content(tmp_path: Path, text: str) -> None:
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "bad.toml").write_text(text)
    with pytest.raises(InvalidRequest) as caught:
        load_source(tmp_path)
    assert "bad.toml" in caught.value.message
    assert "escape" not in caught.value.message


# --- A corpus is someone else's folder ----------------------------------------------------

_ONE_CASE = (
    'id = "x"\nkind = "docs"\nlanguage = "python"\ntitle = "t"\n'
    '[source]\nproject = "p"\nlicence = "MIT"\nfile = "f"\n'
    '[[base]]\npath = "a.py"\ntext = "a = 1\\n"\n'
    '[[edit]]\npath = "a.py"\nold = "a = 1\\n"\nnew = "a = 2\\n"\n'
)


@pytest.fixture
def one_case(tmp_path: Path) -> Path:
    """A built corpus of one case, in a folder of its own."""
    source = tmp_path / "source"
    (source / "cases").mkdir(parents=True)
    (source / "cases" / "x.toml").write_text(_ONE_CASE)
    build_corpus(source, tmp_path / "built")
    return tmp_path / "built"


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """Another repository on the machine: what a hostile corpus would point the model at."""
    other = tmp_path / "secret"
    other.mkdir()
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    return other


def test_a_sound_built_corpus_of_one_case_loads(one_case: Path) -> None:
    assert [case.id for case in load_built(one_case).cases] == ["x"]


def _replace_with_file(path: Path, text: str) -> None:
    subprocess.run(["rm", "-rf", str(path)], check=True)
    path.write_text(text)


def _replace_with_link(path: Path, target: Path) -> None:
    subprocess.run(["rm", "-rf", str(path)], check=True)
    path.symlink_to(target)


@pytest.mark.parametrize(
    "borrow",
    [
        "a .git file that points elsewhere",
        "a .git link to another repository",
        "objects linked to another repository's",
        "alternates naming another repository's objects",
        "a commondir naming another repository",
        "the case folder linked elsewhere",
    ],
)
def test_a_case_repository_that_borrows_another_repositorys_data_is_refused(
    one_case: Path, elsewhere: Path, borrow: str
) -> None:
    case = one_case / "repos" / "x"
    git = case / ".git"
    if borrow == "a .git file that points elsewhere":
        _replace_with_file(git, f"gitdir: {elsewhere / '.git'}\n")
    elif borrow == "a .git link to another repository":
        _replace_with_link(git, elsewhere / ".git")
    elif borrow == "objects linked to another repository's":
        _replace_with_link(git / "objects", elsewhere / ".git" / "objects")
    elif borrow == "alternates naming another repository's objects":
        (git / "objects" / "info").mkdir(exist_ok=True)
        (git / "objects" / "info" / "alternates").write_text(f"{elsewhere / '.git' / 'objects'}\n")
    elif borrow == "a commondir naming another repository":
        (git / "commondir").write_text(f"{elsewhere / '.git'}\n")
    else:
        _replace_with_link(case, elsewhere)
    with pytest.raises(InvalidRequest, match="not its own") as caught:
        load_built(one_case)
    assert str(elsewhere) not in caught.value.message


def test_a_manifest_naming_a_repository_outside_the_corpus_is_refused(
    one_case: Path, elsewhere: Path
) -> None:
    manifest = one_case / "corpus.json"
    manifest.write_text(manifest.read_text().replace('"repos/x"', '"../secret"'))
    with pytest.raises(InvalidRequest, match="not its own"):
        load_built(one_case)


@pytest.mark.parametrize("kind", ["a link to /dev/zero", "a FIFO", "a folder"])
def test_a_case_file_that_is_not_a_regular_file_is_refused_unread(
    tmp_path: Path, kind: str
) -> None:
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "good.toml").write_text(_ONE_CASE)
    bad = tmp_path / "cases" / "bad.toml"
    if kind == "a link to /dev/zero":
        bad.symlink_to("/dev/zero")
    elif kind == "a FIFO":
        os.mkfifo(bad)  # opened without O_NONBLOCK, this would wait for a writer forever
    else:
        bad.mkdir()
    with pytest.raises(InvalidRequest, match=r"bad\.toml is not a regular file"):
        load_source(tmp_path)


def test_a_case_file_over_its_cap_is_refused_after_reading_no_more_than_the_cap(
    tmp_path: Path,
) -> None:
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "big.toml").write_bytes(b"#" * (MAX_CASE_FILE_BYTES + 1))
    with pytest.raises(InvalidRequest, match="larger than 1 MiB"):
        load_source(tmp_path)


@pytest.mark.parametrize("kind", ["a link to /dev/zero", "a FIFO"])
def test_a_manifest_that_is_not_a_regular_file_is_refused_unread(one_case: Path, kind: str) -> None:
    manifest = one_case / "corpus.json"
    manifest.unlink()
    if kind == "a FIFO":
        os.mkfifo(manifest)
    else:
        manifest.symlink_to("/dev/zero")
    with pytest.raises(InvalidRequest, match=r"corpus\.json is invalid"):
        load_built(one_case)


def test_a_linked_cases_folder_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "cases").mkdir(parents=True)
    (real / "cases" / "x.toml").write_text(_ONE_CASE)
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "cases").symlink_to(real / "cases")
    with pytest.raises(InvalidRequest, match=r"neither corpus\.json nor a cases folder"):
        load_source(tmp_path / "corpus")
