"""pr-review: review GitHub pull requests, GitLab merge requests and local git revisions with
a model through validated, read-only tools."""

__version__ = "0.1.0"
