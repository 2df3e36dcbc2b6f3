"""Gitea and Forgejo pull requests (specification §19): URLs, REST v1, checkout, hooks."""
