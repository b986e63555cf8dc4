"""A bubblewrap session's network with AGENT_SESSION_NETWORK=outbound: the session keeps its own
network namespace, and slirp4netns (a user-mode network stack, a process of the host) gives it
a tap device whose traffic leaves as this server's own connections. `--disable-host-loopback`
refuses the host's loopback (127.0.0.0/8 through slirp's gateway 10.0.2.2), so the web server,
A2A, MCP and Redis listening there stay out of reach; the host's other addresses are reached
as any other machine on the network reaches them. Its DNS is slirp's 10.0.2.3, forwarded to
the host's resolvers; the session sees a resolv.conf naming it.

bubblewrap tells the sandbox's first pid on its --info-fd; slirp4netns joins that pid's
network namespace and says on its --ready-fd when the device is up, before any command runs.
It ends when its --exit-fd closes: when the session ends, or with this server (the write end
is this process's alone)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from modules.sandbox.confinement import data_pipe
from modules.sandbox.runner import SandboxUnavailable
from modules.sandbox.session.os_threads import original

NetworkMode = Literal["off", "outbound", "host"]
SLIRP_DNS = "10.0.2.3"
RESOLV_CONF = "/etc/resolv.conf"
READY_SECONDS = 10.0  # for bubblewrap's pid, then for slirp4netns's device
STOP_SECONDS = 2.0
MTU = 65520
MISSING = (
    "AGENT_SESSION_NETWORK=outbound needs slirp4netns, which is not installed "
    "(apt-get install slirp4netns); set AGENT_SESSION_NETWORK=off to run sessions without a "
    "network"
)

NETWORK_LINES: dict[NetworkMode, str] = {
    "off": "network: off (the session's own loopback only)",
    "outbound": "network: outbound, through a user-mode network stack (slirp4netns) of the "
    "session's own; never the host's loopback services (this server, A2A, MCP, Redis); the "
    "host's other addresses as any machine on the network reaches them",
    "host": "network: the host's own, loopback services included",
}


def slirp4netns() -> str:
    """The path of slirp4netns; SandboxUnavailable saying what to do when it is missing."""
    path = shutil.which("slirp4netns")
    if path is None:
        raise SandboxUnavailable(MISSING)
    return path


@dataclass
class Prepared:
    """What bubblewrap gets for the network (its options, the descriptors to pass it) and
    what this side keeps to attach slirp4netns once bubblewrap runs."""

    options: list[str]
    child_fds: list[int]  # passed to bubblewrap, closed here once it started
    info: int  # bubblewrap's --info-fd, read here

    def close_child_fds(self) -> None:
        for fd in self.child_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.child_fds = []


@dataclass
class Attached:
    """A running slirp4netns; `stop` ends it."""

    process: Any  # a real subprocess.Popen
    exit_fd: int
    stopped: bool = field(default=False)

    def stop(self) -> None:
        """Close its exit descriptor (it ends), wait for it, kill it past STOP_SECONDS."""
        if self.stopped:
            return
        self.stopped = True
        with contextlib.suppress(OSError):
            os.close(self.exit_fd)
        try:
            self.process.wait(timeout=STOP_SECONDS)
        except Exception:  # TimeoutExpired, of another class under eventlet's subprocess
            with contextlib.suppress(OSError):
                self.process.kill()
            self.process.wait()


class UserNetwork:
    """Outbound network for bubblewrap sessions through slirp4netns."""

    def __init__(self) -> None:
        self.path = slirp4netns()

    def prepare(self) -> Prepared:
        """bubblewrap's options: its --info-fd, and a resolv.conf naming slirp's DNS."""
        info_read, info_write = os.pipe()
        resolv = data_pipe(f"nameserver {SLIRP_DNS}\n".encode())
        options = ["--info-fd", str(info_write), "--ro-bind-data", str(resolv), _resolv_target()]
        return Prepared(options, [info_write, resolv], info_read)

    def attach(self, prepared: Prepared, log: Any) -> Attached:
        """Read the sandbox's pid, start slirp4netns in its network namespace and wait until
        the device is up; SandboxUnavailable when either fails (its errors go to `log`)."""
        deadline = time.monotonic() + READY_SECONDS
        try:
            pid = _child_pid(prepared.info, deadline)
        finally:
            os.close(prepared.info)
        exit_read, exit_write = os.pipe()
        ready_read, ready_write = os.pipe()
        real = original("subprocess")
        # By path: the supervisor is not dumpable, so slirp4netns may not join its user
        # namespace; as root it needs none but its own.
        own = "/proc/self/ns/user" if os.geteuid() == 0 else f"/proc/{pid}/ns/user"
        argv = [self.path, "--configure", f"--mtu={MTU}", "--disable-host-loopback",
                "--enable-sandbox", "--enable-seccomp", f"--exit-fd={exit_read}",
                f"--ready-fd={ready_write}", "--netns-type=path", f"--userns-path={own}",
                f"/proc/{pid}/ns/net", "tap0"]  # fmt: skip
        try:
            process = real.Popen(
                argv,
                stdin=real.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=[exit_read, ready_write],
                start_new_session=True,
            )
        except OSError as exc:
            for fd in (exit_read, exit_write, ready_read, ready_write):
                os.close(fd)
            raise SandboxUnavailable(f"slirp4netns did not start: {exc}") from None
        os.close(exit_read)
        os.close(ready_write)
        attached = Attached(process, exit_write)
        try:
            if _read_until(ready_read, deadline, lambda got: len(got) > 0) != b"1":
                raise SandboxUnavailable("slirp4netns did not bring the session's network up")
        except BaseException:
            attached.stop()
            raise
        finally:
            os.close(ready_read)
        return attached


def _child_pid(info: int, deadline: float) -> int:
    """The sandbox's first pid, from bubblewrap's --info-fd (a JSON object)."""
    text = _read_until(info, deadline, _is_json)
    try:
        pid = json.loads(text)["child-pid"]
    except (ValueError, KeyError, TypeError):
        raise SandboxUnavailable("bubblewrap did not say the sandbox's pid") from None
    if not isinstance(pid, int) or pid < 2:
        raise SandboxUnavailable("bubblewrap did not say the sandbox's pid")
    return pid


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


def _read_until(fd: int, deadline: float, done: Any) -> bytes:
    """What `fd` gives until `done(what was read)`, its end, or the deadline."""
    got = b""
    while not done(got):
        left = deadline - time.monotonic()
        if left <= 0 or not original("select").select([fd], [], [], left)[0]:
            break
        chunk = original("os").read(fd, 4096)
        if not chunk:
            break
        got += chunk
    return got


def _resolv_target() -> str:
    """Where the session's resolv.conf goes: /etc/resolv.conf, or where it links to (under
    /run, a folder of the session's own, where bubblewrap makes the path)."""
    if os.path.islink(RESOLV_CONF):
        return os.path.realpath(RESOLV_CONF)
    return RESOLV_CONF
