"""Custom checks (specification §20): the configuration, which apply, the schema and prompts, the
validation of a stop turn's `checks`, the evidence rule for a `fail`, and batches merged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.errors import InvalidModelResponse
from pr_review_api.llm.testing import ScriptedModel, stop_turn, tool_turn
from pr_review_api.loop.batches import merge_reviews
from pr_review_api.loop.custom_checks import (
    NOTE_UNGROUNDED_CHECKS,
    CustomCheck,
    applicable,
    ground_checks,
)
from pr_review_api.loop.evidence import ReceivedCode
from pr_review_api.loop.final_review import final_review_schema
from pr_review_api.loop.prompts import system_prompt
from pr_review_api.loop.repo_config import parse_repo_config
from pr_review_api.model import CheckResult, FinalReview
from tests.builders import final_review
from tests.gitrepo import GitRepo
from tests.loop.support import REVIEW, scripted_review

MIGRATIONS = """
[[checks]]
name = "Migrations have a downgrade"
instructions = "Every new migration defines downgrade()."
paths = ["migrations/**"]
mode = "error"

[[checks]]
name = "No print calls"
instructions = "Library code logs; it never calls print()."
"""
CODE = "def upgrade():\n    create_table('widgets')\n"


def config(text: str) -> Any:
    return parse_repo_config(text.encode())


def result(name: str, kind: str = "pass", evidence: str = "") -> dict[str, str]:
    return {"name": name, "result": kind, "explanation": "Because.", "evidence": evidence}


# --- Configuration --------------------------------------------------------------------------


def test_checks_are_read_with_their_defaults() -> None:
    loaded = config(MIGRATIONS)
    assert loaded.note is None
    first, second = loaded.config.checks
    assert (first.mode, first.paths) == ("error", ("migrations/**",))
    assert (second.mode, second.paths) == ("warning", ())


@pytest.mark.parametrize(
    "text",
    [
        '[[checks]]\nname = ""\ninstructions = "x"\n',
        '[[checks]]\nname = "   "\ninstructions = "x"\n',
        f'[[checks]]\nname = "{"n" * 81}"\ninstructions = "x"\n',
        f'[[checks]]\nname = "a"\ninstructions = "{"é" * 1025}"\n',
        '[[checks]]\nname = "a"\ninstructions = "x"\nmode = "fatal"\n',
        '[[checks]]\nname = "a"\ninstructions = "x"\nfail_on = "none"\n',
        '[[checks]]\nname = "a"\ninstructions = "x"\n[[checks]]\nname = "a"\ninstructions = "y"\n',
        "".join(f'[[checks]]\nname = "c{i}"\ninstructions = "x"\n' for i in range(11)),
    ],
    ids=["empty", "blank", "long-name", "long-instructions", "mode", "key", "twice", "eleven"],
)
def test_a_bad_check_ignores_the_file_with_a_note(text: str) -> None:
    loaded = config(text)
    assert loaded.config.checks == ()
    assert loaded.note is not None
    assert "checks" in loaded.note


def test_only_checks_whose_globs_match_a_changed_file_apply() -> None:
    checks = config(MIGRATIONS).config.checks
    assert [c.name for c in applicable(checks, ["src/app.py"])] == ["No print calls"]
    names = [c.name for c in applicable(checks, ["migrations/0002.py", "x.py"])]
    assert names == ["Migrations have a downgrade", "No print calls"]
    assert applicable(checks, []) == ()


# --- The schema and the prompts -------------------------------------------------------------


def test_the_schema_gains_checks_only_when_asked() -> None:
    assert "checks" not in final_review_schema()["properties"]
    schema = final_review_schema(checks=True)
    assert schema["required"] == ["summary", "findings", "notes", "checks"]
    assert schema["properties"]["checks"]["items"]["required"] == [
        "name",
        "result",
        "explanation",
        "evidence",
    ]
    prompt = system_prompt(checks=True)
    assert '"checks"' in prompt
    assert prompt.startswith(system_prompt().split("Rules:")[0])


# --- Whole reviews ----------------------------------------------------------------------------


@pytest.fixture
def migration(tmp_path: Path) -> tuple[GitRepo, str, str]:
    repo = GitRepo(tmp_path / "repo")
    base = repo.commit_files({".pr-review.toml": MIGRATIONS, "README.md": "# app\n"})
    head = repo.commit_files({"migrations/0002.py": CODE})
    return repo, base, head


READ = ("c1", "read_repository_file", {"path": "migrations/0002.py"})


def test_a_grounded_fail_stands_and_the_checks_are_in_the_users_block(
    migration: tuple[GitRepo, str, str],
) -> None:
    checks = [
        result("No print calls"),
        result("Migrations have a downgrade", "fail", "create_table('widgets')"),
    ]
    model = ScriptedModel(tool_turn([READ]), stop_turn(final_review(summary="ok", checks=checks)))
    done = scripted_review(model, migration)
    model.assert_complete()
    got = done.review.check_results()
    assert [(c.name, c.result) for c in got] == [
        ("Migrations have a downgrade", "fail"),  # the file's order, not the model's
        ("No print calls", "pass"),
    ]
    system, user = model.requests[0].messages[:2]
    assert "Migrations have a downgrade" not in system["content"]  # repository text: user only
    block = user["content"].split("<repository_instructions>\n")[1].split("\n</repository")[0]
    assert [c["name"] for c in json.loads(block)["checks"]] == [c["name"] for c in checks[::-1]]
    assert json.loads(block)["checks"][0]["applies_to"] == ["migrations/0002.py"]
    assert json.loads(done.model_dump_json())["review"]["checks"][0]["result"] == "fail"


def test_a_fail_quoting_no_code_the_model_received_becomes_inconclusive(
    migration: tuple[GitRepo, str, str],
) -> None:
    checks = [
        result("Migrations have a downgrade", "fail", "def downgrade(): pass  # missing"),
        result("No print calls", "fail", "create_table('widgets')"),  # never read: no tool call
    ]
    model = ScriptedModel(stop_turn(final_review(summary="ok", checks=checks)))
    done = scripted_review(model, migration)
    assert [c.result for c in done.review.check_results()] == ["inconclusive", "inconclusive"]
    assert done.review.notes == [NOTE_UNGROUNDED_CHECKS.format(count=2)]


@pytest.mark.parametrize(
    ("checks", "words"),
    [
        (None, "no checks array"),
        ([result("No print calls")], "every applicable check"),
        ([result("No print calls"), result("No print calls")], "named before"),
        ([result("No print calls"), result("Something else")], "names no applicable"),
        ([{"name": "No print calls", "result": "maybe"}], "does not match its schema"),
    ],
    ids=["missing", "one-short", "twice", "unknown", "shape"],
)
def test_checks_that_break_a_rule_are_rejected_in_fixed_words(
    migration: tuple[GitRepo, str, str], checks: Any, words: str
) -> None:
    model = ScriptedModel(stop_turn(final_review(summary="ok", checks=checks)))
    with pytest.raises(InvalidModelResponse) as caught:
        scripted_review(model, migration)
    assert words in caught.value.message
    assert "Something else" not in caught.value.message


def test_a_repair_turn_names_the_rule_and_the_next_stop_turn_passes(
    migration: tuple[GitRepo, str, str],
) -> None:
    good = [result("No print calls"), result("Migrations have a downgrade")]
    model = ScriptedModel(
        stop_turn(final_review(summary="ok")), stop_turn(final_review(summary="ok", checks=good))
    )
    done = scripted_review(model, migration, review_repair_attempts=1)
    assert [c.result for c in done.review.check_results()] == ["pass", "pass"]
    repair = model.requests[1].messages[-1]["content"]
    assert "2 checks named in the repository block" in repair


def test_with_no_applicable_check_the_prompts_match_a_file_without_checks(
    tmp_path: Path,
) -> None:
    """A check whose globs match nothing changes no byte of what the model is sent, and a
    `checks` field is then an unknown field (specification §8)."""
    sent = []
    for name, text in [
        ("with", MIGRATIONS.split('[[checks]]\nname = "No', maxsplit=1)[0]),
        ("none", ""),
    ]:
        repo = GitRepo(tmp_path / name)
        base = repo.commit_files({".pr-review.toml": text})
        head = repo.commit_files({"src/app.py": CODE})
        model = ScriptedModel(stop_turn(REVIEW | {"findings": []}))
        done = scripted_review(model, (repo, base, head))
        assert "checks" not in json.loads(done.model_dump_json())["review"]
        contents = [m["content"] for m in model.requests[0].messages]
        sent.append([c.replace(base, "BASE").replace(head, "HEAD") for c in contents])
    assert sent[0] == sent[1]
    model = ScriptedModel(stop_turn(final_review(summary="ok", checks=[result("x")])))
    with pytest.raises(InvalidModelResponse, match="unknown field"):
        scripted_review(model, (repo, base, head))


# --- Grounding and merging, as functions ----------------------------------------------------


def _review(*results: CheckResult) -> FinalReview:
    review = FinalReview(summary="s", findings=[], notes=[])
    return review.model_copy(update={"checks": list(results)})


def test_grounding_keeps_a_quoted_fail_and_every_pass() -> None:
    received = ReceivedCode()
    received.saw_diff("+    create_table('widgets')\n")
    review = _review(
        CheckResult(**result("a", "fail", "create_table('widgets')")),  # type: ignore[arg-type]
        CheckResult(**result("b", "pass")),  # type: ignore[arg-type]
    )
    assert ground_checks(review, received) is review


def test_batches_merge_each_checks_results() -> None:
    names = ["fails", "unsure", "passes", "undecided"]
    checks = [CustomCheck(name=n, instructions="x") for n in names]
    one = _review(
        CheckResult(**result("fails", "pass")),  # type: ignore[arg-type]
        CheckResult(**result("unsure", "inconclusive")),  # type: ignore[arg-type]
        CheckResult(**result("passes", "pass")),  # type: ignore[arg-type]
    )
    two = _review(
        CheckResult(**result("fails", "fail", "x = 1")),  # type: ignore[arg-type]
        CheckResult(**result("unsure", "pass")),  # type: ignore[arg-type]
        CheckResult(**result("passes", "pass")),  # type: ignore[arg-type]
    )
    merged = merge_reviews([("a.py",), ("b.py",)], [one, two], checks=checks)
    assert [(c.name, c.result) for c in merged.check_results()] == [
        ("fails", "fail"),
        ("unsure", "inconclusive"),
        ("passes", "pass"),
        ("undecided", "inconclusive"),
    ]
    assert merged.check_results()[0].evidence == "x = 1"
    assert "No batch of this review gave a result for check 4." in merged.notes
    assert "checks" not in merge_reviews([("a.py",)], [one]).model_dump()
