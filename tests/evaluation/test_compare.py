"""`pr-review eval compare` (evaluation/compare.py, cli/eval.py): reading two reports safely,
refusing reports of different corpora, and saying which differences are beyond noise."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from pr_review_api import cli
from pr_review_api.errors import InvalidRequest
from pr_review_api.evaluation.compare import (
    MAX_REPORT_BYTES,
    compare_document,
    read_report,
    render_compare_text,
)


def case(case_id: str, found: int, golden: int = 1, **extra: int) -> dict[str, Any]:
    """A report's case: `found` of its `golden` issues matched, with one finding each."""
    return {
        "id": case_id,
        "golden_issues": golden,
        "findings": found,
        "matched_findings": found,
        "golden": golden,
        "matched_golden": found,
        **extra,
    }


def report(cases: list[dict[str, Any]], **settings: Any) -> dict[str, Any]:
    return {"runs": 1, "settings": {"opencode_model": "m", **settings}, "cases": cases}


def write(folder: Path, name: str, document: dict[str, Any]) -> Path:
    path = folder / name
    path.write_text(json.dumps(document))
    return path


def compare(*args: str) -> Result:
    return CliRunner().invoke(cli.main, ["eval", "compare", *args], prog_name="pr-review")


def twelve(found: list[int]) -> list[dict[str, Any]]:
    return [case(f"case-{n:02}", hit) for n, hit in enumerate(found)]


# --- Reading a report ---------------------------------------------------------------------------


def refused(path: Path, message: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        read_report(path, "first")
    assert caught.value.message == message
    assert str(path) not in caught.value.message


def test_a_report_must_be_a_regular_file_within_its_size(tmp_path: Path) -> None:
    refused(tmp_path / "missing.json", "The first report could not be opened.")
    refused(tmp_path, "The first report is not a regular file.")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opened without waiting for a writer, then refused by its type
    refused(fifo, "The first report is not a regular file.")
    large = tmp_path / "large.json"
    with large.open("wb") as handle:
        handle.truncate(MAX_REPORT_BYTES + 1)  # sparse: refused by its size, never read
    refused(large, "The first report is larger than 32 MiB.")


@pytest.mark.parametrize(
    "content",
    [
        b"\xff\xfe not text",
        b"not json",
        b"[" * 100_000,
        b"[]",
        json.dumps({"runs": 1, "cases": [{"id": "a"}]}).encode(),
        json.dumps(report([case("a", 1, golden=0)])).encode(),  # more matched than golden
        json.dumps(report([case("a", 1) | {"findings": -1}])).encode(),
        json.dumps(report([case("a", 1) | {"findings": "1"}])).encode(),
    ],
)
def test_a_file_that_is_no_report_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(content)
    refused(path, "The first report is not a pr-review eval JSON report.")


def test_a_case_named_twice_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "r.json", report([case("a", 1), case("a", 0)]))
    refused(path, "The first report names a case twice.")


# --- Comparing ----------------------------------------------------------------------------------


def read_both(tmp_path: Path, first: dict[str, Any], second: dict[str, Any]) -> Any:
    a = read_report(write(tmp_path, "a.json", first), "first")
    b = read_report(write(tmp_path, "b.json", second), "second")
    return a, b


@pytest.mark.parametrize(
    "second",
    [
        [case("a", 1), case("c", 1)],  # another case
        [case("a", 1)],  # one case fewer
        [case("a", 1), case("b", 1, golden=2)],  # the same ids, other golden issues
    ],
)
def test_reports_of_different_corpora_are_refused(
    tmp_path: Path, second: list[dict[str, Any]]
) -> None:
    a, b = read_both(tmp_path, report([case("a", 1), case("b", 0)]), report(second))
    with pytest.raises(InvalidRequest, match="not of the same corpus"):
        compare_document(a, b)


