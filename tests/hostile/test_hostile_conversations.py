"""A hostile provider, in process: generated conversations and every catalogued break.

The invariant, whatever the provider sends: a review ends with a validated final review or
a contract termination reason (a `ReviewError` with the contract's code), never any other
exception; and no tool runs in a round that holds any invalid call. Hypothesis builds whole
conversations, valid rounds then one ending (a valid or broken final review, one subtly
invalid call, a broken envelope, an unsupported finish reason, one call too many, or nothing:
max_rounds). The provider is an in-process `ProviderClient` stand-in, so hundreds of reviews
run quickly; tool executions are recorded per round and compared with what the oracle allows.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pr_review_api.errors import ReviewError
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.jsonutil import loads_strict
from pr_review_api.llm.envelope import turn_from_envelope
from pr_review_api.llm.openai_chat import ProviderClient
from pr_review_api.llm.turn import Turn
from pr_review_api.loop import engine as engine_module
from pr_review_api.loop import workspace
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.model import FinalReview, ReviewResult
from pr_review_api.tools import TOOLS, ToolArguments, ToolOutcome, execute_tool
from tests import builders
from tests.hostile.provider_support import (
    COMMON,
    CONTRACT_CODES,
    DEFAULT_RUN,
    FILES,
    MAX_ROUNDS,
    PER_ROUND,
    TOTAL,
    _prepared_local,
    review_settings,
)
from tests.hostile.support import FIGURES

LINES = {path: text.count("\n") for path, text in FILES.items()}


PATHS = (
    "",
    "src",
    "docs",
    *FILES,
    "links/out",
    "links/app",
    "../x",
    "/etc/passwd",
    ".git/config",
    "missing.txt",
    "src/app.py/x",
    "src\\app.py",
)


TOOL_NAMES = [tool["function"]["name"] for tool in TOOLS]


# Listing runs in memory; the other three start git. Weighting keeps examples fast.
WEIGHTED_TOOLS = [TOOL_NAMES[0], TOOL_NAMES[0], TOOL_NAMES[0], *TOOL_NAMES]
ID_ALPHABET = "ABCXYZabcxyz0189_.:-"


# --- Generation ---------------------------------------------------------------------------


@dataclass
class Round:
    """One provider turn and what the controller must do with it."""

    envelope: dict[str, Any]
    executes: list[str] = field(default_factory=list)
    """Tool names this round runs (valid tool rounds only)."""
    ends: str | None = None
    """"final_review" or the termination code this round ends the review with."""
    label: str = "valid"


@dataclass
class Conversation:
    rounds: list[Round]

    @property
    def expected(self) -> str:
        return self.rounds[-1].ends or "max_rounds"


def paths() -> st.SearchStrategy[str]:
    return st.sampled_from(PATHS) | st.text(max_size=12)


def valid_arguments(tool: str) -> st.SearchStrategy[dict[str, Any]]:
    if tool == "list_repository_files":
        return st.fixed_dictionaries(
            {},
            optional={
                "path": paths(),
                "limit": st.integers(1, 200),
                "cursor": st.none() | paths(),
            },
        )
    if tool == "read_repository_file":
        return st.fixed_dictionaries(
            {"path": paths()},
            optional={
                "start_line": st.integers(1, 10**12),
                "end_line": st.none() | st.integers(1, 10**12),
            },
        )
    if tool == "search_repository":
        return st.fixed_dictionaries(
            {
                "query": st.sampled_from(["needle", "validate", "line 1", ".*"])
                | st.text(min_size=1, max_size=40)
            },
            optional={"path": paths(), "limit": st.integers(1, 100)},
        )
    return st.fixed_dictionaries(
        {},
        optional={
            "paths": st.lists(paths(), max_size=5),
            "max_bytes": st.integers(1, 131072),
        },
    )


def encode_arguments(arguments: dict[str, Any], style: int) -> str:
    """Equivalent JSON spellings: compact, spaced, ASCII-escaped, keys reversed."""
    if style == 1:
        return json.dumps(arguments, indent=2)
    if style == 2:
        return json.dumps(arguments, ensure_ascii=True, separators=(" , ", " : "))
    if style == 3:
        return json.dumps(dict(reversed(list(arguments.items()))), ensure_ascii=False)
    return json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)


@st.composite
def valid_call(draw: st.DrawFn, call_id: str) -> dict[str, Any]:
    tool = draw(st.sampled_from(WEIGHTED_TOOLS))
    arguments = draw(valid_arguments(tool))
    call: dict[str, Any] = {
        "id": call_id,
        "type": "function",
        "function": {
            "name": tool,
            "arguments": encode_arguments(arguments, draw(st.integers(0, 3))),
        },
    }
    if draw(st.booleans()):
        call["index"] = 0  # some providers add fields the protocol does not need
    return call


# Schema-level breaks: the arguments stay a JSON object, but not one the tool accepts.
SCHEMA_BREAKS: dict[str, list[tuple[str, Any]]] = {
    "list_repository_files": [
        ("path", 5),
        ("path", None),
        ("path", ["src"]),
        ("limit", 0),
        ("limit", 201),
        ("limit", "5"),
        ("limit", 5.0),
        ("limit", True),
        ("limit", None),
        ("limit", 10**20),
        ("cursor", 3),
        ("command", "pytest"),
    ],
    "read_repository_file": [
        ("path", 7),
        ("path", None),
        ("start_line", 0),
        ("start_line", -3),
        ("start_line", "1"),
        ("start_line", 1.0),
        ("start_line", None),
        ("end_line", 0),
        ("end_line", 2.5),
        ("end_line", "9"),
        ("command", "pytest"),
        ("encoding", "latin-1"),
    ],
    "search_repository": [
        ("query", ""),
        ("query", "x" * 513),
        ("query", 5),
        ("query", None),
        ("query", ["needle"]),
        ("limit", 0),
        ("limit", 101),
        ("limit", False),
        ("regex", True),
    ],
    "inspect_git_diff": [
        ("paths", "src"),
        ("paths", [1]),
        ("paths", [None]),
        ("paths", ["a"] * 51),
        ("max_bytes", 0),
        ("max_bytes", 131073),
        ("max_bytes", "10"),
        ("max_bytes", 10.5),
        ("base", "HEAD~1"),
    ],
}


MISSING_REQUIRED = {"read_repository_file": {"start_line": 1}, "search_repository": {"path": "src"}}


BAD_ARGUMENT_TEXT = [
    "",
    "not json",
    "[]",
    '"path"',
    "null",
    "1",
    '{"path":"a","path":"b"}',
    '{"path": NaN}',
    '{"max_bytes": Infinity}',
    '{"path":"a"} trailing',
    "{'path': 'a'}",
    '{"path":"\\ud800"}',
    '{"path":"a"',
    '{"query":"' + "x" * 65_540 + '"}',
    "[" * 100_000,
]


BAD_IDS: list[Any] = ["", "x" * 129, "a b", "é", "a/b", "id\n", "id;rm", 5, None, True]


BAD_NAMES: list[Any] = [
    "run_shell",
    "List_repository_files",
    "read_repository_file ",
    "",
    "functions.read_repository_file",
    "read-repository-file",
    5,
    None,
]


def _break_call(call: dict[str, Any], how: int, seed: int) -> tuple[dict[str, Any], str]:
    """One subtly invalid call: its shape, id, name, JSON or schema is wrong."""
    call = copy.deepcopy(call)
    function = call["function"]
    tool = function["name"]
    if how == 0:
        key, value = SCHEMA_BREAKS[tool][seed % len(SCHEMA_BREAKS[tool])]
        arguments = json.loads(function["arguments"])
        arguments[key] = value
        function["arguments"] = json.dumps(arguments)
        return call, f"schema:{key}={value!r:.20}"
    if how == 1 and tool in MISSING_REQUIRED:
        function["arguments"] = json.dumps(MISSING_REQUIRED[tool])
        return call, "schema:missing-required"
    if how == 2:
        function["arguments"] = BAD_ARGUMENT_TEXT[seed % len(BAD_ARGUMENT_TEXT)]
        return call, f"json:{function['arguments'][:20]!r}"
    if how == 3:
        call["id"] = BAD_IDS[seed % len(BAD_IDS)]
        return call, f"id:{call['id']!r:.20}"
    if how == 4:
        function["name"] = BAD_NAMES[seed % len(BAD_NAMES)]
        return call, f"name:{function['name']!r}"
    shapes: list[Callable[[dict[str, Any]], Any]] = [
        lambda c: c.pop("id"),
        lambda c: c.pop("type"),
        lambda c: c.update(type="tool"),
        lambda c: c.update(type="Function"),
        lambda c: c.pop("function"),
        lambda c: c.update(function=None),
        lambda c: c.update(function="read_repository_file"),
        lambda c: c["function"].pop("arguments"),
        lambda c: c["function"].update(arguments={"path": "a"}),
        lambda c: c["function"].update(arguments=None),
        lambda c: c["function"].pop("name"),
    ]
    shapes[seed % len(shapes)](call)
    return call, f"shape:{seed % len(shapes)}"


def _message_of(envelope: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = envelope["choices"][0]["message"]
    return message


# Envelope-level breaks: (label, mutate, termination reason).
ENVELOPE_BREAKS: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    ("no-choices", lambda e: e.pop("choices"), "invalid_model_response"),
    ("empty-choices", lambda e: e.update(choices=[]), "invalid_model_response"),
    (
        "two-choices",
        lambda e: e["choices"].append(copy.deepcopy(e["choices"][0])),
        "invalid_model_response",
    ),
    ("choices-object", lambda e: e.update(choices=e["choices"][0]), "invalid_model_response"),
    ("choice-string", lambda e: e.update(choices=["x"]), "invalid_model_response"),
    ("index-1", lambda e: e["choices"][0].update(index=1), "invalid_model_response"),
    ("index-str", lambda e: e["choices"][0].update(index="0"), "invalid_model_response"),
    ("index-bool", lambda e: e["choices"][0].update(index=False), "invalid_model_response"),
    ("index-float", lambda e: e["choices"][0].update(index=0.0), "invalid_model_response"),
    ("index-missing", lambda e: e["choices"][0].pop("index"), "invalid_model_response"),
    ("no-message", lambda e: e["choices"][0].pop("message"), "invalid_model_response"),
    ("message-list", lambda e: e["choices"][0].update(message=[]), "invalid_model_response"),
    ("role-user", lambda e: _message_of(e).update(role="user"), "invalid_model_response"),
    ("role-tool", lambda e: _message_of(e).update(role="tool"), "invalid_model_response"),
    ("role-case", lambda e: _message_of(e).update(role="Assistant"), "invalid_model_response"),
    ("role-missing", lambda e: _message_of(e).pop("role"), "invalid_model_response"),
    ("content-int", lambda e: _message_of(e).update(content=5), "invalid_model_response"),
    (
        "content-list",
        lambda e: _message_of(e).update(content=[{"type": "text"}]),
        "invalid_model_response",
    ),
    ("finish-int", lambda e: e["choices"][0].update(finish_reason=1), "invalid_model_response"),
    (
        "finish-list",
        lambda e: e["choices"][0].update(finish_reason=["stop"]),
        "invalid_model_response",
    ),
    ("usage-string", lambda e: e.update(usage="lots"), "invalid_model_response"),
    ("usage-negative", lambda e: e.update(usage={"prompt_tokens": -1}), "invalid_model_response"),
    ("usage-str", lambda e: e.update(usage={"total_tokens": "5"}), "invalid_model_response"),
    ("usage-float", lambda e: e.update(usage={"completion_tokens": 1.5}), "invalid_model_response"),
    ("usage-bool", lambda e: e.update(usage={"prompt_tokens": True}), "invalid_model_response"),
]


UNSUPPORTED_FINISH = [
    "length",
    "content_filter",
    None,
    "",
    "STOP",
    "tool_call",
    "function_call",
    "stop ",
]


# Harmless differences every round may carry.
VARIATIONS: list[Callable[[dict[str, Any]], Any]] = [
    lambda e: e.update(system_fingerprint="fp_1", created=1, object="chat.completion"),
    lambda e: e.update(usage=None),
    lambda e: e.pop("usage"),
    lambda e: e.update(usage={"prompt_tokens": None, "extra_tokens": 3}),
    lambda e: e.update(id=5, model=["m"]),
    lambda e: e.update(id="x" * 5000),
    lambda e: _message_of(e).update(refusal=None, reasoning_content="thinking"),
    lambda e: e["choices"][0].update(logprobs=None),
]


# A finding's prose, one text in every field ("t" unless drawn).
PROSE = ("title", "explanation", "evidence", "recommendation")
finding = partial(builders.finding, severity="medium", **dict.fromkeys(PROSE, "t"))


@st.composite
def valid_final(draw: st.DrawFn) -> dict[str, Any]:
    findings = []
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from([*FILES, "links/app", "./src//app.py"]))
        lines = LINES["src/app.py" if "app" in path else path]
        line = draw(st.none() | st.integers(1, lines))
        prose = dict.fromkeys(PROSE, draw(st.text(max_size=30)))
        findings.append(finding(path=path, line=line, **prose))
    notes = draw(st.lists(st.text(max_size=30), max_size=3))
    return {"summary": draw(st.text(max_size=60)), "findings": findings, "notes": notes}


FINAL_BREAKS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("extra-field", lambda r: r.update(verdict="approve")),
    ("no-notes", lambda r: r.pop("notes")),
    ("summary-int", lambda r: r.update(summary=5)),
    ("findings-101", lambda r: r.update(findings=[finding(path="README.md", line=1)] * 101)),
    ("notes-101", lambda r: r.update(notes=["n"] * 101)),
    ("text-8193", lambda r: r.update(summary="s" * 8193)),
    ("text-multibyte", lambda r: r.update(summary="é" * 4097)),
    (
        "severity",
        lambda r: r.update(findings=[{**finding(path="README.md", line=1), "severity": "urgent"}]),
    ),
    ("line-0", lambda r: r.update(findings=[finding(path="README.md", line=0)])),
    ("line-str", lambda r: r.update(findings=[finding(path="README.md", line="1")])),
    ("line-float", lambda r: r.update(findings=[finding(path="README.md", line=1.0)])),
    ("line-past-end", lambda r: r.update(findings=[finding(path="README.md", line=3)])),
    ("path-parent", lambda r: r.update(findings=[finding(path="../x", line=None)])),
    ("path-absolute", lambda r: r.update(findings=[finding(path="/etc/passwd", line=None)])),
    ("path-missing", lambda r: r.update(findings=[finding(path="nope.py", line=None)])),
    ("path-directory", lambda r: r.update(findings=[finding(path="src", line=None)])),
    ("path-git", lambda r: r.update(findings=[finding(path=".git/config", line=None)])),
    ("path-link-out", lambda r: r.update(findings=[finding(path="links/out", line=None)])),
    (
        "finding-extra",
        lambda r: r.update(findings=[{**finding(path="README.md", line=1), "cwe": 79}]),
    ),
]


FINAL_TEXT_BREAKS = [
    None,
    "",
    "   ",
    "not json",
    "[]",
    '"review"',
    '{"summary":"a","summary":"b","findings":[],"notes":[]}',
    '{"summary":NaN,"findings":[],"notes":[]}',
    '```json\n{"summary":"s","findings":[],"notes":[]}\n```',
    '{"summary":"s","findings":[],"notes":[]} and more',
]


def _envelope(message: dict[str, Any], finish_reason: Any, round_number: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{round_number}",
        "model": "deepseek-v4-flash",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


@st.composite
def conversations(draw: st.DrawFn) -> Conversation:  # noqa: C901, PLR0912  (one strategy drawing every kind of round)
    rounds: list[Round] = []
    used = 0
    serial = 0

    def next_id() -> str:
        nonlocal serial
        serial += 1
        suffix = draw(st.text(alphabet=ID_ALPHABET, max_size=40))
        return f"c{serial}{suffix}"[:128]

    def tool_round(count: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        calls = [draw(valid_call(next_id())) for _ in range(count)]
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": calls}
        if draw(st.booleans()):
            message["content"] = draw(st.text(max_size=20))
        return _envelope(message, "tool_calls", len(rounds) + 1), calls

    for _ in range(draw(st.integers(0, MAX_ROUNDS))):
        if used == TOTAL:
            break
        envelope, calls = tool_round(draw(st.integers(1, min(PER_ROUND, TOTAL - used))))
        used += len(calls)
        if draw(st.integers(0, 3)) == 0:
            draw(st.sampled_from(VARIATIONS))(envelope)
        rounds.append(Round(envelope, [c["function"]["name"] for c in calls]))
    if len(rounds) == MAX_ROUNDS:
        return Conversation(rounds)  # the provider never stops: max_rounds

    ending = draw(
        st.sampled_from(
            ["final", "final", "broken-final", "broken-call", "envelope", "finish", "count"]
        )
    )
    number = len(rounds) + 1
    if ending in ("final", "broken-final"):
        document = draw(valid_final())
        content: Any = json.dumps(document, ensure_ascii=draw(st.booleans()))
        ends, label = "final_review", "final"
        if ending == "broken-final":
            ends = "invalid_model_response"
            if draw(st.booleans()):
                label, breaker = draw(st.sampled_from(FINAL_BREAKS))
                breaker(document)
                content = json.dumps(document)
            else:
                content = draw(st.sampled_from(FINAL_TEXT_BREAKS))
                label = f"final-text:{content!r:.20}"
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if draw(st.booleans()):
            message["tool_calls"] = draw(st.sampled_from([None, []]))
        envelope = _envelope(message, "stop", number)
        if ends == "final_review" and draw(st.integers(0, 3)) == 0:
            draw(st.sampled_from(VARIATIONS))(envelope)
        rounds.append(Round(envelope, ends=ends, label=label))
    elif ending == "broken-call":
        envelope, calls = tool_round(draw(st.integers(1, min(PER_ROUND, max(TOTAL - used, 1)))))
        if used + len(calls) > TOTAL:
            rounds.append(Round(envelope, ends="max_tool_calls", label="count-total"))
            return Conversation(rounds)
        index = draw(st.integers(0, len(calls) - 1))
        how = draw(st.integers(0, 6))
        if how == 6:  # a repeated id, in this round or from an earlier one
            earlier = [c["id"] for r in rounds for c in _message_of(r.envelope)["tool_calls"]]
            pool = earlier + [c["id"] for i, c in enumerate(calls) if i != index]
            if pool:
                calls[index]["id"] = draw(st.sampled_from(pool))
                rounds.append(Round(envelope, ends="invalid_tool_call", label="id-repeated"))
                return Conversation(rounds)
            how = 0
        calls[index], label = _break_call(calls[index], how, draw(st.integers(0, 10**6)))
        rounds.append(Round(envelope, ends="invalid_tool_call", label=label))
    elif ending == "envelope":
        if draw(st.booleans()):
            envelope, _ = tool_round(draw(st.integers(1, min(PER_ROUND, max(TOTAL - used, 1)))))
        else:
            envelope = _envelope(
                {"role": "assistant", "content": '{"summary":"s","findings":[],"notes":[]}'},
                "stop",
                number,
            )
        if used == TOTAL and envelope["choices"][0]["finish_reason"] == "tool_calls":
            envelope = _envelope({"role": "assistant", "content": "x"}, "stop", number)
        label, breaker, ends = draw(st.sampled_from(ENVELOPE_BREAKS))
        breaker(envelope)
        rounds.append(Round(envelope, ends=ends, label=f"envelope:{label}"))
    elif ending == "finish":
        reason = draw(st.sampled_from(UNSUPPORTED_FINISH))
        if draw(st.booleans()):
            envelope, _ = tool_round(1)
            envelope["choices"][0]["finish_reason"] = reason
        else:
            envelope = _envelope({"role": "assistant", "content": "partial"}, reason, number)
        rounds.append(Round(envelope, ends="unsupported_finish_reason", label=f"finish:{reason!r}"))
    else:
        shape = draw(st.sampled_from(["per-round", "total", "none", "empty", "not-list"]))
        if shape in ("none", "empty", "not-list"):
            envelope, _ = tool_round(1)
            value: Any = {"none": None, "empty": [], "not-list": {"id": "x"}}[shape]
            _message_of(envelope)["tool_calls"] = value
            rounds.append(Round(envelope, ends="invalid_tool_call", label=f"calls:{shape}"))
        else:
            count = PER_ROUND + 1 if shape == "per-round" else TOTAL - used + 1
            if count > PER_ROUND:
                count = PER_ROUND + 1
            envelope, _ = tool_round(count)
            rounds.append(Round(envelope, ends="max_tool_calls", label=f"count:{shape}"))
    return Conversation(rounds)


# --- The in-process provider --------------------------------------------------------------


class ConversationProvider(ProviderClient):
    """Serves a generated conversation in process; records what the loop sent back."""

    def __init__(self, conversation: Conversation) -> None:  # no HTTP client is needed
        self.rounds = conversation.rounds
        self.served = 0
        self.requests: list[list[dict[str, Any]]] = []

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, deadline: float
    ) -> Turn:
        assert tools == TOOLS
        assert self.served < len(self.rounds), "the loop asked past the end of the script"
        self.requests.append(copy.deepcopy(messages))
        envelope = copy.deepcopy(self.rounds[self.served].envelope)
        self.served += 1
        return turn_from_envelope(envelope)

    async def aclose(self) -> None:
        return None


@dataclass
class Outcome:
    result: ReviewResult | None
    error: ReviewError | None
    executed: list[tuple[int, str]]

    @property
    def code(self) -> str:
        return "final_review" if self.result is not None else str(self.error and self.error.code)


def run_conversation(
    conversation: Conversation, target: LocalTarget, runner: asyncio.Runner
) -> tuple[Outcome, ConversationProvider]:
    provider = ConversationProvider(conversation)
    executed: list[tuple[int, str]] = []
    real = execute_tool

    def recording(
        repo: PinnedRepository, name: str, arguments: ToolArguments, **options: Any
    ) -> ToolOutcome:
        executed.append((provider.served, name))
        return real(repo, name, arguments, **options)

    result = error = None
    with (
        mock.patch.object(engine_module, "execute_tool", recording),
        mock.patch.object(workspace, "prepare_local", _prepared_local),
    ):
        try:
            result = runner.run(
                run_review(target, review_settings(), ReviewOptions(model=provider))
            )
        except ReviewError as exc:  # anything else fails the property
            error = exc
    return Outcome(result, error, executed), provider


def check_conversation(
    conversation: Conversation, target: LocalTarget, runner: asyncio.Runner
) -> Outcome:
    outcome, provider = run_conversation(conversation, target, runner)
    rounds = conversation.rounds
    label = rounds[-1].label
    assert outcome.code == conversation.expected, f"{label}: {outcome.code}"
    assert outcome.code in CONTRACT_CODES | {"final_review"}
    assert provider.served == len(rounds), label
    # No tool ran in the round that ended the review; valid rounds ran exactly their calls.
    for number, round_ in enumerate(rounds, start=1):
        ran = sorted(name for served, name in outcome.executed if served == number)
        expected = sorted(round_.executes) if round_.ends is None else []
        assert ran == expected, f"round {number} ({round_.label}) ran {ran}"
    # Each valid round came back as the assistant message as received, then results in order.
    for number, round_ in enumerate(rounds[:-1], start=1):
        sent = provider.requests[number]
        calls = _message_of(round_.envelope)["tool_calls"]
        assert sent[-len(calls) - 1] == _message_of(round_.envelope)
        for call, message in zip(calls, sent[-len(calls) :], strict=True):
            assert set(message) == {"role", "tool_call_id", "content"}
            assert (message["role"], message["tool_call_id"]) == ("tool", call["id"])
            assert isinstance(loads_strict(message["content"])["ok"], bool)
    if outcome.result is not None:
        review = outcome.result.review
        FinalReview.model_validate_json(review.model_dump_json())
        repository = PinnedRepository.open(target.repo / ".git", target.base, target.head)
        for item in review.findings:
            repository.resolve_file(item.path)
        assert outcome.result.rounds == len(rounds)
        assert outcome.result.tool_calls == sum(len(r.executes) for r in rounds)
    FIGURES["envelopes generated"] += len(rounds)
    FIGURES[f"conversations ending {outcome.code}"] += 1
    return outcome


FULL_RUN = settings(COMMON, max_examples=2500)


@DEFAULT_RUN
@given(conversation=conversations())
def test_generated_conversations_end_in_a_review_or_a_contract_reason(
    widget: LocalTarget, runner: asyncio.Runner, conversation: Conversation
) -> None:
    check_conversation(conversation, widget, runner)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@FULL_RUN
@given(conversation=conversations())
def test_generated_conversations_at_full_size(
    widget: LocalTarget, runner: asyncio.Runner, conversation: Conversation
) -> None:
    check_conversation(conversation, widget, runner)


def _one_round(envelope: dict[str, Any], ends: str, label: str) -> Conversation:
    return Conversation([Round(envelope, ends=ends, label=label)])


def _single_call_turn(call: dict[str, Any]) -> dict[str, Any]:
    return _envelope({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls", 1)


VALID_CALL = {
    "id": "call_ok",
    "type": "function",
    "function": {"name": "read_repository_file", "arguments": '{"path":"README.md"}'},
}


def _calls_turn(count: int, first: int, number: int) -> dict[str, Any]:
    calls = [{**VALID_CALL, "id": f"call_{first + index}"} for index in range(count)]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    return _envelope(message, "tool_calls", number)


def count_breaks() -> Iterator[tuple[str, Conversation]]:
    """One call more than a round may make; one more than the review may make in total."""
    over = _calls_turn(PER_ROUND + 1, 0, 1)
    yield "count:per-round", _one_round(over, "max_tool_calls", "count:per-round")
    rounds: list[Round] = []
    used = 0
    while used + PER_ROUND <= TOTAL:
        turn = _calls_turn(PER_ROUND, used, len(rounds) + 1)
        rounds.append(Round(turn, ["read_repository_file"] * PER_ROUND))
        used += PER_ROUND
    last = _calls_turn(TOTAL - used + 1, used, len(rounds) + 1)
    rounds.append(Round(last, ends="max_tool_calls", label="count:total"))
    yield "count:total", Conversation(rounds)


def every_single_break() -> Iterator[tuple[str, Conversation]]:
    """Each catalogued break once, deterministically, beside a valid call it must not let run."""
    yield from count_breaks()
    for tool, breaks in SCHEMA_BREAKS.items():
        base = {
            **VALID_CALL,
            "function": {
                "name": tool,
                "arguments": json.dumps(
                    {"query": "needle"}
                    if tool == "search_repository"
                    else {"path": "README.md"}
                    if tool == "read_repository_file"
                    else {}
                ),
            },
        }
        for seed in range(len(breaks)):
            broken, label = _break_call(base, 0, seed)
            yield label, _pair(broken, label)
    for how, catalogue in ((2, BAD_ARGUMENT_TEXT), (3, BAD_IDS), (4, BAD_NAMES), (5, range(11))):
        for seed in range(len(catalogue)):
            broken, label = _break_call(VALID_CALL, how, seed)
            yield label, _pair(broken, label)
    for label, breaker, ends in ENVELOPE_BREAKS:
        envelope = _single_call_turn(copy.deepcopy(VALID_CALL))
        breaker(envelope)
        yield label, _one_round(envelope, ends, label)
    for reason in UNSUPPORTED_FINISH:
        envelope = _single_call_turn(copy.deepcopy(VALID_CALL))
        envelope["choices"][0]["finish_reason"] = reason
        yield f"finish:{reason!r}", _one_round(envelope, "unsupported_finish_reason", "finish")
    for label, final_breaker in FINAL_BREAKS:
        document: dict[str, Any] = {"summary": "s", "findings": [], "notes": []}
        final_breaker(document)
        envelope = _envelope({"role": "assistant", "content": json.dumps(document)}, "stop", 1)
        yield label, _one_round(envelope, "invalid_model_response", label)
    at_every_bound = {
        "summary": "s" * 8192,
        "findings": [finding(path="README.md", line=2, **dict.fromkeys(PROSE, "é" * 4096))] * 100,
        "notes": ["n" * 8192] * 100,
    }
    envelope = _envelope({"role": "assistant", "content": json.dumps(at_every_bound)}, "stop", 1)
    yield "final-at-every-bound", _one_round(envelope, "final_review", "final-at-every-bound")
    for text in FINAL_TEXT_BREAKS:
        envelope = _envelope({"role": "assistant", "content": text}, "stop", 1)
        yield f"final:{text!r:.20}", _one_round(envelope, "invalid_model_response", "final-text")


def _pair(broken: dict[str, Any], label: str) -> Conversation:
    good = copy.deepcopy(VALID_CALL)
    calls = [good, broken] if good.get("id") != broken.get("id") else [broken]
    envelope = _envelope(
        {"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls", 1
    )
    return _one_round(envelope, "invalid_tool_call", label)


def test_every_catalogued_break_stops_the_review_before_any_tool_runs(
    widget: LocalTarget, runner: asyncio.Runner
) -> None:
    tried = 0
    for _label, conversation in every_single_break():
        check_conversation(conversation, widget, runner)  # nothing ran in the ending round
        tried += 1
    assert tried > 140
