"""The stop-turn checks on the final review, one test per rule (seed: "Round 2 ...")."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.errors import InvalidModelResponse
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.loop.final_review import FINAL_REVIEW_SCHEMA, parse_final_review
from pr_review_api.model import FinalReview
from tests.builders import final_review
from tests.gitrepo import FILE, GITLINK, LINK, GitRepo
from tests.loop import support


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> PinnedRepository:
    repo = GitRepo(tmp_path_factory.mktemp("final") / "repo")
    base = repo.commit_files({"src/service.py": "a\nb\n"})
    head = repo.commit_tree(
        {
            "src/service.py": (FILE, b"one\ntwo\nthree\n"),
            "src/no_newline.py": (FILE, b"one\ntwo"),
            "src/image.bin": (FILE, b"\0\1\2"),
            "src/link.py": (LINK, b"service.py"),
            "src/outside.py": (LINK, b"../../etc/passwd"),
            "vendor/lib": (GITLINK, base.encode()),
        },
        parent=base,
    )
    return PinnedRepository.open(repo.git_dir, base, head)


finding = partial(support.finding, path="src/service.py", line=2)


def document(**overrides: Any) -> str:
    """The final review as the model's text: one finding, any field replaced."""
    return json.dumps(final_review(finding(), summary="One problem.") | overrides)


def rejected(content: object, repository: PinnedRepository) -> None:
    with pytest.raises(InvalidModelResponse):
        parse_final_review(content, repository)


def test_valid_final_review_is_accepted(repository: PinnedRepository) -> None:
    review = parse_final_review(document(), repository)
    assert isinstance(review, FinalReview)
    assert review.findings[0].line == 2


def test_content_must_be_a_non_empty_string(repository: PinnedRepository) -> None:
    for content in (None, "", "   \n", 5):
        rejected(content, repository)


@pytest.mark.parametrize(
    "content",
    ["not json", '```json\n{"summary": "", "findings": [], "notes": []}\n```', "[]", '"text"'],
)
def test_content_must_be_a_json_object(content: str, repository: PinnedRepository) -> None:
    rejected(content, repository)


def test_duplicate_keys_are_rejected(repository: PinnedRepository) -> None:
    rejected('{"summary": "a", "summary": "b", "findings": [], "notes": []}', repository)


def test_no_additional_fields_in_the_review(repository: PinnedRepository) -> None:
    rejected(document(verdict="approve"), repository)


def test_no_additional_fields_in_a_finding(repository: PinnedRepository) -> None:
    rejected(document(findings=[finding(confidence=0.9)]), repository)


@pytest.mark.parametrize("missing", ["summary", "findings", "notes"])
def test_every_review_field_is_required(missing: str, repository: PinnedRepository) -> None:
    value = json.loads(document())
    del value[missing]
    rejected(json.dumps(value), repository)


def test_every_finding_field_is_required(repository: PinnedRepository) -> None:
    for key in finding():
        value = finding()
        del value[key]
        rejected(document(findings=[value]), repository)


def test_at_most_100_findings(repository: PinnedRepository) -> None:
    assert len(parse_final_review(document(findings=[finding()] * 100), repository).findings) == 100
    rejected(document(findings=[finding()] * 101), repository)


def test_at_most_100_notes(repository: PinnedRepository) -> None:
    assert len(parse_final_review(document(notes=["n"] * 100), repository).notes) == 100
    rejected(document(notes=["n"] * 101), repository)


@pytest.mark.parametrize(
    "field", ["title", "explanation", "evidence", "recommendation", "summary", "note"]
)
def test_each_text_field_is_at_most_8_kib_of_utf8(field: str, repository: PinnedRepository) -> None:
    fits, over = "é" * 4096, "é" * 4096 + "x"  # 8192 and 8193 bytes of UTF-8
    for text, ok in ((fits, True), (over, False)):
        if field == "summary":
            content = document(summary=text)
        elif field == "note":
            content = document(notes=[text])
        else:
            content = document(findings=[finding(**{field: text})])
        if ok:
            parse_final_review(content, repository)
        else:
            rejected(content, repository)


@pytest.mark.parametrize("severity", ["critical", "high", "medium", "low", "info"])
def test_known_severities_are_accepted(severity: str, repository: PinnedRepository) -> None:
    parse_final_review(document(findings=[finding(severity=severity)]), repository)


@pytest.mark.parametrize("severity", ["blocker", "HIGH", "", None, 1])
def test_unknown_severity_is_rejected(severity: Any, repository: PinnedRepository) -> None:
    rejected(document(findings=[finding(severity=severity)]), repository)


@pytest.mark.parametrize("line", [0, -1, "2", 2.0, True])
def test_line_is_positive_integer_or_null(line: Any, repository: PinnedRepository) -> None:
    rejected(document(findings=[finding(line=line)]), repository)


def test_null_line_is_accepted(repository: PinnedRepository) -> None:
    assert (
        parse_final_review(document(findings=[finding(line=None)]), repository).findings[0].line
        is None
    )


