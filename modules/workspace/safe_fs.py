"""Workspace files reached only through directory fds held from the workspace root.

Every operation walks a workspace-relative path one component at a time, each step an
`openat` relative to a folder fd already held, so a folder swapped for a symlink between a
check and a use can never redirect it outside. Symlinks met on the way are followed the way
openat2's RESOLVE_BENEATH does: a relative target from the link's folder, an absolute one
only when it lies under the root, `..` never above the root, at most MAX_LINKS of them.
Only regular files are ever opened for reading, and never in a way that can block.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import shutil
import stat
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from modules.results import ToolError

MAX_LINKS = 40
_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_RETRIES = 3


class ReadOnlyWorkspace(ToolError):
    """A change refused because the workspace, or the folder or file changed, is read-only."""


class PathOutsideWorkspace(ToolError):
    """A path argument that is invalid or would reach outside the workspace."""


def kind_name(mode: int) -> str:
    """What a file of this mode is, in words ("a named pipe", "a folder", ...)."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


class NotRegular(ToolError):
    """A path that is a folder, pipe, socket or device where a regular file was needed."""

    def __init__(self, shown: str, mode: int) -> None:
        self.mode = mode
        if stat.S_ISDIR(mode):
            super().__init__(f"{shown} is a folder, not a file. Use list_files to see inside it.")
        else:
            super().__init__(f"{shown} is {kind_name(mode)}, not a regular file.")


