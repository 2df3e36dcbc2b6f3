"""Run commands inside a mounted container image's root file system, as its user.

`tests/test_containerfile.py` starts this script with `unshare --mount --pid --net --fork
--mount-proc`, so everything it starts lives in namespaces of its own: a private loopback (the
image's health check can ask port 8000 without meeting another process's), mounts that vanish
with it, and a PID namespace whose processes the kernel kills when this script, its first
process, exits (an embedded PostgreSQL included). It prints one JSON object on stdout.

The spec (a JSON file, the only argument): `root`, `user` ("uid:gid"), `workdir`, `env` (a
list of "NAME=value"), `commands` (argument lists to run one after the other), and optionally
`serve`: the argument list that starts the service, `healthcheck` (the image's own check, an
argument list) and `port` (the one to GET /healthz on).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HEALTH_DEADLINE_SECONDS = 120
STOP_DEADLINE_SECONDS = 60


def prepare(root: Path) -> None:
    """Loopback up; the host's devices, a private /dev/shm and this namespace's /proc."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    subprocess.run(["mount", "--rbind", "/dev", str(root / "dev")], check=True)
    # PostgreSQL's shared memory lands here: private, so nothing is left in the host's.
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(root / "dev" / "shm")], check=True)
    subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")], check=True)


def in_image(spec: dict[str, Any], argv: list[str]) -> list[str]:
    """`argv` run as the image's user, in its working folder, with only its environment."""
    uid, gid = spec["user"].split(":")
    return [
        "chroot",
        f"--userspec={uid}:{gid}",
        f"--groups={gid}",
        spec["root"],
        "/usr/bin/env",
        "-i",
        "-C",
        spec["workdir"],
        *spec["env"],
        *argv,
    ]


def run_commands(spec: dict[str, Any]) -> list[dict[str, Any]]:
    results = []
    for argv in spec["commands"]:
        done = subprocess.run(
            in_image(spec, argv), check=False, capture_output=True, text=True, timeout=120
        )
        results.append(
            {"argv": argv, "rc": done.returncode, "out": done.stdout, "err": done.stderr}
        )
    return results


def process_uid(pid: int) -> int:
    """The real uid of `pid` (chroot and env exec, so the service keeps the pid we started)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise RuntimeError("no Uid line")


def serve_and_check(spec: dict[str, Any]) -> dict[str, Any]:
    """Start the service, wait for the image's health check to pass, GET /healthz, stop it."""
    report: dict[str, Any] = {"healthy": False, "health_checks": 0}
    # The log goes to a file, not a pipe: a chatty service never blocks on it.
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(
            in_image(spec, spec["serve"]), stdout=log, stderr=subprocess.STDOUT
        )
        report["healthy"] = wait_healthy(spec, server, report)
        if report["healthy"]:
            report["uid"] = process_uid(server.pid)
            url = f"http://127.0.0.1:{spec['port']}/healthz"
            with urllib.request.urlopen(url, timeout=10) as response:
                report["status"] = response.status
                report["body"] = response.read().decode()
        server.terminate()  # SIGTERM, as `docker stop` sends
        try:
            report["exit_code"] = server.wait(timeout=STOP_DEADLINE_SECONDS)
        except subprocess.TimeoutExpired:
            report["exit_code"] = None  # the namespace's end kills it
        log.seek(0)
        report["log"] = log.read().decode(errors="replace")
    return report


def wait_healthy(
    spec: dict[str, Any], server: subprocess.Popen[bytes], report: dict[str, Any]
) -> bool:
    """Run the image's health check until it passes, the service exits or the deadline."""
    deadline = time.monotonic() + HEALTH_DEADLINE_SECONDS
    while time.monotonic() < deadline and server.poll() is None:
        report["health_checks"] += 1
        check = subprocess.run(
            in_image(spec, spec["healthcheck"]), check=False, capture_output=True, timeout=30
        )
        if check.returncode == 0:
            return True
        time.sleep(1)
    return False


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    prepare(Path(spec["root"]))
    result: dict[str, Any] = {"commands": run_commands(spec)}
    if spec.get("serve"):
        result["serve"] = serve_and_check(spec)
    sys.stdout.write(json.dumps(result))


if __name__ == "__main__":
    main()
