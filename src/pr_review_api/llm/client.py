"""The seam between the review loop and a model: `ModelClient.complete()` returns a `Turn`.

The loop knows nothing of HTTP or of any provider's envelope. `openai_chat.ProviderClient` is
the OpenAI-compatible implementation; `testing.ScriptedModel` is an in-process one for tests.
"""

from __future__ import annotations

from typing import Any, Protocol

from pr_review_api.llm.turn import Turn


class ModelClient(Protocol):
    """Sends one conversation to a model and returns its next turn."""

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, deadline: float
    ) -> Turn:
        """The model's next turn, finished by `deadline` (a loop.time() value).

        Raises only contract errors (`ReviewError` subclasses): a provider failure, the
        envelope checks' termination reasons, or `ReviewTimeout` when the deadline passes.
        """
        ...