def test_a_gain_on_most_cases_is_beyond_noise(tmp_path: Path) -> None:
    a, b = read_both(
        tmp_path,
        report(twelve([0] * 12)),
        report(twelve([1] * 9 + [0] * 3), review_require_evidence=True),
    )
    made = compare_document(a, b)
    assert made["cases"] == 12
    recall = made["differences"]["recall"]
    assert recall["observed"] == 0.75
    assert recall["beyond_noise"] is True
    assert recall["interval"][0] > 0
    assert made["first"]["recall"] == 0.0
    assert made["first"]["precision"] is None  # no findings at all
    assert made["differences"]["precision"] == {
        "observed": None,
        "interval": None,
        "beyond_noise": False,
    }
    assert made["settings_changed"] == {"review_require_evidence": [None, True]}
    assert made == compare_document(a, b)  # a fixed seed: the same every time


def test_a_gain_on_one_case_of_twelve_is_within_noise(tmp_path: Path) -> None:
    a, b = read_both(tmp_path, report(twelve([0] * 12)), report(twelve([1] + [0] * 11)))
    recall = compare_document(a, b)["differences"]["recall"]
    assert recall["observed"] == round(1 / 12, 4)
    assert recall["beyond_noise"] is False
    assert recall["interval"][0] <= 0 <= recall["interval"][1]


def test_cases_are_paired_by_id_whatever_their_order(tmp_path: Path) -> None:
    cases = twelve([1, 0] * 6)
    a, b = read_both(tmp_path, report(cases), report(list(reversed(cases))))
    differences = compare_document(a, b)["differences"]
    assert differences["recall"] == {"observed": 0.0, "interval": [0.0, 0.0], "beyond_noise": False}


def test_duplicates_are_shown_apart(tmp_path: Path) -> None:
    first = twelve([1] * 12)
    second = [c | {"findings": 2, "duplicates": 1} for c in first]
    a, b = read_both(tmp_path, report(first), report(second))
    made = compare_document(a, b)
    assert (made["first"]["duplicates"], made["second"]["duplicates"]) == (0, 12)
    assert made["second"]["false_positives"] == 0
    assert made["differences"]["precision"]["observed"] == -0.5
    assert made["differences"]["precision"]["beyond_noise"] is True
    assert "Duplicates 0 -> 12; false positives 0 -> 0." in render_compare_text(made)


# --- The command ----------------------------------------------------------------------------------


def test_compare_prints_one_verdict_per_figure(tmp_path: Path) -> None:
    first = write(tmp_path, "a.json", report(twelve([0] * 12)))
    second = write(tmp_path, "b.json", report(twelve([1] * 9 + [0] * 3), review_max_rounds=4))
    result = compare(str(first), str(second))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Paired bootstrap over the 12 cases of both reports")
    assert lines[2].startswith("recall: 0.00 (0.00 to 0.00) -> 0.75 (")
    assert lines[2].endswith(": beyond noise.")
    # precision: the first report has no findings, so no difference can be computed
    assert lines[1].endswith(
        "(no interval): not comparable (undefined in a report or every resample)."
    )
    assert lines[-1] == "Settings that differ: review_max_rounds null -> 4."
    as_json = compare(str(first), str(second), "--format", "json")
    assert json.loads(as_json.stdout)["differences"]["recall"]["beyond_noise"] is True


def test_compare_refuses_with_exit_2_and_no_path(tmp_path: Path) -> None:
    first = write(tmp_path, "a.json", report(twelve([0] * 12)))
    second = write(tmp_path, "b.json", report(twelve([0] * 11)))
    result = compare(str(first), str(second), "--format", "json")
    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "invalid_request"
    assert "same corpus" in error["message"]
    text = compare(str(first), str(tmp_path))
    assert text.exit_code == 2
    assert "The second report is not a regular file. (invalid_request)" in text.stderr
    assert str(tmp_path) not in text.output


def test_eval_still_takes_a_corpus_as_its_first_argument(tmp_path: Path) -> None:
    # No provider key: the default command `run` is the one that answers, as before.
    result = CliRunner().invoke(cli.main, ["eval", str(tmp_path)], prog_name="pr-review")
    assert result.exit_code == 2
    assert "OPENCODE_API_KEY" in result.stderr
    options_first = CliRunner().invoke(
        cli.main, ["eval", "--runs", "2", str(tmp_path)], prog_name="pr-review"
    )
    assert options_first.exit_code == 2
    assert "OPENCODE_API_KEY" in options_first.stderr
