"""What the hostile-provider tests share: a repository to review, its settings, the
in-process stand-in provider, and the oracle that checks how a conversation ended.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from hypothesis import HealthCheck, settings

from pr_review_api.loop import workspace
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.settings import Settings, load_settings
from tests.conftest import PROVIDER_KEY
from tests.fakes.provider_server import stop_turn, tool_call_turn

MAX_ROUNDS = 4
PER_ROUND = 3
TOTAL = 8


CONTRACT_CODES = frozenset(
    {
        "max_rounds",
        "max_tool_calls",
        "invalid_tool_call",
        "invalid_model_response",
        "upstream_response_too_large",
        "unsupported_finish_reason",
        "review_timeout",
        "opencode_authentication_failed",
        "opencode_rate_limited",
        "opencode_unavailable",
    }
)


FILES = {
    "src/app.py": "".join(f"line {n}: validate(name)\n" for n in range(1, 31)),
    "README.md": "# Demo\nneedle\n",
    "docs/guide.md": "one\ntwo\nthree\nfour\nfive\n",
}


def review_settings(base_url: str = "http://127.0.0.1:9/v1", **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "opencode_api_key": PROVIDER_KEY,
        "opencode_base_url": base_url,
        "review_max_rounds": MAX_ROUNDS,
        "review_max_tool_calls_per_round": PER_ROUND,
        "review_max_tool_calls": TOTAL,
        "review_timeout_seconds": 60,
        "opencode_max_retries": 0,  # a fault is one request; retries have their own tests
    }
    values.update(overrides)
    return load_settings(**values)


@functools.lru_cache(maxsize=4)
def prepared_once(target: LocalTarget) -> Any:
    """The loop is under test here, not the checkout: prepare each repository once."""
    return _real_prepare_local(target)


_real_prepare_local = workspace.prepare_local


def _prepared_local(target: LocalTarget, *_: object) -> Any:
    """`_prepare_local`'s stand-in: the review's store and work are not needed (nor kept)."""
    return prepared_once(target)


COMMON = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


DEFAULT_RUN = settings(COMMON, max_examples=150, derandomize=True)
FINAL_BODY = json.dumps(stop_turn({"summary": "fine", "findings": [], "notes": []})).encode()


TOOL_BODY = json.dumps(
    tool_call_turn([("r1", "read_repository_file", {"path": "README.md"})])
).encode()
