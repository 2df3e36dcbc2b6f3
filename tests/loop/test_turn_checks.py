"""The seed's nine turn checks and the stop-turn envelope rules, one test per rule.

These drive the two halves of the checks directly with envelopes as a provider would send
them: the OpenAI adapter's envelope checks 1 to 3 (`llm/envelope.py`) and the loop's checks 4 to
9 (`loop/turn_checks.py`), joined by `parse_turn` below. The same rules are exercised end to end in
test_review_loop.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pr_review_api.errors import (
    InvalidModelResponse,
    InvalidToolCall,
    MaxToolCalls,
    ReviewError,
    UnsupportedFinishReason,
)
from pr_review_api.jsonutil import StrictJSONError, loads_strict
from pr_review_api.llm.envelope import turn_from_envelope
from pr_review_api.llm.testing import ScriptedModel
from pr_review_api.llm.testing import stop_turn as scripted_stop
from pr_review_api.loop.turn_checks import CallLimits, CheckedTurn, check_turn
from pr_review_api.tools import ReadFileArguments

LIMITS = CallLimits(per_round=8, total=24, used=0)


def parse_turn(envelope: object, seen: set[str], limits: CallLimits) -> CheckedTurn:
    """All nine turn checks, as a provider's answer meets them."""
    return check_turn(turn_from_envelope(envelope), seen, limits)


def call(
    call_id: str = "call_1",
    name: str = "read_repository_file",
    arguments: Any = None,
    **extra: Any,
) -> dict[str, Any]:
    if arguments is None:
        arguments = {"path": "src/app.py"}
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": raw},
        **extra,
    }


def envelope(
    calls: list[Any] | None = None,
    finish_reason: Any = "tool_calls",
    content: Any = None,
    **message_extra: Any,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content, **message_extra}
    if calls is not None:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl_1",
        "model": "deepseek-v4-flash",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }


def fails(document: object, error: type[ReviewError], *, seen: set[str] | None = None) -> None:
    with pytest.raises(error):
        parse_turn(document, seen or set(), LIMITS)


def test_valid_tool_call_turn_is_parsed_with_validated_arguments() -> None:
    turn = parse_turn(envelope([call(arguments={"path": "a.py", "end_line": 9})]), set(), LIMITS)
    assert turn.finish_reason == "tool_calls"
    assert turn.request_id == "chatcmpl_1"
    assert turn.model == "deepseek-v4-flash"
    assert turn.usage.total_tokens == 12
    [parsed] = turn.calls
    assert parsed.id == "call_1"
    assert parsed.arguments == {"path": "a.py", "end_line": 9}
    assert parsed.validated == ReadFileArguments(path="a.py", end_line=9)


def test_assistant_message_is_kept_exactly_as_received() -> None:
    document = envelope([call()], reasoning_content="thinking", content="let me look")
    turn = parse_turn(document, set(), LIMITS)
    assert turn.message is document["choices"][0]["message"]


# Check 1: exactly one choice exists at index zero.
@pytest.mark.parametrize(
    "choices",
    [[], None, "x", [{"index": 0}, {"index": 1}]],
    ids=["empty", "null", "string", "two"],
)
def test_check1_exactly_one_choice(choices: Any) -> None:
    document = envelope([call()])
    document["choices"] = (
        choices
        if choices != [{"index": 0}, {"index": 1}]
        else [
            document["choices"][0],
            {**document["choices"][0], "index": 1},
        ]
    )
    fails(document, InvalidModelResponse)


@pytest.mark.parametrize("index", [1, -1, None, False, "0", 0.0])
def test_check1_the_choice_has_index_zero(index: Any) -> None:
    document = envelope([call()])
    document["choices"][0]["index"] = index
    fails(document, InvalidModelResponse)


def test_check1_envelope_must_be_an_object() -> None:
    fails([envelope([call()])], InvalidModelResponse)


# Check 2: the message role is assistant.
@pytest.mark.parametrize("role", ["user", "tool", "system", None, 1])
def test_check2_message_role_is_assistant(role: Any) -> None:
    document = envelope([call()])
    document["choices"][0]["message"]["role"] = role
    fails(document, InvalidModelResponse)


def test_check2_message_must_be_an_object() -> None:
    document = envelope([call()])
    document["choices"][0]["message"] = "hello"
    fails(document, InvalidModelResponse)


# Check 3: finish_reason is a supported primitive.
@pytest.mark.parametrize("reason", ["length", "content_filter", None, "function_call", "STOP"])
def test_check3_unsupported_finish_reasons_end_safely(reason: Any) -> None:
    fails(envelope([call()], finish_reason=reason), UnsupportedFinishReason)


