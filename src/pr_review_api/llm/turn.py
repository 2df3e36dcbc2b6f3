"""A provider-neutral model turn: what the loop needs from one answer, whatever the wire.

A model client (`llm/client.py`) returns a `Turn` after its envelope checks (the seed's checks
1 to 3: one choice, the assistant role, a supported finish reason). The loop applies checks 4
to 9 to `tool_calls`, which are kept as data: nothing in a turn has been validated as a call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pr_review_api.model import Usage

FinishReason = Literal["tool_calls", "stop"]


@dataclass(frozen=True)
class Turn:
    """One model answer that passed the envelope checks."""

    finish_reason: FinishReason
    content: str | None
    # The assistant message exactly as received, sent back unchanged in the next request.
    message: dict[str, Any]
    # The raw tool-call list as the model sent it (None when absent): data, not yet checked.
    tool_calls: object = None
    usage: Usage = field(default_factory=Usage)
    request_id: str | None = None
    model: str | None = None
