"""Strict JSON in and compact JSON out, for documents that cross a trust boundary."""

from __future__ import annotations

import json
import math
from typing import Any


class StrictJSONError(ValueError):
    """A document is not strict JSON (syntax, duplicate keys, NaN, or absurd nesting)."""


def _reject_constant(name: str) -> Any:
    raise StrictJSONError(f"non-standard constant {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        # 1e999 would become infinity, which no JSON document can carry on.
        raise StrictJSONError("number out of range")
    return value


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            # Two readers could disagree on which duplicate wins: refuse the ambiguity.
            raise StrictJSONError("duplicate key")
        result[key] = value
    return result


def loads_strict(text: str | bytes) -> Any:
    """Parse JSON, refusing duplicate keys, NaN/Infinity, lone surrogates and deep nesting."""
    try:
        value = json.loads(
            text,
            object_pairs_hook=_unique_object,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
        )
        # A lone surrogate ("\\ud800") parses but can never be encoded again as UTF-8.
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except StrictJSONError:
        raise
    except (ValueError, RecursionError) as exc:  # UnicodeError is a ValueError
        raise StrictJSONError("not valid JSON") from exc
    return value


def truncate_utf8(text: str, limit: int) -> str:
    """At most `limit` bytes of `text`'s UTF-8, cut on a character boundary."""
    encoded = text.encode("utf-8", "replace")  # "replace": a lone surrogate is no crash
    if len(encoded) <= limit:
        return text
    return encoded[:limit].decode("utf-8", "ignore")


def dumps_compact(value: Any) -> str:
    """Compact JSON (no spaces after separators), UTF-8 kept as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def compact_size(value: Any) -> int:
    """Bytes of `dumps_compact(value)` encoded as UTF-8."""
    return len(dumps_compact(value).encode("utf-8"))