@pytest.mark.parametrize("reason", [1, True, ["stop"], {"r": "stop"}])
def test_check3_non_string_finish_reason_is_an_invalid_response(reason: Any) -> None:
    fails(envelope([call()], finish_reason=reason), InvalidModelResponse)


def test_check3_finish_reason_missing_is_unsupported() -> None:
    document = envelope([call()])
    del document["choices"][0]["finish_reason"]
    fails(document, UnsupportedFinishReason)


# Check 4: each call has a bounded safe id and type function.
@pytest.mark.parametrize(
    "call_id",
    ["", "x" * 129, "call 1", "call/1", "call\n1", "ćall", None, 7],
    ids=["empty", "too-long", "space", "slash", "newline", "unicode", "null", "int"],
)
def test_check4_call_id_is_bounded_and_safe(call_id: Any) -> None:
    fails(envelope([call(call_id=call_id)]), InvalidToolCall)


def test_check4_longest_safe_id_is_accepted() -> None:
    call_id = "A-z_0.9:" * 16
    assert len(call_id) == 128
    assert parse_turn(envelope([call(call_id=call_id)]), set(), LIMITS).calls[0].id == call_id


@pytest.mark.parametrize("kind", ["tool", None, "Function"])
def test_check4_call_type_is_function(kind: Any) -> None:
    bad = call()
    bad["type"] = kind
    fails(envelope([bad]), InvalidToolCall)


@pytest.mark.parametrize("function", [None, "read", {"name": "read_repository_file"}])
def test_check4_call_has_function_name_and_arguments(function: Any) -> None:
    bad = call()
    bad["function"] = function
    fails(envelope([bad]), InvalidToolCall)


def test_check4_arguments_given_as_an_object_instead_of_a_string_are_rejected() -> None:
    bad = call()
    bad["function"]["arguments"] = {"path": "a.py"}
    fails(envelope([bad]), InvalidToolCall)


def test_check4_call_that_is_not_an_object_is_rejected() -> None:
    fails(envelope(["read_repository_file"]), InvalidToolCall)


# Check 5: call ids are unique in the turn and across previous turns.
def test_check5_duplicate_ids_within_a_turn() -> None:
    fails(envelope([call("same"), call("same")]), InvalidToolCall)


def test_check5_id_reused_from_a_previous_turn() -> None:
    fails(envelope([call("call_9")]), InvalidToolCall, seen={"call_9"})


# Check 6: the call count fits per-round and total limits.
def test_check6_per_round_limit() -> None:
    calls = [call(f"c{i}") for i in range(LIMITS.per_round + 1)]
    fails(envelope(calls), MaxToolCalls)


def test_check6_per_round_limit_is_inclusive() -> None:
    calls = [call(f"c{i}") for i in range(LIMITS.per_round)]
    assert len(parse_turn(envelope(calls), set(), LIMITS).calls) == LIMITS.per_round


def test_check6_total_limit_counts_previous_rounds() -> None:
    used = CallLimits(per_round=8, total=24, used=23)
    with pytest.raises(MaxToolCalls):
        parse_turn(envelope([call("a"), call("b")]), set(), used)
    assert len(parse_turn(envelope([call("a")]), set(), used).calls) == 1


# Check 7: every arguments value parses as a JSON object.
@pytest.mark.parametrize(
    "raw",
    [
        "",
        "{",
        "[]",
        '"path"',
        "null",
        '{"path": "a.py"} trailing',
        '{"path": "a.py", "path": "b.py"}',
        '{"path": NaN}',
        "[" * 100_000,
        '{"path": "\\ud800"}',
    ],
    ids=[
        "empty",
        "truncated",
        "array",
        "string",
        "null",
        "trailing",
        "duplicate-key",
        "nan",
        "deep",
        "lone-surrogate",
    ],
)
def test_check7_arguments_parse_as_one_strict_json_object(raw: str) -> None:
    fails(envelope([call(arguments=raw)]), InvalidToolCall)


def test_check7_oversized_arguments_are_rejected() -> None:
    huge = json.dumps({"path": "a" * 70_000})
    fails(envelope([call(arguments=huge)]), InvalidToolCall)


# Check 8: every name is one of the four constants.
@pytest.mark.parametrize("name", ["run_shell", "Read_Repository_File", "", "read_repository_file "])
def test_check8_name_is_one_of_the_four_tools(name: str) -> None:
    fails(envelope([call(name=name)]), InvalidToolCall)


