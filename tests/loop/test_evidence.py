"""Grounded evidence (loop/evidence.py, REVIEW_REQUIRE_EVIDENCE): what the model received, which
evidence quotes it, and what the review does with findings that quote nothing it saw."""

from __future__ import annotations

import asyncio
import hashlib
from functools import partial
from pathlib import Path
from typing import Any

from pr_review_api.llm.testing import ScriptedModel, stop_turn, tool_turn
from pr_review_api.loop.evidence import (
    NOTE_UNGROUNDED,
    ReceivedCode,
    apply_evidence_rule,
    is_real_code,
    normalise,
    ungrounded_count,
)
from pr_review_api.loop.prompts import EVIDENCE_RULES, system_prompt
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import ChangeTarget
from pr_review_api.model import FinalReview, Finding
from pr_review_api.settings import MAX_NOTES
from tests import builders
from tests.builders import final_review
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes.github_server import FakeGitHub
from tests.gitrepo import GitRepo
from tests.loop.support import read_call, scripted_review

# The system prompt as it was before REVIEW_REQUIRE_EVIDENCE existed (2,942 characters).
PROMPT_BEFORE_THE_SETTING = "273593e8f81522f0bb5ae7b562cbacde404f1afd7d41055a8982554f47337f21"


finding = partial(
    builders.finding, title="A defect", line=3, explanation="It breaks.", recommendation="Fix it."
)


final = partial(final_review, summary="Reviewed.", notes=["Read the service."])


def received_from(name: str, result: dict[str, Any]) -> ReceivedCode:
    received = ReceivedCode()
    received.saw_tool_result(name, {"ok": True, **result})
    return received


READ = {"path": "a.py", "content": "1: def save(widget):\n2:     db.write( widget )\n3: });"}


# --- What counts as a quote -------------------------------------------------------------------


def test_a_line_read_counts_with_or_without_its_number() -> None:
    received = received_from("read_repository_file", READ)
    assert received.quotes("db.write( widget )")
    assert received.quotes("2:     db.write( widget )")
    assert received.quotes("def save(widget):")
    assert not received.quotes("db.write(widget)")  # spacing inside a line is not removed


def test_whitespace_is_normalised_on_both_sides() -> None:
    received = received_from("read_repository_file", READ)
    assert received.quotes("\t  db.write(\t widget   )   ")
    assert received.quotes("`db.write( widget )`")  # inline backticks around the quote


def test_a_search_excerpt_counts_without_its_cut_marks() -> None:
    matches = [{"path": "a.py", "line": 9, "excerpt": "…token = make_token(user, secret)…"}]
    received = received_from("search_repository", {"query": "make_token", "matches": matches})
    assert received.quotes("token = make_token(user, secret)")
    assert not received.quotes("…token = make_token(user, secret)… and more")


def test_a_diff_line_counts_with_or_without_its_prefix() -> None:
    diff = (
        "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n"
        " def save(widget):\n-    validate(widget)\n+    db.write(widget)\n"
    )
    received = received_from("inspect_git_diff", {"paths": [], "diff": diff, "truncated": False})
    assert received.quotes("+    db.write(widget)")
    assert received.quotes("db.write(widget)")
    assert received.quotes("-    validate(widget)")
    assert received.quotes("validate(widget)")


def test_invented_code_and_failed_calls_count_for_nothing() -> None:
    received = received_from("read_repository_file", READ)
    assert not received.quotes("db.delete_everything(widget)")
    failed = ReceivedCode()
    failed.saw_tool_result("read_repository_file", {"ok": False, **READ})
    listed = received_from("list_repository_files", {"entries": ["db.write( widget )"]})
    assert len(failed) == 0
    assert len(listed) == 0
    assert not failed.quotes("db.write( widget )")


def test_short_or_punctuation_lines_are_not_real_code() -> None:
    assert not is_real_code(normalise("  });  "))
    assert not is_real_code(normalise("```"))
    assert not is_real_code(normalise("else:"))
    assert is_real_code(normalise("return x"))
    received = received_from("read_repository_file", READ)
    assert not received.quotes("});")  # received, yet it proves nothing


def test_multi_line_evidence_needs_one_matching_line_of_real_code() -> None:
    received = received_from("read_repository_file", READ)
    grounded = "The write comes first:\n```python\n    db.write( widget )\n```\nso it is unchecked."
    assert received.quotes(grounded)
    assert not received.quotes("The write comes first:\n```\nwidget.save()\n```")


# --- Dropping ungrounded findings -------------------------------------------------------------


def test_the_rule_drops_ungrounded_findings_with_one_fixed_note() -> None:
    received = received_from("read_repository_file", READ)
    review = FinalReview.model_validate(
        final(
            finding(evidence="db.write( widget )"),
            finding(evidence="frobnicate()"),
            finding(evidence="save() is late"),
        )
    )
    kept = apply_evidence_rule(review, received)
    assert [f.evidence for f in kept.findings] == ["db.write( widget )"]
    assert kept.notes == ["Read the service.", NOTE_UNGROUNDED.format(count=2)]
    assert ungrounded_count(kept.notes) == 2
    assert ungrounded_count(review.notes) == 0


