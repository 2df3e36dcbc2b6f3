"""The four read-only repository tools: schemas, argument models, implementations, dispatch.

`schemas.TOOLS` is what the model is offered; `arguments` holds the strict models that
validate a call before it runs; one module per tool implements it over the pinned head
commit and returns the result documents of specification §7; `execute` dispatches a
validated call and maps git failures (the one git error edge of a review's reads).
"""

from pr_review_api.tools.arguments import (
    DiffArguments,
    ListFilesArguments,
    ReadFileArguments,
    SearchArguments,
    ToolArguments,
)
from pr_review_api.tools.diff import inspect_git_diff
from pr_review_api.tools.execute import (
    TOOLS_BY_NAME,
    Tool,
    ToolOutcome,
    execute_tool,
    map_git_errors,
)
from pr_review_api.tools.list_files import list_repository_files
from pr_review_api.tools.read_file import read_repository_file
from pr_review_api.tools.schemas import TOOLS
from pr_review_api.tools.search import search_repository

__all__ = [
    "TOOLS",
    "TOOLS_BY_NAME",
    "DiffArguments",
    "ListFilesArguments",
    "ReadFileArguments",
    "SearchArguments",
    "Tool",
    "ToolArguments",
    "ToolOutcome",
    "execute_tool",
    "inspect_git_diff",
    "list_repository_files",
    "map_git_errors",
    "read_repository_file",
    "search_repository",
]