class SafeRoot:
    """A folder whose contents are read and changed only through fds walked from its root."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.realpath(Path(root).expanduser()))

    # --- the walk -------------------------------------------------------------------------

    @contextlib.contextmanager
    def parent_of(self, rel: str, *, follow: bool = True) -> Iterator[tuple[int, str]]:
        """(fd of the folder holding `rel`, final name); the name may not exist yet.

        With `follow`, a final symlink is followed (beneath the root); otherwise the link
        itself is named. The root itself is (root fd, ".").
        """
        stack = [os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)]
        try:
            name = self._walk(stack, rel, follow)
            yield stack[-1], name
        finally:
            for fd in stack:
                os.close(fd)

    def _walk(self, stack: list[int], rel: str, follow: bool) -> str:
        todo = deque(_parts(rel))
        links = 0
        while todo:
            part = todo.popleft()
            if part == "..":
                if len(stack) == 1:
                    raise self._escape(rel, "'..' leads above the workspace root")
                os.close(stack.pop())
                continue
            last = not todo
            try:
                fd = os.open(part, _PATH_FLAGS, dir_fd=stack[-1])
            except FileNotFoundError:
                if last:
                    return part
                raise
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode) and not last:
                stack.append(fd)
                continue
            try:
                # an empty name reads the link this fd holds, not whatever bears its name now
                target = os.readlink("", dir_fd=fd) if stat.S_ISLNK(mode) else ""
            finally:
                os.close(fd)
            if not stat.S_ISLNK(mode) or (last and not follow):
                if not last:
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), part)
                return part
            links += 1
            if links > MAX_LINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), rel)
            if target.startswith("/"):
                target = self._beneath(rel, target)
                for held in stack[1:]:
                    os.close(held)
                del stack[1:]
            todo.extendleft(reversed(_parts(target)))
        return "."

    def _beneath(self, rel: str, target: str) -> str:
        root = str(self.root)
        if target != root and not target.startswith(root.rstrip("/") + "/"):
            raise self._escape(rel, f"a symbolic link on the way points to {target!r}")
        return target[len(root) :]

    @staticmethod
    def _escape(rel: str, why: str) -> PathOutsideWorkspace:
        return PathOutsideWorkspace(f"Path {rel!r} is outside the workspace: {why}")

    # --- looking ----------------------------------------------------------------------------

    def lstat(self, rel: str, *, follow: bool = False) -> os.stat_result | None:
        """The stat of `rel` (of a final link itself unless `follow`), or None if missing."""
        try:
            with self.parent_of(rel, follow=follow) as (fd, name):
                return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def list_dir(self, rel: str) -> list[tuple[str, os.stat_result]]:
        """Each entry of the folder `rel` with its lstat; entries that vanish are left out."""
        with self.parent_of(rel) as (parent, name):
            fd = os.open(
                name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent
            )
        try:
            found = []
            with os.scandir(fd) as entries:
                for entry in entries:
                    with contextlib.suppress(FileNotFoundError):
                        found.append((entry.name, entry.stat(follow_symlinks=False)))
            return found
        finally:
            os.close(fd)

    def readlink(self, rel: str) -> str:
        """The target of the symlink `rel`."""
        with self.parent_of(rel, follow=False) as (fd, name):
            return os.readlink(name, dir_fd=fd)

    @contextlib.contextmanager
    def open_regular(
        self, rel: str, shown: str | None = None, *, follow: bool = True
    ) -> Iterator[tuple[BinaryIO, os.stat_result]]:
        """An open regular file and its stat; NotRegular for anything else, never blocking."""
        shown = rel if shown is None else shown
        fd = self._open_regular_fd(rel, shown, follow)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise NotRegular(shown, info.st_mode)
            yield handle, info

    def _open_regular_fd(self, rel: str, shown: str, follow: bool) -> int:
        for _ in range(_RETRIES):
            with self.parent_of(rel, follow=follow) as (parent, name):
                info = os.stat(name, dir_fd=parent, follow_symlinks=False)
                if stat.S_ISREG(info.st_mode):
                    try:
                        return os.open(name, _READ_FLAGS, dir_fd=parent)
                    except OSError as exc:
                        if exc.errno != errno.ELOOP:
                            raise
                elif not (stat.S_ISLNK(info.st_mode) and follow):
                    raise NotRegular(shown, info.st_mode)
            # it became a symlink since the walk: walk again
        raise OSError(errno.ELOOP, "it kept changing while being opened", rel)

    def read_bytes(self, rel: str, limit: int | None = None) -> bytes:
        """The first `limit` bytes (all without one) of the regular file `rel`."""
        with self.open_regular(rel) as (handle, _):
            return handle.read() if limit is None else handle.read(limit)

    # --- changing ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _changing(self, rel: str) -> Iterator[None]:
        """A change the file system refuses for want of write access says so in words, never
        with the name of a temporary file."""
        try:
            yield
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise
            raise ReadOnlyWorkspace(self._refusal(rel, exc.errno)) from None

    def _refusal(self, rel: str, code: int) -> str:
        if code == errno.EROFS:
            return f"the workspace is read-only (a read-only file system): {rel} cannot be changed"
        if not os.access(self.root, os.W_OK):
            return f"the workspace is read-only for this user: {rel} cannot be changed"
        return f"no permission to change {rel}: it or its folder is read-only for this user"

    def write_atomic(self, rel: str, data: bytes, *, follow: bool = True) -> None:
        """Replace the file `rel` whole through a temporary sibling; keeps an existing mode."""
        with self._changing(rel), self.parent_of(rel, follow=follow) as (fd, name):
            try:
                old = os.stat(name, dir_fd=fd, follow_symlinks=False)
                mode = stat.S_IMODE(old.st_mode) if stat.S_ISREG(old.st_mode) else None
            except FileNotFoundError:
                mode = None
            replace_at(fd, name, lambda out: out.write(data), mode)

    def mkdir(self, rel: str) -> None:
        """Create the folder `rel`; its parent must exist."""
        with self._changing(rel), self.parent_of(rel, follow=False) as (fd, name):
            os.mkdir(name, dir_fd=fd)

    def missing_folders(self, rel: str) -> list[str]:
        """`rel` and its ancestors that do not exist yet, outermost first."""
        missing: list[str] = []
        while rel and self.lstat(rel, follow=True) is None:
            missing.append(rel)
            rel = rel.rpartition("/")[0]
        return missing[::-1]

    def makedirs(self, rel: str) -> None:
        """Create the folder `rel` and any missing parents."""
        for folder in self.missing_folders(rel):
            self.mkdir(folder)

    def remove(self, rel: str) -> None:
        """Delete `rel` (a link itself, never its target; a folder with all inside it)."""
        with self._changing(rel), self.parent_of(rel, follow=False) as (fd, name):
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                shutil.rmtree(name, dir_fd=fd)
            else:
                os.unlink(name, dir_fd=fd)

    def rmdir(self, rel: str) -> None:
        """Remove the empty folder `rel`."""
        with self._changing(rel), self.parent_of(rel, follow=False) as (fd, name):
            os.rmdir(name, dir_fd=fd)

    def unlink(self, rel: str) -> None:
        """Remove the file or link `rel` itself."""
        with self._changing(rel), self.parent_of(rel, follow=False) as (fd, name):
            os.unlink(name, dir_fd=fd)

    def rename(self, old: str, new: str) -> None:
        """Move `old` (a link itself, not its target) to `new`, which must not exist: in one
        step where the kernel can (FileExistsError otherwise), never replacing anything."""
        with (
            self._changing(old),
            self.parent_of(old, follow=False) as (src, src_name),
            self.parent_of(new, follow=False) as (dst, dst_name),
        ):
            if _rename_noreplace(src, src_name, dst, dst_name):
                return
            if os.path.lexists(f"/proc/self/fd/{dst}/{dst_name}"):
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), new)
            os.rename(src_name, dst_name, src_dir_fd=src, dst_dir_fd=dst)

    def symlink(self, target: str, rel: str) -> None:
        """Make `rel` a symbolic link to `target` (the target is not checked or followed)."""
        with self._changing(rel), self.parent_of(rel, follow=False) as (fd, name):
            os.symlink(target, name, dir_fd=fd)

    def chmod(self, rel: str, mode: int) -> None:
        """Set the mode of the file or folder `rel` (never through a final link)."""
        with self._changing(rel), self.parent_of(rel, follow=False) as (parent, name):
            fd = os.open(name, _PATH_FLAGS, dir_fd=parent)
        try:
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise OSError(errno.ELOOP, "is a symbolic link", rel)
            os.chmod(f"/proc/self/fd/{fd}", mode)
        finally:
            os.close(fd)


def replace_at(
    dir_fd: int, name: str, write: Callable[[BinaryIO], object], mode: int | None = None
) -> None:
    """Put what `write` writes at `name` in `dir_fd` atomically (temp file, fsync, rename)."""
    tmp = f".{name[:200]}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, _TMP_FLAGS, 0o666, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


_RENAME_NOREPLACE = 1
_LIBC = ctypes.CDLL(None, use_errno=True)


def _rename_noreplace(src_fd: int, src: str, dst_fd: int, dst: str) -> bool:
    """renameat2(RENAME_NOREPLACE); False when this kernel or filesystem cannot do it."""
    renameat2 = getattr(_LIBC, "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(src_fd, os.fsencode(src), dst_fd, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.ENOSYS, errno.EINVAL):
        return False
    raise OSError(error, os.strerror(error), dst)
