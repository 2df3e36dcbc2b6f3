"""Suggestions in the evaluation (specification §14): offered, kept, dropped by rule, and fixes of
golden issues that give the fixed text of their lines."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
from click.testing import CliRunner

from pr_review_api import cli
from pr_review_api.evaluation.corpus import GoldenIssue, load_source
from pr_review_api.evaluation.report import render_text
from pr_review_api.evaluation.scoring import Kept, SuggestionCounts, fix_count
from tests import builders
from tests.cli.test_eval import CLEAN, DEFECT
from tests.environment import review_variables
from tests.fakes.provider_server import ScriptedProvider, stop_turn

HEAD = ["def last(items):", "    return items[len(items)]"]
GOLDEN = GoldenIssue(
    path="lib/last.py", lines=(2, 2), issue="x", fix="    return items[len(items) - 1]"
)


def test_a_kept_suggestion_that_makes_the_fix_counts_whitespace_aside() -> None:
    heads = {"lib/last.py": HEAD}
    exact = Kept("lib/last.py", 2, 2, "    return items[len(items) - 1]")
    spaced = Kept("lib/last.py", 2, 2, "  return  items[len(items) - 1]  ")
    wider = Kept("lib/last.py", 1, 2, "def last(items):\n    return items[len(items) - 1]")
    assert fix_count([exact], [GOLDEN], heads) == 1
    assert fix_count([spaced], [GOLDEN], heads) == 1
    assert fix_count([wider], [GOLDEN], heads) == 1  # the same file: the same fix


@pytest.mark.parametrize(
    "kept",
    [
        Kept("lib/last.py", 2, 2, "    return items[-1]"),  # another fix: not the golden one
        Kept("lib/other.py", 2, 2, "    return items[len(items) - 1]"),  # another file
        Kept("lib/last.py", 1, 1, "def last(items, default):"),  # other lines
    ],
)
def test_anything_else_is_no_fix(kept: Kept) -> None:
    assert fix_count([kept], [GOLDEN], {"lib/last.py": HEAD}) == 0


def test_an_issue_without_a_fix_or_a_head_text_counts_nothing() -> None:
    kept = [Kept("lib/last.py", 2, 2, "    return items[len(items) - 1]")]
    plain = GOLDEN.model_copy(update={"fix": None})
    assert fix_count(kept, [plain], {"lib/last.py": HEAD}) == 0
    assert fix_count(kept, [GOLDEN], {}) == 0


def test_one_suggestion_fixes_at_most_one_issue() -> None:
    kept = [Kept("lib/last.py", 2, 2, "    return items[len(items) - 1]")]
    assert fix_count(kept, [GOLDEN, GOLDEN], {"lib/last.py": HEAD}) == 1


def test_counts_add_up_and_give_the_fix_rate() -> None:
    one = SuggestionCounts(kept=1, dropped={"syntax": 1}, golden_with_fix=1, fixes=1)
    two = SuggestionCounts(kept=0, dropped={"range": 2, "syntax": 1}, golden_with_fix=1)
    total = one + two
    assert total == SuggestionCounts(1, {"range": 2, "syntax": 2}, 2, 1)
    assert total.offered == 5
    assert total.fix_rate == 0.5
    assert SuggestionCounts().fix_rate is None


def test_the_corpus_fixes_revert_the_planted_edits() -> None:
    cases = load_source(Path(__file__).parents[2] / "eval")
    fixes = [issue for case in cases for issue in case.golden if issue.fix is not None]
    assert len(fixes) >= 10


_finding = partial(builders.finding, path="lib/last.py", **builders.TERSE)


def test_eval_reports_offered_kept_dropped_and_fixes(
    scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    folder = tmp_path / "source"
    (folder / "cases").mkdir(parents=True)
    fixed = DEFECT.replace(
        "lines = [2, 2]\n", "lines = [2, 2]\nfix = '''\n    return items[len(items) - 1]'''\n"
    )
    (folder / "cases" / "a.toml").write_text(fixed)
    (folder / "cases" / "b.toml").write_text(CLEAN)
    good = {"start_line": 2, "end_line": 2, "replacement": "    return items[len(items) - 1]"}
    broken = {"start_line": 2, "end_line": 2, "replacement": "    return items[len(items) - 1"}
    scripted_provider.script(
        stop_turn(
            {
                "summary": "s",
                "findings": [
                    _finding(line=2, suggestion=good),
                    _finding(line=2, suggestion=broken),
                    _finding(line=1, suggestion=None),
                ],
                "notes": [],
            }
        ),
        stop_turn(
            {
                "summary": "s",
                "findings": [
                    _finding(line=2, suggestion={**good, "end_line": 9}, path="lib/first.py")
                ],
                "notes": [],
            }
        ),
    )
    env = review_variables(scripted_provider, REVIEW_SUGGESTIONS="true")
    result = CliRunner().invoke(cli.main, ["eval", str(folder), "--format", "json"], env=env)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["settings"]["review_suggestions"] is True
    assert document["cases"][0]["suggestions"] == {
        "offered": 2,
        "kept": 1,
        "dropped": {"syntax": 1},
        "golden_with_fix": 1,
        "fixes": 1,
        "fix_rate": 1.0,
    }
    assert document["total"]["suggestions"] == {
        "offered": 3,
        "kept": 1,
        "dropped": {"range": 1, "syntax": 1},
        "golden_with_fix": 1,
        "fixes": 1,
        "fix_rate": 1.0,
    }
    assert render_text(document).splitlines()[-2] == (
        "Suggestions: 3 offered, 1 kept, dropped range 1, syntax 1; "
        "1 of 1 golden issues with a fix fixed (rate 1.00)."
    )
