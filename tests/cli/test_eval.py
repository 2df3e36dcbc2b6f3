"""`pr-review eval` end to end: a 2-case mini corpus, the CLI, a scripted provider on loopback."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from pr_review_api import cli
from pr_review_api.evaluation.corpus import build_corpus
from tests import builders
from tests.builders import final_turn
from tests.conftest import PROVIDER_KEY
from tests.environment import review_variables
from tests.fakes.provider_server import (
    RecordedRequest,
    ScriptedProvider,
    stop_turn,
    tool_call_turn,
)

DEFECT = """\
id = "a-defect"
kind = "off-by-one"
language = "python"
title = "last item"

[source]
project = "CPython"
licence = "PSF-2.0"
file = "Lib/example.py"

[[base]]
path = "lib/last.py"
text = '''
def last(items):
    return items[len(items) - 1]
'''

[[edit]]
path = "lib/last.py"
old = "items[len(items) - 1]"
new = "items[len(items)]"

[[golden]]
path = "lib/last.py"
lines = [2, 2]
issue = "Indexing with len(items) is one past the end and raises IndexError."
"""

CLEAN = """\
id = "b-clean"
kind = "docs"
language = "python"
title = "docstring"

[source]
project = "CPython"
licence = "PSF-2.0"
file = "Lib/example.py"

[[base]]
path = "lib/first.py"
text = '''
def first(items):
    return items[0]
'''

