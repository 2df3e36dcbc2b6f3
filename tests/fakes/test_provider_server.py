"""The scripted provider itself (tests/fakes/provider_server.py): what it encodes and checks."""

from __future__ import annotations

import asyncio

import pytest

from pr_review_api.errors import OpenCodeUnavailable
from tests.fakes.provider_server import Fault, ScriptedProvider, sized_document, tool_call_turn
from tests.llm.support import CAP, TURN, complete

# --- The fake itself ----------------------------------------------------------------------


def test_fake_tool_call_turn_encodes_dict_arguments_and_keeps_strings_as_is() -> None:
    turn = tool_call_turn([("a", "read_repository_file", {"path": "x"}), ("b", "f", "{bad")])
    calls = turn["choices"][0]["message"]["tool_calls"]
    assert [call["function"]["arguments"] for call in calls] == ['{"path":"x"}', "{bad"]
    assert turn["choices"][0]["finish_reason"] == "tool_calls"


def test_fake_sized_document_has_exactly_the_size_asked() -> None:
    assert len(sized_document(CAP + 1)) == CAP + 1
    assert len(Fault.oversized(1).body) == CAP + 1


def test_fake_assert_complete_reports_unconsumed_and_unscripted() -> None:
    with ScriptedProvider() as server:
        server.script(TURN)
        with pytest.raises(AssertionError, match="never requested"):
            server.assert_complete()
        asyncio.run(complete(server.base_url))
        server.assert_complete()
        with pytest.raises(OpenCodeUnavailable):
            asyncio.run(complete(server.base_url))
        with pytest.raises(AssertionError, match="unscripted request"):
            server.assert_complete()
