"""The build context of deploy/Dockerfile, as the Docker engine itself makes it from
.dockerignore: a copy of the checkout with secrets and junk planted in it is built with a
`FROM scratch` Dockerfile that copies the whole context (scratch needs no pull), and the
image's files are what the context held. Nothing planted may be there; every file the server
reads and every source the real Dockerfile COPYs must be."""

from __future__ import annotations

import io
import os
import shlex
import shutil
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "deploy" / "Dockerfile"
PROBE = "FROM scratch\nCOPY . /ctx\n"
LEGACY_BUILDER = {"DOCKER_BUILDKIT": "0"}  # the CLI has no buildx here; both honour the same rules

# Read by the server from its program folder (Flask's templates and static, PROGRAM_DIR's
# agents, skills and demo), besides every Python package but the tests.
DATA_FOLDERS = ("agents", "demo", "skills", "static", "templates")
TOP_FILES = ("main.py", "web_server.py", "requirements.txt", "requirements.lock")
PLANTED = (
    ".env",
    ".env.local",
    "config.yaml",
    "web_token",
    "server.key",
    "data/web_token",
    "data/conversations/c1.json",
    "workspace/notes.md",
    ".venv-live/bin/python",
    ".venv/pyvenv.cfg",
    ".mypy_cache/3.11/cache.db",
    ".ruff_cache/CACHEDIR.TAG",
    ".pytest_cache/README.md",
    ".git/config",
    "node_modules/marked/package.json",
    "static/vendor/marked/marked.esm.js",
    "static/node_modules/x/index.js",
    "web/__pycache__/handlers.cpython-311.pyc",
    "web/.env",
    "web/.env.production",
    "modules/data/web_token",
    "demo/workspace/data/big.csv",
    "skills/own/config.yaml",
    "templates/cert.pem",
    "agents/deploy.key",
    "agents/.coder.yaml.swp",
    "static/.DS_Store",
    "core/agent.py~",
)


def docker_cli_or_skip() -> None:
    """Skip, saying why, unless the docker command and its engine answer."""
    if shutil.which("docker") is None:
        pytest.skip("no docker command here")
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        pytest.skip(f"no Docker engine answers here: {info.stderr.strip()[:200]}")


def tracked_files() -> list[str]:
    """The checkout's tracked files that exist in the working tree."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"the checkout's files are listed by git, which failed here: {exc}")
    names = listed.stdout.decode().split("\0")
    return [name for name in names if name and (REPO / name).is_file()]


def docker(*args: str, stdin: bytes | None = None) -> bytes:
    """The output of one docker command, which must succeed."""
    done = subprocess.run(
        ["docker", *args],
        input=stdin,
        capture_output=True,
        timeout=300,
        env=os.environ | LEGACY_BUILDER,
    )
    assert done.returncode == 0, f"docker {shlex.join(args)}: {done.stderr.decode()[-2000:]}"
    return done.stdout


def context_files(root: Path, work: Path) -> set[str]:
    """The files (relative paths) of the build context Docker makes of `root`."""
    probe = work / "probe.Dockerfile"
    probe.write_text(PROBE)
    label = f"workspace-agent-test.context={uuid.uuid4().hex}"  # an image of this run's own
    image = docker("build", "-q", "--label", label, "-f", str(probe), str(root)).decode().split()
    container = docker("create", image[-1], "none").decode().strip()
    try:
        archive = docker("cp", f"{container}:/ctx", "-")
    finally:
        docker("rm", container)
        docker("rmi", image[-1])
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {m.name.removeprefix("ctx/") for m in tar.getmembers() if m.isfile()}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout's tracked files with secrets and junk planted among them."""
    root = tmp_path_factory.mktemp("checkout")
    for name in [*tracked_files(), *PLANTED]:
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name in PLANTED:
            target.write_text("sk-planted-secret\n")
        else:
            shutil.copy2(REPO / name, target)
    return root


@pytest.fixture(scope="module")
def context(checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The build context the engine makes of the planted copy."""
    docker_cli_or_skip()
    return context_files(checkout, tmp_path_factory.mktemp("probe"))


def needed_files() -> set[str]:
    """What the server reads: the top files, the Python packages but the tests, the data
    folders (static without the vendored scripts the image builds itself)."""
    files = tracked_files()
    packages = {name.split("/")[0] for name in files if name.count("/") == 1}
    packages = {p for p in packages if (REPO / p / "__init__.py").is_file()} - {"tests"}
    folders = packages | set(DATA_FOLDERS)
    return {
        name
        for name in files
        if name in TOP_FILES
        or (name.split("/")[0] in folders and not name.startswith("static/vendor/"))
    }


def dockerfile_sources() -> list[str]:
    """The context paths deploy/Dockerfile's COPY instructions read (not those --from a stage)."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    sources: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if not words or words[0].upper() != "COPY":
            continue
        flags = [w for w in words[1:] if w.startswith("--")]
        if any(flag.startswith("--from=") for flag in flags):
            continue
        sources += [w for w in words[1:] if not w.startswith("--")][:-1]
    return sources


def test_planted_secrets_and_junk_stay_out(context: set[str]) -> None:
    leaked = sorted(name for name in PLANTED if name in context)
    assert not leaked, f"in the build context: {leaked}"


def test_everything_the_server_reads_is_in(context: set[str]) -> None:
    needed = needed_files()
    assert {
        "main.py",
        "web/handlers.py",
        "templates/index.html",
        "skills/code-review/SKILL.md",
    } <= needed
    missing = sorted(needed - context)
    assert not missing, f"left out of the build context: {missing}"


def test_nothing_but_what_the_server_reads(context: set[str]) -> None:
    extra = sorted(context - needed_files() - set(dockerfile_sources()))
    assert not extra, f"in the build context, not read by the server: {extra}"


def test_the_dockerfile_copies_what_the_context_holds(context: set[str]) -> None:
    sources = dockerfile_sources()
    assert {"requirements.lock", "package.json", "scripts/vendor.mjs", "static", "."} <= set(
        sources
    )
    for source in sources:
        prefix = "" if source == "." else source.rstrip("/") + "/"
        assert source in context or any(name.startswith(prefix) for name in context), source
