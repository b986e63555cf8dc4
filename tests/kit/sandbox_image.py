"""A small Docker image for the sandbox tests, built locally once (nothing can be pulled).

It holds the host's bash, a few coreutils and this Python (stdlib only), each with the
shared libraries `ldd` names, at their host paths; `python` is on PATH. The tag carries a
digest of what goes in, so a cached image is reused until the inputs change.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import pytest

REPOSITORY = "workspace-agent-sandbox-test"
BUILD_VERSION = "1"
SANDBOX_UID = 1000
TOOLS = (
    "bash", "sh", "cat", "cp", "dd", "du", "echo", "env", "false", "head", "id", "ls",
    "mkdir", "mv", "printf", "rm", "seq", "sleep", "stat", "tail", "touch", "true", "wc",
    "whoami", "yes",
)  # fmt: skip
SKIPPED_STDLIB = {
    "test", "site-packages", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3",
    "__pycache__",
}  # fmt: skip
ROOT_LINKS = ("bin", "lib", "lib64", "sbin")


def docker_client_or_skip() -> Any:
    """A docker client whose engine answers, or skip the test saying why."""
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:
        pytest.skip(f"no Docker engine answers here ({type(exc).__name__}: {exc})")
    return client


def build_test_image(client: Any) -> str:
    """The tag of the test image, built now unless an identical one exists."""
    tag = f"{REPOSITORY}:py{sys.version_info.major}{sys.version_info.minor}-{_digest()}"
    try:
        client.images.get(tag)
        return tag
    except Exception:
        pass
    if sys.platform != "linux" or shutil.which("ldd") is None:
        pytest.skip("the test image copies host binaries, which needs Linux with ldd")
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "rootfs.tar"
        _write_rootfs(archive)
        changes = [
            "ENV PATH=/usr/local/bin:/usr/bin:/bin",
            "ENV LANG=C.UTF-8",
            "WORKDIR /workspace",
            'CMD ["sleep", "infinity"]',
        ]
        repository, _, version = tag.partition(":")
        client.api.import_image_from_file(
            str(archive), repository=repository, tag=version, changes=changes
        )
    return tag


def _digest() -> str:
    parts = [BUILD_VERSION, sys.version, str(Path(sys.executable).resolve()), *TOOLS]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def _write_rootfs(archive: Path) -> None:
    python = Path(sys.executable).resolve()
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    binaries = [python, *(Path(p) for p in map(shutil.which, TOOLS) if p)]
    binaries += sorted((stdlib / "lib-dynload").glob("*.so"))
    binaries = [b for b in binaries if "_tkinter" not in b.name]
    with tarfile.open(archive, "w") as tar:
        builder = _RootFs(tar)
        builder.directories()
        for top in ROOT_LINKS:
            if os.path.islink(f"/{top}"):
                builder.symlink(top, os.readlink(f"/{top}"))
        for binary in binaries:
            builder.add(binary)
            for library in _shared_libraries(binary):
                builder.add(library)
        builder.add_tree(stdlib)
        for name in ("python", "python3"):
            builder.symlink(f"usr/local/bin/{name}", str(python))
        builder.text("etc/passwd", _passwd())
        builder.text("etc/group", f"root:x:0:\nsandbox:x:{SANDBOX_UID}:\n")


def _shared_libraries(binary: Path) -> list[Path]:
    done = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    found = []
    for line in done.stdout.splitlines():
        words = line.split()
        if "=>" in words and len(words) > words.index("=>") + 1:
            candidate = words[words.index("=>") + 1]
        else:
            candidate = words[0] if words else ""
        if candidate.startswith("/"):
            found.append(Path(candidate))
    return found


def _passwd() -> str:
    return (
        "root:x:0:0:root:/root:/bin/sh\n"
        f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:/home/sandbox:/bin/sh\n"
    )


class _RootFs:
    """Adds host files to the archive at their canonical paths, keeping symlink chains."""

    def __init__(self, tar: tarfile.TarFile) -> None:
        self.tar = tar
        self.added: set[str] = set()

    def add(self, path: Path) -> None:
        """Add a file (and every symlink leading to it) at its host path."""
        arcname = os.path.join(os.path.realpath(path.parent), path.name).lstrip("/")
        if arcname in self.added or not path.exists():
            return
        self.added.add(arcname)
        if path.is_symlink():
            target = os.readlink(path)
            self.symlink(arcname, target)
            self.add(path.parent / target if not os.path.isabs(target) else Path(target))
            return
        self.tar.add(str(path), arcname=arcname, recursive=False)

    def add_tree(self, root: Path) -> None:
        """Add a directory tree, leaving out the parts Python scripts do not need."""
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in SKIPPED_STDLIB]
            if Path(dirpath) == root:
                dirnames[:] = [d for d in dirnames if not d.startswith("config-")]
            for name in filenames:
                if not name.startswith("_tkinter"):
                    self.add(Path(dirpath, name))

    def symlink(self, arcname: str, target: str) -> None:
        """Add a symbolic link."""
        info = tarfile.TarInfo(arcname)
        info.type, info.linkname = tarfile.SYMTYPE, target
        self.tar.addfile(info)
        self.added.add(arcname)

    def directories(self) -> None:
        """The directories a container needs: /tmp, /workspace, a home, /root traversable."""
        for name, mode, uid in (
            ("tmp", 0o1777, 0),
            ("workspace", 0o755, 0),
            ("root", 0o755, 0),
            ("home/sandbox", 0o755, SANDBOX_UID),
        ):
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, mode, uid, uid
            self.tar.addfile(info)

    def text(self, arcname: str, content: str) -> None:
        """Add a small text file."""
        data = content.encode()
        info = tarfile.TarInfo(arcname)
        info.size, info.mode = len(data), 0o644
        self.tar.addfile(info, io.BytesIO(data))
