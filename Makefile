# The project's habits in one place. `make check` is exactly what CI runs (.ci/run);
# lint, typecheck and test are its steps one by one (tests/test_task_runner.py keeps
# them the same commands).
.PHONY: check lint typecheck test test-fast bench fmt

# Every bench script; `make bench BENCH_ARGS=--quick` runs each on a small repository in
# seconds, `make bench BENCH_ARGS="--repo kernel --runs 3"` as docs/performance.md does.
BENCH_SCRIPTS := search listing tools prepare loop concurrency oneshot workers queue syntax wide index partial affinity
BENCH_ARGS ?=

check:
	.ci/run

lint:
	uv run ruff check src tests bench
	uv run ruff format --check src tests bench
	uv run lint-imports

typecheck:
	uv run mypy

test:
	uv run pytest

# The inner loop: the unit level on every core (pytest-xdist), without tests/hostile,
# tests/jobs and the tests marked e2e.
test-fast:
	uv run pytest --fast

bench:
	set -e; for script in $(BENCH_SCRIPTS); do uv run python -m bench.$$script $(BENCH_ARGS); done

fmt:
	uv run ruff check --fix src tests bench
	uv run ruff format src tests bench
