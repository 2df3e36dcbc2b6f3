"""The JSON document: exactly what the HTTP API answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pr_review_api.jsonutil import dumps_compact


def render_json(document: Mapping[str, Any]) -> str:
    """A response document exactly as the HTTP API serializes it (compact, UTF-8 kept)."""
    return dumps_compact(document)
