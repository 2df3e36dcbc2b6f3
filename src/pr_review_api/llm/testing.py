"""`ScriptedModel`: an in-process `ModelClient` that answers from a queue, for tests.

Deterministic and socket-free: each `complete()` pops the next scripted turn (or raises the
next scripted error) and records the request. `assert_complete()` fails when a scripted item
was never used or a request found the queue empty.

    model = ScriptedModel(tool_turn([("call_1", "read_repository_file", {"path": "a.py"})]),
                          stop_turn({"summary": "ok", "findings": [], "notes": []}))
    result = await run_review(target, settings, ReviewOptions(model=model))
    model.assert_complete()
"""

from __future__ import annotations

import copy
import json
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pr_review_api.errors import InvalidModelResponse, ReviewError
from pr_review_api.llm.turn import Turn
from pr_review_api.model import Usage

USAGE = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)


@dataclass(frozen=True)
class ScriptedRequest:
    """One `complete()` call as the model saw it (a deep copy, so later edits do not show)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    deadline: float


def tool_turn(
    calls: Sequence[tuple[str, str, Mapping[str, Any] | str]],
    *,
    content: str | None = None,
    usage: Usage = USAGE,
    request_id: str | None = "scripted",
) -> Turn:
    """A `tool_calls` turn; arguments given as a mapping are sent as compact JSON."""
    raw = [
        {
            "id": call_id,
            "type": "function",
            "function": {
                "name": name,
                "arguments": args if isinstance(args, str) else json.dumps(args),
            },
        }
        for call_id, name, args in calls
    ]
    message = {"role": "assistant", "content": content, "tool_calls": raw}
    return Turn("tool_calls", content, message, raw, usage, request_id, "scripted-model")


def stop_turn(
    content: str | Mapping[str, Any],
    *,
    usage: Usage = USAGE,
    request_id: str | None = "scripted",
) -> Turn:
    """A `stop` turn; a mapping is sent as its JSON text."""
    text = content if isinstance(content, str) else json.dumps(content)
    message = {"role": "assistant", "content": text}
    return Turn("stop", text, message, None, usage, request_id, "scripted-model")


class ScriptedModel:
    """A `ModelClient` that answers from a queue of turns and errors."""

    def __init__(self, *items: Turn | ReviewError) -> None:
        self._queue: deque[Turn | ReviewError] = deque(items)
        self.requests: list[ScriptedRequest] = []
        self._starved = 0

    def script(self, *items: Turn | ReviewError) -> None:
        """Queue more answers."""
        self._queue.extend(items)

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, deadline: float
    ) -> Turn:
        self.requests.append(
            ScriptedRequest(copy.deepcopy(messages), copy.deepcopy(tools), deadline)
        )
        if not self._queue:
            self._starved += 1
            raise InvalidModelResponse("The scripted model has no answer left.")
        item = self._queue.popleft()
        if isinstance(item, ReviewError):
            raise item
        return item

    def assert_complete(self) -> None:
        """Every scripted answer was used and no request found the queue empty."""
        assert not self._queue, f"{len(self._queue)} scripted answers were never requested"
        assert not self._starved, f"{self._starved} requests came after the script ran out"
