"""The evaluation report (evaluation/report.py): duplicates apart from false positives, findings
dropped for ungrounded evidence, and the bootstrap intervals of the total."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pr_review_api.evaluation.bootstrap import METHOD, intervals
from pr_review_api.evaluation.compare import read_report
from pr_review_api.evaluation.corpus import BuiltCase, CaseSource, GoldenIssue
from pr_review_api.evaluation.report import render_json, render_text, report_document
from pr_review_api.evaluation.runner import CaseReport, ReviewOutcome
from pr_review_api.evaluation.scoring import Located, score_review
from pr_review_api.settings import load_settings

SHA = "0" * 40


def case(case_id: str, golden: list[GoldenIssue]) -> BuiltCase:
    return BuiltCase(
        id=case_id,
        kind="off-by-one" if golden else "docs",
        language="python",
        title="t",
        source=CaseSource(project="p", licence="MIT", file="f.py"),
        repository=f"repos/{case_id}",
        base=SHA,
        head=SHA,
        golden=golden,
    )


def outcome(built: BuiltCase, run: int, lines: list[int], ungrounded: int = 0) -> ReviewOutcome:
    findings = [Located("a.py", line) for line in lines]
    counts = score_review(findings, built.golden)
    return ReviewOutcome(
        built.id, run, "final_review", findings, counts, 100, 2, 1.5, 1.0, ungrounded
    )


def document() -> dict[str, Any]:
    defect = case("a-defect", [GoldenIssue(path="a.py", lines=(10, 10), issue="x")])
    clean = case("b-clean", [])
    reports = [
        CaseReport(defect, [outcome(defect, 1, [10, 11, 40], ungrounded=2)]),
        CaseReport(clean, [outcome(clean, 1, [3])]),
    ]
    return report_document(reports, load_settings(review_require_evidence=True), runs=1)


def test_duplicates_are_counted_apart_from_false_positives() -> None:
    defect, clean = document()["cases"]
    # 10 matches; 11 also fits the matched issue (a duplicate); 40 fits nothing.
    assert (defect["findings"], defect["matched_findings"]) == (3, 1)
    assert (defect["duplicates"], defect["false_positives"]) == (1, 1)
    assert defect["precision"] == round(1 / 3, 4)  # duplicates stay in the denominator
    assert defect["runs"][0]["duplicates"] == 1
    assert (clean["duplicates"], clean["false_positives"]) == (0, 1)
    total = document()["total"]
    assert (total["duplicates"], total["false_positives"]) == (1, 2)


def test_findings_dropped_for_ungrounded_evidence_are_counted() -> None:
    made = document()
    assert made["cases"][0]["ungrounded_dropped"] == 2
    assert made["cases"][0]["runs"][0]["ungrounded_dropped"] == 2
    assert made["total"]["ungrounded_dropped"] == 2
    assert made["settings"]["review_require_evidence"] is True
    assert "dropped for evidence quoting no code the model received: 2." in render_text(made)


def test_the_total_has_deterministic_bootstrap_intervals() -> None:
    made = document()
    assert made == document()
    assert made["bootstrap"] == METHOD
    found = made["total"]["intervals"]
    assert set(found) == {"precision", "recall", "f1"}
    assert found["precision"][0] <= made["total"]["precision"] <= found["precision"][1]
    assert found["recall"] == [1.0, 1.0]  # every resample holds the defect case or no golden
    text = render_text(made)
    assert "95% bootstrap intervals over the 2 cases (2000 resamples, seed 29)" in text
    header = text.splitlines()[0].split()
    assert header[7:9] == ["dup", "FP"]


def test_a_report_is_what_compare_reads(tmp_path: Path) -> None:
    made = document()
    path = tmp_path / "a.json"
    path.write_text(render_json(made))
    read = read_report(path, "first")
    assert [c.id for c in read.cases] == ["a-defect", "b-clean"]
    assert read.cases[0].counts().duplicates == 1
    assert read.settings == json.loads(render_json(made))["settings"]
    per_case = [c.counts() for c in read.cases]
    rounded = {k: None if v is None else v.rounded() for k, v in intervals(per_case).items()}
    assert rounded == made["total"]["intervals"]