def test_a_grounded_review_is_unchanged_and_a_full_notes_list_makes_room() -> None:
    received = received_from("read_repository_file", READ)
    review = FinalReview.model_validate(final(finding(evidence="db.write( widget )")))
    assert apply_evidence_rule(review, received) is review
    crowded = FinalReview(
        summary="s",
        findings=[Finding.model_validate(finding(evidence="invented(call)"))],
        notes=[f"note {n}" for n in range(MAX_NOTES)],
    )
    cut = apply_evidence_rule(crowded, received)
    assert len(cut.notes) == MAX_NOTES
    assert cut.notes[-1] == NOTE_UNGROUNDED.format(count=1)


# --- Through the loop ---------------------------------------------------------------------------


def test_a_review_keeps_findings_quoting_a_read_or_a_search(
    widget: tuple[GitRepo, str, str],
) -> None:
    model = ScriptedModel(
        tool_turn(
            [
                read_call("r1", start_line=40, end_line=44),
                ("s1", "search_repository", {"query": "validate_name", "limit": 1}),
            ]
        ),
        stop_turn(
            final(
                finding(evidence="42: line 42: validate_name(widget.name)", title="Read", line=42),
                finding(evidence="line 1: validate_name(widget.name)", title="Searched", line=1),
                finding(evidence="widget.save(force=True)", title="Invented", line=3),
            )
        ),
    )
    result = scripted_review(model, widget, review_require_evidence=True)
    assert [f.title for f in result.review.findings] == ["Read", "Searched"]
    assert result.review.notes[-1] == NOTE_UNGROUNDED.format(count=1)
    system = model.requests[0].messages[0]["content"]
    assert EVIDENCE_RULES in system
    assert system == system_prompt(require_evidence=True)
    model.assert_complete()


def test_a_review_keeps_findings_quoting_the_inline_diff(
    widget: tuple[GitRepo, str, str],
) -> None:
    model = ScriptedModel(
        stop_turn(
            final(
                finding(evidence="+line 3: validate_name(widget.name)", title="From the diff"),
                finding(evidence="-old", title="Too short to be code"),
                finding(evidence="line 300: validate_name(widget.name)", title="Never shown"),
            )
        )
    )
    result = scripted_review(
        model, widget, review_require_evidence=True, review_inline_diff_bytes=16384
    )
    assert [f.title for f in result.review.findings] == ["From the diff"]
    assert ungrounded_count(result.review.notes) == 2


def test_off_by_default_the_prompt_and_the_findings_are_as_before(
    widget: tuple[GitRepo, str, str],
) -> None:
    model = ScriptedModel(stop_turn(final(finding(evidence="widget.save(force=True)"))))
    result = scripted_review(model, widget)
    assert len(result.review.findings) == 1
    assert result.review.notes == ["Read the service."]
    system = model.requests[0].messages[0]["content"]
    assert hashlib.sha256(system.encode()).hexdigest() == PROMPT_BEFORE_THE_SETTING
    assert system == system_prompt()
    assert EVIDENCE_RULES not in system


def test_the_pull_requests_title_and_description_are_not_evidence(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request(
        "acme",
        "widget",
        7,
        base={"src/service.py": "def save(w):\n    db.write(w)\n"},
        head={"src/service.py": "def save(w):\n    db.write(w)\n    validate(w)\n"},
        title="db.drop_all_tables(w)",
        body="    secrets.leak(password)\n",
    )
    model = ScriptedModel(
        tool_turn([("d1", "inspect_git_diff", {})]),
        stop_turn(
            {
                "summary": "Reviewed.",
                "findings": [
                    {
                        **finding(evidence="db.drop_all_tables(w)", title="Title"),
                        "path": "src/service.py",
                    },
                    {
                        **finding(evidence="secrets.leak(password)", title="Body"),
                        "path": "src/service.py",
                    },
                    {
                        **finding(evidence="+    validate(w)", title="Diff"),
                        "path": "src/service.py",
                    },
                ],
                "notes": [],
            }
        ),
    )
    settings = fake_github.settings(
        tmp_path / "cache",
        token=GITHUB_TOKEN,
        opencode_api_key=PROVIDER_KEY,
        review_timeout_seconds=60,
        review_require_evidence=True,
    )
    result = asyncio.run(run_review(ChangeTarget(pull.url), settings, ReviewOptions(model=model)))
    assert "db.drop_all_tables(w)" in model.requests[0].messages[1]["content"]
    assert [f.title for f in result.review.findings] == ["Diff"]
    assert result.review.notes == [NOTE_UNGROUNDED.format(count=2)]
