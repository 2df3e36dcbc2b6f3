"""The OpenAI chat-completions envelope: the seed's turn checks 1 to 3, and usage.

`turn_from_envelope` takes the provider's parsed JSON object and returns a provider-neutral
`Turn`, or raises the termination reason of the first check that fails:

  1. exactly one choice exists at index zero;
  2. the message role is assistant (and its content is a string or null);
  3. finish_reason is a supported primitive (`tool_calls` or `stop`; `length`,
     `content_filter`, null or another string end the review as unsupported).

Checks 4 to 9 (the calls themselves) belong to the loop (`loop/turn_checks.py`).
"""

from __future__ import annotations

from typing import Any

from pr_review_api.errors import InvalidModelResponse, UnsupportedFinishReason
from pr_review_api.llm.turn import FinishReason, Turn
from pr_review_api.model import Usage, label

EXECUTABLE_FINISH_REASONS: tuple[FinishReason, ...] = ("tool_calls", "stop")


def turn_from_envelope(envelope: object) -> Turn:
    """Apply checks 1 to 3 to a chat-completions response; the rest of the turn is data."""
    if not isinstance(envelope, dict):
        raise InvalidModelResponse("The provider response is not a JSON object.")
    message = _single_choice_message(envelope)  # checks 1 and 2
    finish_reason = _finish_reason(envelope["choices"][0])  # check 3
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise InvalidModelResponse("The assistant message content is not a string.")
    return Turn(
        finish_reason=finish_reason,
        content=content,
        message=message,
        tool_calls=message.get("tool_calls"),
        usage=_usage(envelope.get("usage")),
        request_id=label(envelope.get("id")),
        model=label(envelope.get("model")),
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


def _finish_reason(choice: dict[str, Any]) -> FinishReason:
    reason = choice.get("finish_reason")
    if reason == "tool_calls":
        return "tool_calls"
    if reason == "stop":
        return "stop"
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
