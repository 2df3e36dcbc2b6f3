"""The `tools` value: the seed's four schemas, verbatim and in order (specification §6)."""

from __future__ import annotations

import json

import pytest

from pr_review_api.tools import (
    TOOLS,
    TOOLS_BY_NAME,
)
from tests.tools.support import (
    TOOL_NAMES,
)

# The seed's "The four schemas sent to the model", pasted verbatim: it is the specification.
SEED_TOOLS_JSON = """
[
  {
    "type": "function",
    "function": {
      "name": "list_repository_files",
      "description": "List repository-relative files in deterministic lexical order.",
      "parameters": {
        "type": "object",
        "properties": {
          "path": {
            "type": "string",
            "description": "Repository-relative directory; empty means root.",
            "default": ""
          },
          "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": 200,
            "default": 100
          },
          "cursor": {
            "type": ["string", "null"],
            "description": "Last path returned by the preceding page.",
            "default": null
          }
        },
        "required": [],
        "additionalProperties": false
      }
    }
  },
  {
    "type": "function",
    "function": {
      "name": "read_repository_file",
      "description": "Read at most 400 numbered lines from a repository-relative text file.",
      "parameters": {
        "type": "object",
        "properties": {
          "path": {"type": "string"},
          "start_line": {"type": "integer", "minimum": 1, "default": 1},
          "end_line": {"type": ["integer", "null"], "minimum": 1}
        },
        "required": ["path"],
        "additionalProperties": false
      }
    }
  },
  {
    "type": "function",
    "function": {
      "name": "search_repository",
      "description": "Find case-sensitive literal text in bounded repository source files.",
      "parameters": {
        "type": "object",
        "properties": {
          "query": {"type": "string", "minLength": 1, "maxLength": 512},
          "path": {"type": "string", "default": ""},
          "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 50}
        },
        "required": ["query"],
        "additionalProperties": false
      }
    }
  },
  {
    "type": "function",
    "function": {
      "name": "inspect_git_diff",
      "description": "Inspect the immutable base-to-head Git diff, optionally narrowed to paths.",
      "parameters": {
        "type": "object",
        "properties": {
          "paths": {
            "type": "array",
            "items": {"type": "string"},
            "maxItems": 50,
            "default": []
          },
          "max_bytes": {
            "type": "integer",
            "minimum": 1,
            "maximum": 131072,
            "default": 65536
          }
        },
        "required": [],
        "additionalProperties": false
      }
    }
  }
]
"""


# --- the four schemas -----------------------------------------------------------------------


def test_tools_serialize_exactly_as_the_seed_prints_them() -> None:
    seed = json.loads(SEED_TOOLS_JSON)
    assert seed == TOOLS
    assert json.dumps(TOOLS) == json.dumps(seed)  # key order included


def test_tools_are_offered_in_the_order_list_read_search_diff() -> None:
    assert [tool["function"]["name"] for tool in TOOLS] == TOOL_NAMES
    assert list(TOOLS_BY_NAME) == TOOL_NAMES


def test_tools_json_is_the_serialized_tools_value() -> None:
    # `pr-review schema tools` prints json.dumps(TOOLS, indent=2) (tests/cli/test_cli.py).
    assert json.loads(json.dumps(TOOLS, indent=2)) == json.loads(SEED_TOOLS_JSON)


@pytest.mark.parametrize("index", range(4))
def test_each_argument_model_mirrors_its_schema(index: int) -> None:
    function = TOOLS[index]["function"]
    model = TOOLS_BY_NAME[function["name"]].arguments
    parameters = function["parameters"]
    assert set(model.model_fields) == set(parameters["properties"])
    required = {name for name, field in model.model_fields.items() if field.is_required()}
    assert required == set(parameters["required"])
    assert model.model_config.get("extra") == "forbid"
