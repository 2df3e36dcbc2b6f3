"""The corpus in eval/ is sound: enough cases of every kind, real sources named, and every
golden issue exists at the head and lies in the diff the model sees."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from pr_review_api.errors import InvalidRequest
from pr_review_api.evaluation.corpus import (
    CLEAN_KINDS,
    DEFECT_KINDS,
    BuiltCorpus,
    build_corpus,
    check_case,
    head_files,
    load_built,
    load_source,
)

EVAL = Path(__file__).resolve().parents[2] / "eval"


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
