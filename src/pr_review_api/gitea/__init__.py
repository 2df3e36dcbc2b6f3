"""Gitea and Forgejo pull requests (CONTRACT section 19): URLs, REST v1, checkout, hooks."""
