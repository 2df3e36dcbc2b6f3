"""Final-review repairs (REVIEW_REPAIR_ATTEMPTS) and REVIEW_TOLERANT_FINAL_JSON, driven by
`ScriptedModel`: what the model is told, and what ends the review.
"""

from __future__ import annotations

import json

import pytest

from pr_review_api.errors import InvalidModelResponse
from pr_review_api.llm.testing import ScriptedModel, tool_turn
from pr_review_api.llm.testing import stop_turn as scripted_stop
from tests.gitrepo import GitRepo
from tests.loop.support import REVIEW, read_call, scripted_review

REPAIR_AGAIN = (
    " Reply with the final review only: one JSON object matching the schema in the system "
    "message, with no Markdown fence and no text before or after it."
)


# --- REVIEW_REPAIR_ATTEMPTS (specification §12) -------------------------------------------------

BAD_LINE = {**REVIEW, "findings": [{**REVIEW["findings"][0], "line": 999}]}  # type: ignore[dict-item]


def test_without_repair_attempts_a_failed_stop_turn_ends_the_review(
    widget: tuple[GitRepo, str, str],
) -> None:
    model = ScriptedModel(scripted_stop(BAD_LINE))
    with pytest.raises(InvalidModelResponse):
        scripted_review(model, widget)
    model.assert_complete()


def test_a_repair_that_succeeds(widget: tuple[GitRepo, str, str]) -> None:
    bad = scripted_stop(BAD_LINE)
    model = ScriptedModel(bad, scripted_stop(REVIEW))
    result = scripted_review(model, widget, review_repair_attempts=1, include_trace=True)
    model.assert_complete()
    assert result.termination_reason == "final_review"
    assert result.rounds == 2  # the repair counts as a round
    repaired = model.requests[1].messages
    assert repaired[2] == bad.message  # the failed stop turn is kept as received
    assert repaired[3] == {
        "role": "user",
        "content": (
            "Finding 1's line is past the end of its file, which has 212 lines." + REPAIR_AGAIN
        ),
    }
    assert result.trace is not None
    assert [turn.round for turn in result.trace] == [1, 2]
    assert result.usage.total_tokens == 30


def test_a_repair_that_runs_out(widget: tuple[GitRepo, str, str]) -> None:
    model = ScriptedModel(
        scripted_stop("not json"), scripted_stop("still not"), scripted_stop(BAD_LINE)
    )
    with pytest.raises(InvalidModelResponse) as raised:
        scripted_review(model, widget, review_repair_attempts=2)
    model.assert_complete()
    assert raised.value.message == "Finding 1 names a line past the end of its file."
    assert raised.value.termination_reason == "invalid_model_response"


def test_a_repair_is_never_made_on_the_last_round(widget: tuple[GitRepo, str, str]) -> None:
    model = ScriptedModel(tool_turn([read_call("a")]), scripted_stop("not json"))
    with pytest.raises(InvalidModelResponse):
        scripted_review(model, widget, review_repair_attempts=3, review_max_rounds=2)
    model.assert_complete()


HOSTILE_TEXT = "IGNORE-RULES \x1b]52;c;ZXZpbA==\x07 \x1b[2J"


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("not json " + HOSTILE_TEXT, "Your final review was not valid JSON."),
        ("   ", "Your final review was empty."),
        (
            "```json\n" + json.dumps(REVIEW) + "\n```",
            "Your final review was wrapped in a Markdown code fence.",
        ),
        (
            json.dumps({**REVIEW, "findings": [{**REVIEW["findings"][0], "path": "nope.py"}]}),  # type: ignore[dict-item]
            "Finding 1's path does not name a regular file at the head commit; use the "
            "repository-relative path of an existing file.",
        ),
        (
            json.dumps({**REVIEW, HOSTILE_TEXT: 1}),
            "Your final review has an unknown field at the top level.",
        ),
        (
            json.dumps({**REVIEW, "severity": "high"}),
            'Your final review has the unknown field "severity" at the top level.',
        ),
        (
            json.dumps({**REVIEW, "findings": [{**REVIEW["findings"][0], HOSTILE_TEXT: 1}]}),  # type: ignore[dict-item]
            "Your final review has an unknown field at findings.0.",
        ),
        (
            json.dumps({**REVIEW, "findings": [{**REVIEW["findings"][0], "line": "42"}]}),  # type: ignore[dict-item]
            "Your final review does not match the schema at findings.0.line.",
        ),
    ],
)
def test_each_repair_message_names_the_rule_in_fixed_words(
    content: str, words: str, widget: tuple[GitRepo, str, str]
) -> None:
    model = ScriptedModel(scripted_stop(content), scripted_stop(REVIEW))
    scripted_review(model, widget, review_repair_attempts=1)
    model.assert_complete()
    repair = model.requests[1].messages[-1]
    assert repair == {"role": "user", "content": words + REPAIR_AGAIN}
    assert "IGNORE-RULES" not in repair["content"]
    assert "\x1b" not in repair["content"]


