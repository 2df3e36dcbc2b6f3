"""The hostile-world suite: repositories, providers, secrets, git traps and load (SECURITY.md)."""
