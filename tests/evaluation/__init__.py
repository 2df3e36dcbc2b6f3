"""Tests of the evaluation: the corpus itself, the scoring arithmetic, `pr-review eval`."""
