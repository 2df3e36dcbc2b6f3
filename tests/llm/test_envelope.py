"""The ModelClient seam (llm/envelope.py): `complete()` returns a provider-neutral `Turn`."""

from __future__ import annotations

import asyncio

import pytest

from pr_review_api.llm.openai_chat import ProviderClient
from tests.fakes.provider_server import ScriptedProvider, tool_call_turn
from tests.llm.support import MESSAGES, TOOLS, settings_for

# --- the ModelClient seam: complete() returns a provider-neutral Turn ------------------------


@pytest.mark.anyio
async def test_complete_returns_a_neutral_turn_with_the_message_kept_as_received(
    scripted_provider: ScriptedProvider,
) -> None:
    reply = tool_call_turn([("call_1", "read_repository_file", {"path": "a.py"})])
    scripted_provider.script(reply)
    async with ProviderClient(settings_for(scripted_provider.base_url)) as client:
        deadline = asyncio.get_running_loop().time() + 10
        turn = await client.complete(MESSAGES, TOOLS, deadline=deadline)
    assert turn.finish_reason == "tool_calls"
    assert turn.message == reply["choices"][0]["message"]
    assert turn.tool_calls == reply["choices"][0]["message"]["tool_calls"]
    assert turn.request_id == reply["id"]
    assert turn.usage.total_tokens == reply["usage"]["total_tokens"]
