"""Trace records: what each round asked for and what Python did, with bounded previews.

The trace explains a review; it is not an audit log. It never holds full tool content,
keys, credentials, headers, local paths or provider error bodies, and it is only returned
with a successful review.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from pr_review_api.settings import MAX_TRACE_PREVIEW_BYTES

MAX_TRACE_LABEL_CHARS = 256


class Usage(BaseModel):
    """Token counts, summed over rounds for a review."""

    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )


class TraceToolCall(BaseModel):
    """One executed tool call."""

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    arguments: dict[str, Any]
    ok: bool
    result_preview: str
    result_bytes: int
    truncated: bool
    duration_ms: int


class TraceTurn(BaseModel):
    """One provider round."""

    model_config = ConfigDict(extra="forbid")

    round: int
    provider_request_id: str | None
    provider_model: str | None
    finish_reason: str
    protocol_action: Literal["execute_tools", "final_review"]
    usage: Usage
    tool_calls: list[TraceToolCall]


def preview(text: str) -> str:
    """At most MAX_TRACE_PREVIEW_BYTES of UTF-8, cut on a character boundary."""
    encoded = text.encode("utf-8")
    if len(encoded) <= MAX_TRACE_PREVIEW_BYTES:
        return text
    return encoded[:MAX_TRACE_PREVIEW_BYTES].decode("utf-8", "ignore")


def label(value: object) -> str | None:
    """A provider-supplied identifier, bounded, or None when it is not a string."""
    if not isinstance(value, str):
        return None
    return value[:MAX_TRACE_LABEL_CHARS]
