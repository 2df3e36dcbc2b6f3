"""The fields of a JSON document a forge sent (a webhook delivery), read strictly: a value of
another type than the field's, or missing where required, is `InvalidRequest` with the
forge's own sentence for that kind of delivery (`Fields.malformed`), so a hostile delivery gets
a contract error, never a 500. Every forge's delivery reader uses these; the sentences and
limits are the forge's."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pr_review_api.errors import InvalidPullRequestUrl, InvalidRequest
from pr_review_api.settings import Settings

_T = TypeVar("_T")
_SHA = re.compile(r"[0-9a-f]{40}", re.ASCII)  # a commit's full SHA-1, as every forge sends it


@dataclass(frozen=True)
class Fields:
    """The reader of one kind of delivery: whatever is amiss is `InvalidRequest(malformed)`,
    a fixed sentence (never the delivery's content)."""

    malformed: str

    def invalid(self) -> InvalidRequest:
        """The error a malformed delivery of this kind is."""
        return InvalidRequest(self.malformed)

    def json_object(self, value: object) -> dict[str, Any]:
        """`value` when it is a JSON object."""
        if not isinstance(value, dict):
            raise self.invalid()
        return value

    def optional(self, holder: dict[str, Any], name: str, kind: type[_T]) -> _T | None:
        """`holder[name]` when present and not null; invalid when of another type."""
        value = holder.get(name)
        if value is None:
            return None
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise self.invalid()
        return value

    def required(self, holder: dict[str, Any], name: str, kind: type[_T]) -> _T:
        """`holder[name]`, present, not null and of its type."""
        value = self.optional(holder, name, kind)
        if value is None:
            raise self.invalid()
        return value

    def positive_int(self, value: object, most: int) -> int:
        """`value` when it is an integer (not a boolean) from 1 to `most`."""
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= most:
            raise self.invalid()
        return value

    def sha(self, holder: dict[str, Any], name: str) -> str | None:
        """`holder[name]` when present and not null: a commit's full SHA-1 in lower-case hex."""
        value = self.optional(holder, name, str)
        if value is not None and _SHA.fullmatch(value) is None:
            raise self.invalid()
        return value

    def parsed(self, parse: Callable[[str, Settings], _T], url: str, settings: Settings) -> _T:
        """What the forge's `parse` reads in the URL the delivery's fields made; a URL it
        refuses (`InvalidPullRequestUrl`) is invalid."""
        try:
            return parse(url, settings)
        except InvalidPullRequestUrl:
            raise self.invalid() from None
