"""Review quality on a corpus (specification §13): cases, scoring, running, the report.

A corpus source (`eval/` in this repository) describes each case in a TOML file: the base files,
the edits that make the head, and the golden issues planted there. `build_corpus()` turns it into
git repositories and a `corpus.json`; `run_corpus()` reviews every case through `run_review()`
and `score()` compares findings with golden issues by path and line.
"""
