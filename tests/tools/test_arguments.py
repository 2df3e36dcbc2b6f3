"""The strict argument models: no extra fields, no coercion, the schema's ranges and defaults."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from pr_review_api.tools import (
    DiffArguments,
    ListFilesArguments,
    ReadFileArguments,
    SearchArguments,
    ToolArguments,
)

# --- argument models ------------------------------------------------------------------------

MODELS: dict[str, type[ToolArguments]] = {
    "list": ListFilesArguments,
    "read": ReadFileArguments,
    "search": SearchArguments,
    "diff": DiffArguments,
}
MINIMAL: dict[str, dict[str, Any]] = {
    "list": {},
    "read": {"path": "src/app.py"},
    "search": {"query": "needle"},
    "diff": {},
}


def test_seed_extra_property_example_is_rejected() -> None:
    with pytest.raises(ValidationError):
        ReadFileArguments.model_validate({"path": "src/app.py", "command": "pytest"})


@pytest.mark.parametrize("tool", list(MODELS))
def test_extra_properties_are_rejected_by_every_model(tool: str) -> None:
    with pytest.raises(ValidationError):
        MODELS[tool].model_validate({**MINIMAL[tool], "command": "pytest"})


WRONG_TYPES = [
    ("list", "limit", "5"),
    ("list", "limit", True),
    ("list", "limit", 5.0),
    ("list", "limit", None),
    ("list", "path", 5),
    ("list", "path", None),
    ("list", "path", True),
    ("list", "cursor", 5),
    ("list", "cursor", False),
    ("list", "cursor", ["a"]),
    ("read", "path", None),
    ("read", "path", 5),
    ("read", "path", ["src/app.py"]),
    ("read", "start_line", "5"),
    ("read", "start_line", True),
    ("read", "start_line", 5.0),
    ("read", "start_line", None),
    ("read", "end_line", "5"),
    ("read", "end_line", True),
    ("read", "end_line", 5.0),
    ("search", "query", None),
    ("search", "query", 5),
    ("search", "query", True),
    ("search", "path", None),
    ("search", "limit", "5"),
    ("search", "limit", True),
    ("search", "limit", 5.0),
    ("search", "limit", None),
    ("diff", "paths", "src/app.py"),
    ("diff", "paths", [5]),
    ("diff", "paths", [None]),
    ("diff", "paths", None),
    ("diff", "paths", {"a": "b"}),
    ("diff", "max_bytes", "5"),
    ("diff", "max_bytes", True),
    ("diff", "max_bytes", 5.0),
    ("diff", "max_bytes", None),
]


@pytest.mark.parametrize(("tool", "field", "value"), WRONG_TYPES)
def test_wrong_types_are_rejected_without_coercion(tool: str, field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        MODELS[tool].model_validate({**MINIMAL[tool], field: value})


OUT_OF_RANGE = [
    ("list", "limit", 0),
    ("list", "limit", 201),
    ("list", "limit", -1),
    ("read", "start_line", 0),
    ("read", "start_line", -3),
    ("read", "end_line", 0),
    ("search", "query", ""),
    ("search", "query", "q" * 513),
    ("search", "limit", 0),
    ("search", "limit", 101),
    ("diff", "max_bytes", 0),
    ("diff", "max_bytes", 131073),
    ("diff", "paths", ["a.txt"] * 51),
]


@pytest.mark.parametrize(("tool", "field", "value"), OUT_OF_RANGE)
def test_out_of_range_values_are_rejected(tool: str, field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        MODELS[tool].model_validate({**MINIMAL[tool], field: value})


IN_RANGE_BOUNDARIES = [
    ("list", "limit", 1),
    ("list", "limit", 200),
    ("list", "cursor", None),
    ("read", "start_line", 1),
    ("read", "end_line", 1),
    ("read", "end_line", None),
    ("search", "query", "q"),
    ("search", "query", "q" * 512),
    ("search", "limit", 1),
    ("search", "limit", 100),
    ("diff", "max_bytes", 1),
    ("diff", "max_bytes", 131072),
    ("diff", "paths", ["a.txt"] * 50),
]


@pytest.mark.parametrize(("tool", "field", "value"), IN_RANGE_BOUNDARIES)
def test_boundary_values_are_accepted(tool: str, field: str, value: object) -> None:
    validated = MODELS[tool].model_validate({**MINIMAL[tool], field: value})
    assert getattr(validated, field) == value


@pytest.mark.parametrize("tool", ["read", "search"])
def test_required_arguments_are_required(tool: str) -> None:
    with pytest.raises(ValidationError):
        MODELS[tool].model_validate({})


def test_defaults_are_the_schema_defaults() -> None:
    assert ListFilesArguments.model_validate({}).model_dump() == {
        "path": "",
        "limit": 100,
        "cursor": None,
    }
    assert ReadFileArguments.model_validate({"path": "a"}).model_dump() == {
        "path": "a",
        "start_line": 1,
        "end_line": None,
    }
    assert SearchArguments.model_validate({"query": "q"}).model_dump() == {
        "query": "q",
        "path": "",
        "limit": 50,
    }
    assert DiffArguments.model_validate({}).model_dump() == {"paths": [], "max_bytes": 65536}