[[edit]]
path = "lib/first.py"
old = "def first(items):\\n"
new = "def first(items):\\n    \\"\\"\\"The first item.\\"\\"\\"\\n"
"""

NOT_JSON = (
    "The final review was not valid JSON. REVIEW_REPAIR_ATTEMPTS=1 gives the model one turn to "
    "correct it (REVIEW_PROFILE=local sets both)."
)


_finding = partial(builders.finding, **builders.TERSE)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "source"
    (folder / "cases").mkdir(parents=True)
    (folder / "cases" / "a.toml").write_text(DEFECT)
    (folder / "cases" / "b.toml").write_text(CLEAN)
    return folder


def _eval(provider: ScriptedProvider, *args: str) -> Result:
    env = review_variables(provider)
    return CliRunner().invoke(cli.main, ["eval", *args], env=env, prog_name="pr-review")


def _script_two_runs(provider: ScriptedProvider) -> None:
    provider.script(
        # run 1, a-defect: one tool round, then a matching finding and a null-line one
        tool_call_turn([("call_1", "inspect_git_diff", {})]),
        stop_turn(
            {
                "summary": "s",
                "findings": [
                    _finding(path="lib/last.py", line=2),
                    _finding(path="lib/last.py", line=None),
                ],
                "notes": [],
            }
        ),
        # run 1, b-clean: a false positive
        stop_turn(
            {"summary": "s", "findings": [_finding(path="lib/first.py", line=2)], "notes": []}
        ),
        # run 2, a-defect: not JSON, so the review ends invalid_model_response
        stop_turn("this is not a review"),
        # run 2, b-clean: no findings
        final_turn(summary="s"),
    )


def test_eval_scores_a_mini_corpus_per_case_and_in_total(
    scripted_provider: ScriptedProvider, source: Path
) -> None:
    _script_two_runs(scripted_provider)
    result = _eval(scripted_provider, str(source), "--runs", "2", "--format", "json")
    assert result.exit_code == 0, result.output
    scripted_provider.assert_complete()
    document = json.loads(result.stdout)
    defect, clean = document["cases"]
    assert defect["id"] == "a-defect"
    assert defect["reviews"] == 2
    assert defect["final_review_share"] == 0.5
    assert defect["termination_reasons"] == {"final_review": 1, "invalid_model_response": 1}
    assert (defect["findings"], defect["matched_findings"]) == (2, 1)
    assert (defect["golden"], defect["matched_golden"]) == (2, 1)
    assert (defect["precision"], defect["recall"]) == (0.5, 0.5)
    assert defect["f1"] == 0.5
    assert defect["rounds"] == 3  # two rounds, then one
    assert [run["locations"] for run in defect["runs"]] == [
        [["lib/last.py", 2], ["lib/last.py", None]],
        [],
    ]
    assert defect["tokens"] == 45  # 15 per scripted turn
    # The run that ended without a review says why, in the error's own words (naming the
    # setting that would have let the model correct it) and the rule that failed.
    assert [run["error"] for run in defect["runs"]] == [
        None,
        {"code": "invalid_model_response", "message": NOT_JSON, "rule": "json"},
    ]
    assert document["jobs"] == 1
    assert clean["findings"] == 1
    assert clean["precision"] == 0.0
    assert clean["recall"] is None
    assert clean["f1"] is None
    total = document["total"]
    assert total["cases"] == 2
    assert total["reviews"] == 4
    assert total["final_review_share"] == 0.75
    assert (total["findings"], total["matched_findings"]) == (3, 1)
    assert (total["golden"], total["matched_golden"]) == (2, 1)
    assert total["precision"] == round(1 / 3, 4)
    assert total["recall"] == 0.5
    assert total["f1"] == 0.4
    assert total["wall_seconds"] > 0
    assert document["settings"]["review_max_rounds"] == 8
    assert PROVIDER_KEY not in result.output
    # One progress line per review on stderr.
    assert result.stderr.count("golden matched") == 4


def test_eval_reads_a_built_corpus_and_prints_a_table(
    scripted_provider: ScriptedProvider, source: Path, tmp_path: Path
) -> None:
    build_corpus(source, tmp_path / "built")
    scripted_provider.script(final_turn(_finding(path="lib/last.py", line=1), summary="s"))
    result = _eval(scripted_provider, str(tmp_path / "built"), "--case", "a-defect")
    assert result.exit_code == 0, result.output
    scripted_provider.assert_complete()
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["case", "reviews", "final", "findings"]
    row = lines[1].split()
    assert row[:7] == ["a-defect", "1", "1.00", "1", "1.00", "1.00", "1.00"]
    assert any(line.startswith("TOTAL") for line in lines)
    assert "Ended: final_review 1." in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--case", "nope"], "A --case names no case of the corpus."),
        (["--runs", "0"], None),
    ],
)
def test_eval_bad_arguments_exit_2(
    scripted_provider: ScriptedProvider, source: Path, args: list[str], message: str | None
) -> None:
    result = _eval(scripted_provider, str(source), *args, "--format", "json")
    assert result.exit_code == 2
    if message is not None:
        assert json.loads(result.stdout)["error"] == {"code": "invalid_request", "message": message}
    assert scripted_provider.requests == []


def test_eval_of_a_folder_that_is_no_corpus_exits_2(
    scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    result = _eval(scripted_provider, str(tmp_path))
    assert result.exit_code == 2
    assert "(invalid_request)" in result.stderr
    assert str(tmp_path) not in result.stderr


def test_eval_without_a_provider_key_exits_2(source: Path) -> None:
    result = CliRunner().invoke(cli.main, ["eval", str(source)], prog_name="pr-review")
    assert result.exit_code == 2
    assert "OPENCODE_API_KEY" in result.stderr


def test_eval_text_and_html_list_each_run_that_ended_without_a_review(
    scripted_provider: ScriptedProvider, source: Path
) -> None:
    _script_two_runs(scripted_provider)
    text = _eval(scripted_provider, str(source), "--runs", "2")
    assert text.exit_code == 0, text.output
    assert "Runs that ended without a review:" in text.stdout
    assert (
        f"  a-defect run 2: invalid_model_response: {NOT_JSON} (rule: json)"
        in text.stdout.splitlines()
    )
    _script_two_runs(scripted_provider)
    page = _eval(scripted_provider, str(source), "--runs", "2", "--format", "html")
    assert page.exit_code == 0, page.output
    assert '<table id="errors">' in page.stdout
    assert (
        "<tr><td>a-defect</td><td>2</td><td>invalid_model_response</td>"
        f"<td>{NOT_JSON}</td><td>json</td></tr>" in page.stdout
    )
    scripted_provider.assert_complete()


def _by_case(request: RecordedRequest) -> dict[str, Any]:
    """A final review for whichever case the request is about (its first user message)."""
    first = json.dumps(request.json["messages"][:2])
    path = "lib/last.py" if "lib/last.py" in first else "lib/first.py"
    return final_turn(_finding(path=path, line=2), summary=path)


def test_eval_jobs_reviews_cases_at_once_and_reports_in_corpus_order(
    scripted_provider: ScriptedProvider, source: Path
) -> None:
    scripted_provider.responder = _by_case
    scripted_provider.gather = 2  # no reply until both cases' requests are in flight
    result = _eval(scripted_provider, str(source), "--runs", "2", "--jobs", "2", "--format", "json")
    assert result.exit_code == 0, result.output
    assert scripted_provider.peak_in_flight == 2
    assert len(scripted_provider.requests) == 4
    document = json.loads(result.stdout)
    assert document["jobs"] == 2
    assert [case["id"] for case in document["cases"]] == ["a-defect", "b-clean"]
    for case, path in zip(document["cases"], ["lib/last.py", "lib/first.py"], strict=True):
        assert [run["run"] for run in case["runs"]] == [1, 2]
        assert [run["locations"] for run in case["runs"]] == [[[path, 2]], [[path, 2]]]


def test_eval_jobs_is_bounded(scripted_provider: ScriptedProvider, source: Path) -> None:
    for jobs in ("0", "17"):
        result = _eval(scripted_provider, str(source), "--jobs", jobs)
        assert result.exit_code == 2
    assert scripted_provider.requests == []
