"""The one hardened way to run git.

Every git process pr-review starts goes through `run_git` or `stream_git`: an argument vector
(never a shell), an environment built from scratch (no system or global config, no terminal
prompt, no LFS smudge, literal pathspecs) and configuration given through git's
`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` environment, which outranks any
repository config and never shows in a process listing. Secrets such as a GitHub token are
passed the same way (see `GitConfig.secret`), so they never reach an argument list, a config
file or a log.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

SHA_PATTERN = re.compile(r"^[0-9a-f]{40}$")

# Settings that make reading a hostile repository inert. They are applied to every
# invocation, and outrank the repository's own .git/config.
HARDENING_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("core.quotePath", "false"),
    ("core.attributesFile", os.devnull),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    ("credential.helper", ""),
    ("diff.external", ""),
    ("color.ui", "false"),
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("transfer.fsckObjects", "true"),
    ("fetch.fsckObjects", "true"),
    ("protocol.allow", "never"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("uploadpack.packObjectsHook", ""),
    ("safe.bareRepository", "all"),
)

DEFAULT_TIMEOUT_SECONDS = 600.0


class GitError(Exception):
    """A git process failed. Its stderr stays here and is never shown to users."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: bytes) -> None:
        # The message names only the git subcommand: arguments may hold paths.
        subcommand = next((a for a in args if not a.startswith("-") and a != "git"), "git")
        super().__init__(f"git {subcommand} exited with status {returncode}")
        self.returncode = returncode
        self.stderr = stderr


@dataclass(frozen=True)
class GitConfig:
    """Extra configuration for one invocation; `secret` entries hold credentials."""

    values: tuple[tuple[str, str], ...] = ()
    secret: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    allowed_protocols: tuple[str, ...] = ()


def git_environment(config: GitConfig = GitConfig()) -> dict[str, str]:
    """An environment built from scratch for one git process."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "LANG": "C",
        "LC_ALL": "C",
        "HOME": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_LFS_SKIP_SMUDGE": "1",
        "GIT_LITERAL_PATHSPECS": "1",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_PROTOCOL_FROM_USER": "0",
        "GIT_ALLOW_PROTOCOL": ":".join(config.allowed_protocols) or "none",
    }
    entries = [*HARDENING_CONFIG]
    entries += [(f"protocol.{scheme}.allow", "always") for scheme in config.allowed_protocols]
    entries += [*config.values, *config.secret]
    env["GIT_CONFIG_COUNT"] = str(len(entries))
    for index, (key, value) in enumerate(entries):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def git_command(git_dir: Path | None, args: Sequence[str]) -> list[str]:
    """The argument vector for `git [--git-dir=DIR] ARGS`."""
    prefix = ["git"] if git_dir is None else ["git", f"--git-dir={git_dir}"]
    return [*prefix, *args]


def run_git(
    git_dir: Path | None,
    args: Sequence[str],
    *,
    config: GitConfig = GitConfig(),
    input_bytes: bytes | None = None,
    cwd: Path | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run git to completion and return its output."""
    argv = git_command(git_dir, args)
    completed = subprocess.run(
        argv,
        input=input_bytes,
        capture_output=True,
        env=git_environment(config),
        cwd=cwd if cwd is not None else (git_dir or Path.cwd()),
        timeout=timeout,
        check=False,
    )
    if check and completed.returncode != 0:
        raise GitError(argv, completed.returncode, completed.stderr)
    return completed


@contextmanager
def stream_git(
    git_dir: Path,
    args: Sequence[str],
    *,
    config: GitConfig = GitConfig(),
    extra_env: Mapping[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """Start git with stdout as a pipe the caller reads as far as it needs.

    Leaving the block kills the process if it is still running, so a caller that has read
    enough (a capped diff, a search at its match limit) never waits for the rest.
    """
    env = git_environment(config)
    if extra_env:
        env.update(extra_env)
    process = subprocess.Popen(
        git_command(git_dir, args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=git_dir,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        assert process.stdout is not None
        process.stdout.close()
        process.wait()


def check_exit(process: subprocess.Popen[bytes], ok: tuple[int, ...] = (0,)) -> None:
    """After reading a `stream_git` process's output to the end, raise if git failed.

    A git that dies mid-stream (a corrupt object, say) only ends its output early; without
    this check a diff or a search would pass off the part it read as the whole answer.
    """
    returncode = process.wait()
    if returncode not in ok:
        argv = [str(arg) for arg in process.args] if isinstance(process.args, list) else []
        while "-c" in argv:  # `-c key=value` pairs are no subcommand for the message
            del argv[argv.index("-c") : argv.index("-c") + 2]
        raise GitError(argv, returncode, b"")


def is_sha(value: object) -> bool:
    """Whether `value` is a full, lower-case hexadecimal SHA-1 object name."""
    return isinstance(value, str) and SHA_PATTERN.fullmatch(value) is not None


GIT_FAILURES: tuple[type[Exception], ...] = (GitError, OSError, subprocess.TimeoutExpired)
"""What reading a pinned repository may raise besides a `ToolError`: a git process that
failed, could not start, or outlived its timeout."""
