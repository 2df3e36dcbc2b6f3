"""Checks on one model turn and its tool calls, before anything runs.

The model client has already applied the seed's turn checks 1 to 3 (the envelope:
`llm/envelope.py`). `check_turn` applies checks 4 to 9, in order, to every call of the turn
and returns either a stop turn (for final-review validation) or a list of fully validated
calls. Validation is round-atomic: one bad call fails the round, so no call of it ever executes.
"""

from __future__ import annotations

import re
from collections.abc import Set
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from pr_review_api.errors import InvalidModelResponse, InvalidToolCall, MaxToolCalls
from pr_review_api.jsonutil import StrictJSONError, loads_strict
from pr_review_api.llm.turn import Turn
from pr_review_api.model import Usage
from pr_review_api.settings import MAX_CALL_ID_CHARS, MAX_TOOL_ARGUMENTS_BYTES
from pr_review_api.tools import TOOLS_BY_NAME, ToolArguments

CALL_ID = re.compile(rf"^[A-Za-z0-9_.:-]{{1,{MAX_CALL_ID_CHARS}}}$")


@dataclass(frozen=True)
class CallLimits:
    """How many calls one round and the whole review may still make."""

    per_round: int
    total: int
    used: int


@dataclass(frozen=True)
class ToolCall:
    """A call that passed every check: safe to execute."""

    id: str
    name: str
    arguments: dict[str, Any]  # as the model sent them, for the trace
    validated: ToolArguments


@dataclass(frozen=True)
class CheckedTurn:
    """One protocol-valid model turn."""

    finish_reason: Literal["tool_calls", "stop"]
    message: dict[str, Any]  # kept exactly as received, to send back next round
    content: str | None
    calls: list[ToolCall]
    request_id: str | None
    model: str | None
    usage: Usage


def check_turn(turn: Turn, seen_ids: Set[str], limits: CallLimits) -> CheckedTurn:
    """Apply turn checks 4 to 9; raise the termination reason of the first that fails."""
    calls: list[ToolCall] = []
    if turn.finish_reason == "stop":
        if turn.tool_calls not in (None, []):
            raise InvalidModelResponse("The stop turn also asked for tool calls.")
    else:
        calls = _validated_calls(turn.tool_calls, seen_ids, limits)  # checks 4 to 9
    return CheckedTurn(
        finish_reason=turn.finish_reason,
        message=turn.message,
        content=turn.content,
        calls=calls,
        request_id=turn.request_id,
        model=turn.model,
        usage=turn.usage,
    )


def _validated_calls(raw_calls: object, seen_ids: Set[str], limits: CallLimits) -> list[ToolCall]:
    if not isinstance(raw_calls, list) or not raw_calls:
        raise InvalidToolCall("The turn finished for tool calls but contains none.")
    functions = [_call_shape(index, call) for index, call in enumerate(raw_calls, start=1)]
    ids = [call["id"] for call in raw_calls]
    if len(set(ids)) != len(ids) or any(call_id in seen_ids for call_id in ids):
        raise InvalidToolCall("A tool call id is repeated.")
    if len(raw_calls) > limits.per_round or limits.used + len(raw_calls) > limits.total:
        raise MaxToolCalls()
    parsed = [_arguments(index, fn) for index, fn in enumerate(functions, start=1)]
    for index, fn in enumerate(functions, start=1):
        if fn["name"] not in TOOLS_BY_NAME:
            raise InvalidToolCall(f"Tool call {index} names a tool that does not exist.")
    calls = []
    for index, (call_id, fn, arguments) in enumerate(zip(ids, functions, parsed, strict=True), 1):
        model = TOOLS_BY_NAME[fn["name"]].arguments
        try:
            validated = model.model_validate(arguments)
        except ValidationError:
            raise InvalidToolCall(
                f"Tool call {index} has arguments that do not match its schema."
            ) from None
        calls.append(ToolCall(call_id, fn["name"], arguments, validated))
    return calls


def _call_shape(index: int, call: object) -> dict[str, Any]:
    """Check 4: a bounded safe id, type function, a string name and string arguments."""
    if not isinstance(call, dict):
        raise InvalidToolCall(f"Tool call {index} is not an object.")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not CALL_ID.fullmatch(call_id):
        raise InvalidToolCall(f"Tool call {index} has a missing or unsafe id.")
    if call.get("type") != "function":
        raise InvalidToolCall(f"Tool call {index} is not of type function.")
    function = call.get("function")
    if (
        not isinstance(function, dict)
        or not isinstance(function.get("name"), str)
        or not isinstance(function.get("arguments"), str)
    ):
        raise InvalidToolCall(f"Tool call {index} has no function name and arguments string.")
    return function


def _arguments(index: int, function: dict[str, Any]) -> dict[str, Any]:
    """Check 7: the arguments string parses as one strict JSON object."""
    text: str = function["arguments"]
    if len(text.encode("utf-8", "surrogatepass")) > MAX_TOOL_ARGUMENTS_BYTES:
        raise InvalidToolCall(f"Tool call {index} has arguments that are too long.")
    try:
        arguments = loads_strict(text)
    except StrictJSONError:
        raise InvalidToolCall(f"Tool call {index} has arguments that are not valid JSON.") from None
    if not isinstance(arguments, dict):
        raise InvalidToolCall(f"Tool call {index} has arguments that are not a JSON object.")
    return arguments
