"""The `tools` value sent to the provider: the seed's four schemas, verbatim and in order.

This is the source of truth for what the model is offered; it is sent exactly as written
(`list_repository_files`, `read_repository_file`, `search_repository`, `inspect_git_diff`),
and `pr-review schema tools` prints it. The argument models in `arguments.py` mirror it.
"""

from __future__ import annotations

from typing import Any

TOOLS: list[dict[str, Any]] = [
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
                        "default": "",
                    },
                    "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 100},
                    "cursor": {
                        "type": ["string", "null"],
                        "description": "Last path returned by the preceding page.",
                        "default": None,
                    },
                },
                "required": [],
                "additionalProperties": False,
            },
        },
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
                    "end_line": {"type": ["integer", "null"], "minimum": 1},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
        },
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
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 50},
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "inspect_git_diff",
            "description": (
                "Inspect the immutable base-to-head Git diff, optionally narrowed to paths."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "paths": {
                        "type": "array",
                        "items": {"type": "string"},
                        "maxItems": 50,
                        "default": [],
                    },
                    "max_bytes": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 131072,
                        "default": 65536,
                    },
                },
                "required": [],
                "additionalProperties": False,
            },
        },
    },
]
