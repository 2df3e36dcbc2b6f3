"""The fields of a JSON document a forge sent (a webhook delivery), read strictly: a value of
another type than the field's, or missing where required, is `InvalidRequest` with the
caller's own sentence (`malformed`), so a hostile delivery gets a contract error, never a 500.
Every forge's delivery reader uses these; the sentences and limits are the forge's."""

from __future__ import annotations

from typing import Any, TypeVar

from pr_review_api.errors import InvalidRequest

_T = TypeVar("_T")


def json_object(value: object, malformed: str) -> dict[str, Any]:
    """`value` when it is a JSON object."""
    if not isinstance(value, dict):
        raise InvalidRequest(malformed)
    return value


def optional_field(holder: dict[str, Any], name: str, kind: type[_T], malformed: str) -> _T | None:
    """`holder[name]` when present and not null; `InvalidRequest` when of another type."""
    value = holder.get(name)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise InvalidRequest(malformed)
    return value


def required_field(holder: dict[str, Any], name: str, kind: type[_T], malformed: str) -> _T:
    """`holder[name]`, present, not null and of its type."""
    value = optional_field(holder, name, kind, malformed)
    if value is None:
        raise InvalidRequest(malformed)
    return value


def positive_int(value: object, malformed: str, most: int) -> int:
    """`value` when it is an integer (not a boolean) from 1 to `most`."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= most:
        raise InvalidRequest(malformed)
    return value