def test_line_must_lie_within_the_file(repository: PinnedRepository) -> None:
    parse_final_review(document(findings=[finding(line=3)]), repository)
    rejected(document(findings=[finding(line=4)]), repository)


def test_last_line_without_trailing_newline_counts(repository: PinnedRepository) -> None:
    parse_final_review(document(findings=[finding(path="src/no_newline.py", line=2)]), repository)
    rejected(document(findings=[finding(path="src/no_newline.py", line=3)]), repository)


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "../etc/passwd",
        "src/../../x",
        "C:/x",
        "\\\\server\\share",
        ".git/config",
        "src\\service.py",
    ],
)
def test_finding_path_is_repository_relative(path: str, repository: PinnedRepository) -> None:
    rejected(document(findings=[finding(path=path, line=None)]), repository)


@pytest.mark.parametrize("path", ["src/missing.py", "src", "vendor/lib", "src/outside.py", ""])
def test_finding_path_is_an_existing_regular_file(path: str, repository: PinnedRepository) -> None:
    rejected(document(findings=[finding(path=path, line=None)]), repository)


def test_finding_path_through_a_symlink_inside_resolves(repository: PinnedRepository) -> None:
    parse_final_review(document(findings=[finding(path="src/link.py", line=3)]), repository)


def test_a_binary_file_may_be_named_without_a_line(repository: PinnedRepository) -> None:
    parse_final_review(document(findings=[finding(path="src/image.bin", line=None)]), repository)


def test_uncommitted_file_is_not_an_existing_file(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    base = repo.commit_files({"a.py": "x\n"})
    head = repo.commit_files({"b.py": "y\n"})
    repo.write({"new.py": "not committed\n"})
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    rejected(document(findings=[finding(path="new.py", line=None)]), pinned)


def test_schema_matches_the_model_on_required_fields() -> None:
    # `checks` is specification §20's, `walkthrough` and `linked_issues` specification §21's.
    added = {"checks", "walkthrough", "linked_issues"}
    assert set(FINAL_REVIEW_SCHEMA["required"]) == set(FinalReview.model_fields) - added
    item = FINAL_REVIEW_SCHEMA["properties"]["findings"]["items"]
    from pr_review_api.model import Finding

    # `suggestion` is specification §14's, not section 8's (tests/loop/test_suggestions.py).
    assert set(item["required"]) == set(Finding.model_fields) - {"suggestion"}
    assert FINAL_REVIEW_SCHEMA["additionalProperties"] is False
    assert item["additionalProperties"] is False


# --- specification §8: one file, one spelling -----------------------------------------------------


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("./src/service.py", "src/service.py"),
        ("src//service.py", "src/service.py"),
        ("src/./service.py", "src/service.py"),
        ("src/link.py", "src/service.py"),  # a symbolic link names the file it reaches
        ("src/service.py", "src/service.py"),
    ],
)
def test_finding_paths_are_reported_in_canonical_form(
    given: str, canonical: str, repository: PinnedRepository
) -> None:
    review = parse_final_review(document(findings=[finding(path=given, line=3)]), repository)
    assert review.findings[0].path == canonical


def test_a_path_with_a_trailing_slash_names_no_file(repository: PinnedRepository) -> None:
    rejected(document(findings=[finding(path="src/service.py/", line=None)]), repository)


# --- specification §5: messages are fixed sentences - ------------------------------------------

HOSTILE_KEY = "\x1b]52;c;ZXZpbA==\x07\x1b[2J" + "k" * 5000


def rejection(content: str, repository: PinnedRepository) -> str:
    with pytest.raises(InvalidModelResponse) as raised:
        parse_final_review(content, repository)
    return raised.value.message


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            document(**{HOSTILE_KEY: 1}),
            "The final review has an unknown field at the top level.",
        ),
        (
            document(findings=[finding(**{HOSTILE_KEY: 1})]),
            "The final review has an unknown field at findings.0.",
        ),
        (
            document(findings=[finding(), finding(evidence=None)]),
            "The final review does not match its schema at findings.1.evidence.",
        ),
        (
            document(line=3),
            'The final review has the unknown field "line" at the top level.',
        ),
        (
            json.dumps({HOSTILE_KEY: {"summary": "x"}}),
            "The final review does not match its schema at summary.",
        ),
    ],
)
def test_schema_errors_name_only_our_own_fields_and_indexes(
    content: str, message: str, repository: PinnedRepository
) -> None:
    text = rejection(content, repository)
    assert text == message
    assert "\x1b" not in text


def test_tolerant_unwrapping_is_off_by_default(repository: PinnedRepository) -> None:
    fenced = "```json\n" + document() + "\n```"
    message = "The final review was wrapped in a Markdown code fence."
    assert rejection(fenced, repository) == message
    assert parse_final_review(fenced, repository, tolerant=True).summary == "One problem."
