"""pr-review: review GitHub pull requests with a model through validated, read-only tools."""

__version__ = "0.1.0"
