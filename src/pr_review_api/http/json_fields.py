"""The fields of a JSON document a forge sent (a webhook delivery), read strictly: a value of
another type than the field's, or missing where required, is `InvalidRequest` with the
caller's own sentence (`malformed`), so a hostile delivery gets a contract error, never a 500.
Every forge's delivery reader uses these; the sentences and limits are the forge's."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from pr_review_api.errors import InvalidPullRequestUrl, InvalidRequest
from pr_review_api.settings import Settings

_T = TypeVar("_T")
_SHA = re.compile(r"[0-9a-f]{40}", re.ASCII)  # a commit's full SHA-1, as every forge sends it


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


def sha_field(holder: dict[str, Any], name: str, malformed: str) -> str | None:
    """`holder[name]` when present and not null: a commit's full SHA-1 in lower-case hex."""
    value = optional_field(holder, name, str, malformed)
    if value is not None and _SHA.fullmatch(value) is None:
        raise InvalidRequest(malformed)
    return value


def parsed_url(
    parse: Callable[[str, Settings], _T], url: str, settings: Settings, malformed: str
) -> _T:
    """What the forge's `parse` reads in the URL a delivery's fields made; a URL it refuses
    (`InvalidPullRequestUrl`) makes the delivery `InvalidRequest`."""
    try:
        return parse(url, settings)
    except InvalidPullRequestUrl:
        raise InvalidRequest(malformed) from None