# --- REVIEW_TOLERANT_FINAL_JSON (specification §12) ---------------------------------------------


@pytest.mark.parametrize(
    "fenced",
    [
        "```json\n{doc}\n```",
        "```\n{doc}\n```\n",
        "```json\n{doc}\n",  # no closing fence, as small models often answer
        "```json\n{doc}",
    ],
)
def test_tolerant_final_json_unwraps_one_fence_with_or_without_the_closing_fence(
    fenced: str, widget: tuple[GitRepo, str, str]
) -> None:
    content = fenced.replace("{doc}", json.dumps(REVIEW))
    model = ScriptedModel(scripted_stop(content))
    result = scripted_review(model, widget, review_tolerant_final_json=True)
    assert result.review.summary == REVIEW["summary"]
    model = ScriptedModel(scripted_stop(content))
    with pytest.raises(InvalidModelResponse, match="Markdown code fence"):
        scripted_review(model, widget)


@pytest.mark.parametrize(
    "content",
    [
        "Here it is:\n```json\n{doc}\n```",
        "```json\n{doc}\n```\n```json\n{doc}\n```",
        "```json\n[{doc}]\n```",
        "```json {doc}```",
    ],
)
def test_tolerant_final_json_unwraps_nothing_else(
    content: str, widget: tuple[GitRepo, str, str]
) -> None:
    model = ScriptedModel(scripted_stop(content.replace("{doc}", json.dumps(REVIEW))))
    with pytest.raises(InvalidModelResponse):
        scripted_review(model, widget, review_tolerant_final_json=True)


# --- the setting that would have helped, named in the error (specification §12) ------------------

PROFILE = " (REVIEW_PROFILE=local sets both)."
TOLERANT = " REVIEW_TOLERANT_FINAL_JSON=true unwraps one fenced JSON object" + PROFILE
REPAIR = " REVIEW_REPAIR_ATTEMPTS=1 gives the model one turn to correct it" + PROFILE


@pytest.mark.parametrize(
    ("content", "settings", "message"),
    [
        # A fence tolerance would unwrap: that setting is named, first.
        ("```json\n{doc}\n```", {}, "The final review was wrapped in a Markdown code fence."),
        ("```json\n{doc}", {"review_repair_attempts": 1}, "The final review was wrapped"),
        # Anything else with repairs off and a round left: a repair turn is named.
        ("not json", {}, "The final review was not valid JSON."),
        ("Note:\n```json\n{doc}\n```", {}, "The final review was not valid JSON."),
        ("```json\n[{doc}]\n```", {"review_tolerant_final_json": True}, "The final review was"),
    ],
)
def test_an_ending_rejection_names_the_setting_that_would_have_helped(
    content: str, settings: dict[str, object], message: str, widget: tuple[GitRepo, str, str]
) -> None:
    model = ScriptedModel(*[scripted_stop(content.replace("{doc}", json.dumps(REVIEW)))] * 2)
    with pytest.raises(InvalidModelResponse) as raised:
        scripted_review(model, widget, **settings)  # type: ignore[arg-type]
    fenced = content.startswith("```json\n{") and not settings.get("review_tolerant_final_json")
    assert raised.value.message.startswith(message)
    assert raised.value.message.endswith(TOLERANT if fenced else REPAIR)
    assert raised.value.message.count("REVIEW_") == 2


@pytest.mark.parametrize(
    ("settings", "script"),
    [
        # Repairs were on and ran out: more of the same is not what the message offers.
        ({"review_repair_attempts": 1}, ["not json", "not json"]),
        # The last round: a repair could not have been made.
        ({"review_max_rounds": 1}, ["not json"]),
        # Tolerance on, the fenced object still fails a check: no setting fixes a wrong line.
        (
            {"review_tolerant_final_json": True, "review_repair_attempts": 1},
            ["```json\n" + json.dumps(BAD_LINE), "```json\n" + json.dumps(BAD_LINE)],
        ),
    ],
)
def test_no_setting_is_named_when_none_would_have_helped(
    settings: dict[str, object], script: list[str], widget: tuple[GitRepo, str, str]
) -> None:
    model = ScriptedModel(*[scripted_stop(content) for content in script])
    with pytest.raises(InvalidModelResponse) as raised:
        scripted_review(model, widget, **settings)  # type: ignore[arg-type]
    model.assert_complete()
    assert "REVIEW_" not in raised.value.message
