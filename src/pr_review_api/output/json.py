"""The JSON document: exactly what the HTTP API answers."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def render_json(document: Mapping[str, Any]) -> str:
    """A response document exactly as the HTTP API serializes it (compact, UTF-8 kept)."""
    return json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
