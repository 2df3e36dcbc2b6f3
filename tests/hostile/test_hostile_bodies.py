"""A hostile provider over real HTTP: raw response bytes, mutated (truncated, re-encoded,
deeply nested, NaN, duplicate keys, bad UTF-8...), served by the real scripted provider; each
review ends in a review or a contract reason.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pr_review_api.errors import ReviewError
from pr_review_api.llm.openai_chat import ProviderClient
from pr_review_api.loop import workspace
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.model import FinalReview
from tests.fakes.provider_server import (
    RecordedRequest,
    Reply,
    Scripted,
    ScriptedProvider,
    body_reply,
)
from tests.hostile.provider_support import (
    COMMON,
    CONTRACT_CODES,
    FINAL_BODY,
    TOOL_BODY,
    _prepared_local,
    review_settings,
)
from tests.hostile.support import FIGURES


def _nested(depth: int) -> bytes:
    return b'{"choices":' + b"[" * depth + b"]" * depth + b"}"


BODY_MUTATIONS: list[tuple[str, Callable[[bytes, int], tuple[bytes, dict[str, str]]]]] = [
    ("truncate", lambda b, n: (b[: n % len(b)], {})),
    ("insert-byte", lambda b, n: (b[: n % len(b)] + bytes([n % 256]) + b[n % len(b) :], {})),
    ("drop-byte", lambda b, n: (b[: n % len(b)] + b[n % len(b) + 1 :], {})),
    ("bom", lambda b, n: (b"\xef\xbb\xbf" + b, {})),
    ("trailing", lambda b, n: (b + b" {}", {})),
    ("nan", lambda b, n: (b.replace(b'"prompt_tokens":10', b'"prompt_tokens":NaN'), {})),
    ("infinity", lambda b, n: (b.replace(b'"prompt_tokens":10', b'"prompt_tokens":1e999'), {})),
    (
        "bigint",
        lambda b, n: (b.replace(b'"prompt_tokens":10', b'"prompt_tokens":' + b"9" * 5000), {}),
    ),
    ("duplicate", lambda b, n: (b.replace(b'{"id"', b'{"choices":[],"id"', 1), {})),
    ("bad-utf8", lambda b, n: (b.replace(b"fine", b"fi\xffne"), {})),
    ("surrogate", lambda b, n: (b.replace(b"fine", b"\\ud800"), {})),
    ("deep", lambda b, n: (_nested(50_000 + n % 50_000), {})),
    ("gzip", lambda b, n: (gzip.compress(b), {"Content-Encoding": "gzip"})),
    ("gzip-cut", lambda b, n: (gzip.compress(b)[: 10 + n % 40], {"Content-Encoding": "gzip"})),
    ("deflate", lambda b, n: (zlib.compress(b), {"Content-Encoding": "deflate"})),
    ("brotli-label", lambda b, n: (b, {"Content-Encoding": "br"})),
    ("text-plain", lambda b, n: (b, {"Content-Type": "text/plain"})),
    ("json-charset", lambda b, n: (b, {"Content-Type": "application/json; charset=utf-8"})),
    ("json-seq", lambda b, n: (b, {"Content-Type": "application/json-seq"})),
    ("array", lambda b, n: (b"[" + b + b"]", {})),
    ("empty", lambda b, n: (b"", {})),
    ("null", lambda b, n: (b"null", {})),
]


@pytest.fixture(scope="module")
def http_provider() -> Iterator[ScriptedProvider]:
    def fallback(request: RecordedRequest) -> Scripted:
        document: dict[str, Any] = json.loads(FINAL_BODY)
        return document  # a mutated body that asked for tools gets a final turn

    with ScriptedProvider(responder=fallback) as provider:
        yield provider


@pytest.fixture(scope="module")
def shared_client(
    http_provider: ScriptedProvider, runner: asyncio.Runner
) -> Iterator[ProviderClient]:
    """One pooled client for every example, as the HTTP service keeps one for every review."""
    client = ProviderClient(review_settings(http_provider.base_url))
    yield client
    runner.run(client.aclose())


def _serve_and_review(
    *,
    provider: ScriptedProvider,
    client: ProviderClient,
    runner: asyncio.Runner,
    target: LocalTarget,
    reply: Reply,
) -> str:
    provider.script(reply)
    try:
        with mock.patch.object(workspace, "prepare_local", _prepared_local):
            result = runner.run(
                run_review(target, review_settings(provider.base_url), ReviewOptions(model=client))
            )
    except ReviewError as exc:
        code = exc.code
    else:
        code = result.termination_reason
        FinalReview.model_validate_json(result.review.model_dump_json())
    assert code in CONTRACT_CODES | {"final_review"}, code
    return code


MutationCase = tuple[tuple[str, Callable[[bytes, int], tuple[bytes, dict[str, str]]]], bytes, int]


@settings(COMMON, max_examples=200, derandomize=True)
@given(
    case=st.tuples(
        st.sampled_from(BODY_MUTATIONS),
        st.sampled_from([FINAL_BODY, TOOL_BODY]),
        st.integers(0, 10**6),
    )
)
def test_mutated_bodies_over_http_end_in_a_review_or_a_contract_reason(
    http_provider: ScriptedProvider,
    shared_client: ProviderClient,
    runner: asyncio.Runner,
    widget: LocalTarget,
    case: MutationCase,
) -> None:
    mutation, body, position = case
    _name, mutate = mutation
    data, headers = mutate(body, position)
    reply = body_reply(data, headers=tuple({"Content-Type": "application/json", **headers}.items()))
    _serve_and_review(
        provider=http_provider, client=shared_client, runner=runner, target=widget, reply=reply
    )
    FIGURES["envelopes generated"] += 1
    FIGURES["mutated bodies served over HTTP"] += 1
