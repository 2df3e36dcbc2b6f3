"""Checks on one provider turn and its tool calls, before anything runs.

`parse_turn` applies the seed's nine turn checks in order, to every call of the turn, and
returns either a stop turn (for final-review validation) or a list of fully validated calls.
Validation is round-atomic: one bad call fails the round, so no call of it ever executes.
"""

from __future__ import annotations

import re
from collections.abc import Set
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from pr_review_api.errors import (
    InvalidModelResponse,
    InvalidToolCall,
    MaxToolCalls,
    UnsupportedFinishReason,
)
from pr_review_api.jsonutil import StrictJSONError, loads_strict
from pr_review_api.model import Usage, label
from pr_review_api.settings import MAX_TOOL_ARGUMENTS_BYTES
from pr_review_api.tools import TOOLS_BY_NAME, ToolArguments

CALL_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
EXECUTABLE_FINISH_REASONS = ("tool_calls", "stop")
SAFE_TERMINATIONS = ("length", "content_filter")


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
class Turn:
    """One protocol-valid provider turn."""

    finish_reason: Literal["tool_calls", "stop"]
    message: dict[str, Any]  # kept exactly as received, to send back next round
    content: object
    calls: list[ToolCall]
    request_id: str | None
    model: str | None
    usage: Usage


def parse_turn(envelope: object, seen_ids: Set[str], limits: CallLimits) -> Turn:
    """Apply all nine turn checks; raise the termination reason of the first that fails."""
    if not isinstance(envelope, dict):
        raise InvalidModelResponse("The provider response is not a JSON object.")
    message = _single_choice_message(envelope)  # checks 1 and 2
    finish_reason = _finish_reason(envelope["choices"][0])  # check 3
    raw_calls = message.get("tool_calls")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise InvalidModelResponse("The assistant message content is not a string.")
    calls: list[ToolCall] = []
    if finish_reason == "stop":
        if raw_calls not in (None, []):
            raise InvalidModelResponse("The stop turn also asked for tool calls.")
    else:
        calls = _validated_calls(raw_calls, seen_ids, limits)  # checks 4 to 9
    return Turn(
        finish_reason="stop" if finish_reason == "stop" else "tool_calls",
        message=message,
        content=content,
        calls=calls,
        request_id=label(envelope.get("id")),
        model=label(envelope.get("model")),
        usage=_usage(envelope.get("usage")),
    )


def _single_choice_message(envelope: dict[str, Any]) -> dict[str, Any]:
    choices = envelope.get("choices")
    if not isinstance(choices, list) or len(choices) != 1:
        raise InvalidModelResponse("The provider response must have exactly one choice.")
    choice = choices[0]
    if not isinstance(choice, dict) or not _is_int(choice.get("index")) or choice["index"] != 0:
        raise InvalidModelResponse("The provider's only choice must have index 0.")
    message = choice.get("message")
    if not isinstance(message, dict) or message.get("role") != "assistant":
        raise InvalidModelResponse("The provider's message must have the assistant role.")
    return message


def _finish_reason(choice: dict[str, Any]) -> str:
    reason = choice.get("finish_reason")
    if reason in EXECUTABLE_FINISH_REASONS:
        return str(reason)
    if reason is None or isinstance(reason, str):
        # length, content_filter, null and anything unknown all end the review safely.
        raise UnsupportedFinishReason()
    raise InvalidModelResponse("The provider's finish_reason is not a string.")


def _usage(value: object) -> Usage:
    if value is None:
        return Usage()
    if not isinstance(value, dict):
        raise InvalidModelResponse("The provider's usage is not an object.")
    counts = {}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        count = value.get(key, 0)
        if count is None:
            count = 0
        if not _is_int(count) or count < 0:
            raise InvalidModelResponse("The provider's usage counts are not valid.")
        counts[key] = count
    return Usage(**counts)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