# Check 9: every argument model rejects extra properties and wrong types.
@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("read_repository_file", {"path": "src/app.py", "command": "pytest"}),
        ("read_repository_file", {"path": "a.py", "start_line": "5"}),
        ("read_repository_file", {"path": "a.py", "start_line": True}),
        ("read_repository_file", {"path": "a.py", "start_line": 1.0}),
        ("read_repository_file", {"path": 5}),
        ("read_repository_file", {}),
        ("list_repository_files", {"limit": 201}),
        ("list_repository_files", {"cursor": 3}),
        ("search_repository", {"query": ""}),
        ("search_repository", {"query": "x" * 513}),
        ("inspect_git_diff", {"paths": "src"}),
        ("inspect_git_diff", {"max_bytes": 131073}),
    ],
)
def test_check9_argument_models_reject_extra_properties_and_wrong_types(
    name: str, arguments: dict[str, Any]
) -> None:
    fails(envelope([call(name=name, arguments=arguments)]), InvalidToolCall)


def test_round_atomic_one_invalid_call_fails_the_whole_round() -> None:
    good = call("good")
    bad = call("bad", arguments={"path": "a.py", "command": "rm -rf /"})
    fails(envelope([good, bad]), InvalidToolCall)


def test_tool_calls_finish_without_calls_is_an_invalid_tool_call() -> None:
    fails(envelope(None), InvalidToolCall)
    fails(envelope([]), InvalidToolCall)


# Stop turns: the envelope part of the stop-turn checks (the rest is in test_final_review).
def test_stop_turn_with_native_calls_is_invalid() -> None:
    fails(envelope([call()], finish_reason="stop", content="{}"), InvalidModelResponse)


def test_stop_turn_passes_content_through() -> None:
    turn = parse_turn(envelope(None, finish_reason="stop", content='{"a":1}'), set(), LIMITS)
    assert turn.finish_reason == "stop"
    assert turn.content == '{"a":1}'
    assert turn.calls == []


def test_non_string_content_is_invalid() -> None:
    fails(envelope(None, finish_reason="stop", content={"summary": "x"}), InvalidModelResponse)


@pytest.mark.parametrize(
    "usage",
    ["many", {"prompt_tokens": -1}, {"total_tokens": "12"}, {"completion_tokens": True}],
)
def test_malformed_usage_is_an_invalid_response(usage: Any) -> None:
    document = envelope([call()])
    document["usage"] = usage
    fails(document, InvalidModelResponse)


def test_missing_usage_counts_as_zero() -> None:
    document = envelope([call()])
    del document["usage"]
    assert parse_turn(document, set(), LIMITS).usage.total_tokens == 0


def test_provider_labels_are_bounded_and_must_be_strings() -> None:
    document = envelope([call()])
    document["id"] = "x" * 10_000
    document["model"] = {"name": "m"}
    turn = parse_turn(document, set(), LIMITS)
    assert turn.request_id is not None
    assert len(turn.request_id) == 256
    assert turn.model is None


# --- numbers JSON has no value for ------------- -----------------------------------------


@pytest.mark.parametrize("number", ["1e999", "-1e999", "1E400"])
def test_an_out_of_range_number_never_becomes_infinity(number: str) -> None:
    # json.loads would give float("inf"), and the next request's body could not be encoded.
    with pytest.raises(StrictJSONError):
        loads_strict(f'{{"role": "assistant", "x": {number}}}')


def test_an_infinite_number_in_tool_arguments_is_an_invalid_tool_call() -> None:
    fails(envelope([call(arguments='{"path": "a.py", "start_line": 1e999}')]), InvalidToolCall)


# --- ScriptedModel: the in-process ModelClient itself ---------------------------------------


def test_scripted_model_fails_assert_complete_when_an_answer_is_left_or_missing() -> None:
    left = ScriptedModel(scripted_stop("{}"))
    with pytest.raises(AssertionError, match="never requested"):
        left.assert_complete()
    starved = ScriptedModel()
    with pytest.raises(InvalidModelResponse):
        asyncio.run(starved.complete([], [], deadline=0.0))
    with pytest.raises(AssertionError, match="after the script ran out"):
        starved.assert_complete()


def test_scripted_model_records_a_copy_of_each_request() -> None:
    model = ScriptedModel(scripted_stop("{}"))
    messages: list[dict[str, Any]] = [{"role": "user", "content": "a"}]
    turn = asyncio.run(model.complete(messages, [], deadline=1.0))
    messages.append({"role": "user", "content": "b"})
    assert model.requests[0].messages == [{"role": "user", "content": "a"}]
    assert turn.finish_reason == "stop"
    model.assert_complete()
