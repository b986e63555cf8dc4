"""Commands' cgroups are made inside the server's own cgroup in every hierarchy, so a limit set
on the server's cgroup (its service, container or pod) covers its commands; leftovers of a
dead server are reaped there. As root, on this machine's real cgroups.

This machine's v2 hierarchy (/sys/fs/cgroup/unified) carries neither pids nor memory: both are
bound to v1 hierarchies that have child cgroups (Docker's, the sessions'), and a controller
moves to v2 only from a v1 hierarchy without any. So v2 is tested where it can be: the
server's move into a leaf of its cgroup (the no-internal-processes rule), with no controller.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from modules.sandbox.cgroup import CGROUP_PREFIX, find_roots
from modules.sandbox.cgroup_place import SERVER_LEAF
from modules.sandbox.factory import build_runner
from modules.sandbox.resource_limits import ResourceLimits
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import connected
from tests.kit.server import ServerProcess
from tests.kit.settings import make_settings
from tests.kit.waits import wait_until
from utils.cancel import CancelToken, TaskCancelled
from utils.settings import LocalSandboxSettings

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root makes commands' cgroups")

MB = 1024 * 1024
REPO = Path(__file__).resolve().parent.parent
TASK_SECONDS = 60
HEADROOM_MB = 150  # the server's cgroup may use this much more than when the test starts
HOG_MB = 400  # past the headroom, under the command's own limit (AGENT_..._TOTAL_MEMORY_MB)
HOG = (
    f"b = bytearray({HOG_MB} * 1024 * 1024)\n"
    "b[::4096] = b'x' * len(b[::4096])\n"
    "print('allocated all of it')\n"
)


def cgroups_of(pid: int | str) -> dict[str, str]:
    """Controller -> the cgroup path of process `pid` (v2's under the name "")."""
    found = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        for name in names.split(",") if names else [""]:
            found[name] = path
    return found


def processes_running(marker: str) -> list[str]:
    """Pids whose command line holds `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if marker in Path(f"/proc/{name}/cmdline").read_bytes().decode(errors="replace"):
                    found.append(name)
            except OSError:
                continue
    return found


def assert_inside(command: dict[str, str], server: dict[str, str], controllers: list[str]) -> None:
    """In each controller's hierarchy, the command's cgroup is one made under the server's."""
    for controller in controllers:
        own = server[controller].removesuffix(f"/{SERVER_LEAF}").rstrip("/")
        assert command[controller].startswith(f"{own}/{CGROUP_PREFIX}"), (controller, command)


def used_controllers() -> list[str]:
    roots = find_roots()
    used = [name for name in ("pids", "memory") if getattr(roots, name) is not None]
    if not used:
        pytest.skip("no writable pids or memory cgroup here")
    return used


def test_a_commands_cgroups_are_inside_the_servers_own(tmp_path: Path) -> None:
    controllers = used_controllers()
    ws = tmp_path / "ws"
    ws.mkdir()
    runner = build_runner(make_settings(None, tmp_path, sandbox="local"))
    if runner.kind != "bubblewrap":
        pytest.skip(f"bubblewrap is not usable here ({runner.isolation})")
    marker = f"cgroup-probe-{os.getpid()}"
    cancel = CancelToken()
    failures: list[BaseException] = []

    def command() -> None:
        try:
            runner.run(["bash", "-c", f"sleep 60; echo {marker}"], cwd=ws, timeout=TASK_SECONDS,
                       cancel=cancel, on_output=lambda _: None)  # fmt: skip
        except TaskCancelled:
            pass
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=command)
    thread.start()
    try:
        pids = wait_until(lambda: processes_running(marker), 10, "the command to start")
        mine = cgroups_of("self")
        for pid in pids:
            assert_inside(cgroups_of(pid), mine, controllers)
    finally:
        cancel.cancel()
        thread.join(TASK_SECONDS)
    assert not failures, failures


def test_leftovers_of_a_dead_server_are_reaped_where_commands_cgroups_are_made() -> None:
    roots = find_roots()
    mine = cgroups_of("self")
    if roots.memory is not None:  # the server's own memory cgroup, not the hierarchy's root
        assert roots.memory.as_posix().endswith(mine["memory"].rstrip("/"))
    leftovers = [folder / f"{CGROUP_PREFIX}999999999-deadbeef" for folder in roots.folders]
    if not leftovers:
        pytest.skip("no writable pids or memory cgroup here")
    straggler = wait_until(lambda: _planted(leftovers), 30, "a straggler in the leftovers")
    try:
        ResourceLimits(LocalSandboxSettings())
        assert straggler.wait(timeout=10) == -9
        assert not any(leftover.exists() for leftover in leftovers)
    finally:
        straggler.kill()
        straggler.wait()
        for leftover in leftovers:
            if leftover.exists():
                leftover.rmdir()


def _planted(leftovers: list[Path]) -> subprocess.Popen[bytes] | None:
    """A process in every leftover cgroup, or None when a server starting in another test
    reaped them first (it reaps whatever a dead server left: these too)."""
    for leftover in leftovers:
        leftover.mkdir(exist_ok=True)
    joins = "; ".join(f"echo $$ > {shlex.quote(str(f / 'cgroup.procs'))}" for f in leftovers)
    straggler = subprocess.Popen(["sh", "-c", f"{joins} && exec sleep 60"])

    def joined(folder: Path) -> bool | None:
        try:
            return str(straggler.pid) in (folder / "cgroup.procs").read_text().split()
        except OSError:  # ENOENT, or ENODEV while it is being removed
            return None  # reaped meanwhile

    def state() -> list[bool | None] | None:
        """Each leftover's: joined (True) or reaped (None); None while it is joining."""
        if straggler.poll() is not None:  # it ended: a leftover was reaped before or after
            return [None]
        found = [joined(f) for f in leftovers]
        return None if False in found else found

    if all(wait_until(state, 10, "the straggler to join")):
        return straggler
    straggler.kill()
    straggler.wait()
    return None


@pytest.fixture
def limited_parent() -> Iterator[Path]:
    """A memory cgroup inside ours (v1), its limit set once the server in it has started."""
    roots = find_roots()
    if roots.memory is None or roots.memory_v2:
        pytest.skip("no writable cgroup v1 memory hierarchy here")
    parent = roots.memory / f"agent-test-parent-{os.getpid()}"
    parent.mkdir()
    try:
        yield parent
    finally:
        wait_until(lambda: not (parent / "cgroup.procs").read_text().split(), 10, "it empties")
        parent.rmdir()


def limit_to_headroom(parent: Path) -> int:
    """Limit `parent` to what it uses now and HEADROOM_MB more; the limit in bytes."""
    limit = int((parent / "memory.usage_in_bytes").read_text()) + HEADROOM_MB * MB
    (parent / "memory.limit_in_bytes").write_text(str(limit))
    if (parent / "memory.memsw.limit_in_bytes").exists():
        (parent / "memory.memsw.limit_in_bytes").write_text(str(limit))
    return limit


def test_a_memory_limit_on_the_servers_cgroup_covers_its_commands(
    tmp_path: Path, fake_llm: FakeLLM, limited_parent: Path
) -> None:
    """The server starts in a cgroup of its own with little memory to spare; a command that
    stays under the sandbox's limit but not under that one is killed, and told which limit."""
    waiting = "touch started; while [ ! -e go-on ]; do sleep 0.05; done"
    fake_llm.script(
        Reply(tool_calls=[Call("run_command", {"command": waiting})]),
        Reply(tool_calls=[Call("run_command", {"command": f"python3 -c {shlex.quote(HOG)}"})]),
        Reply(tool_calls=[Call("run_command", {"command": "echo still serving"})]),
        Reply(content="done"),
    )
    join = f'echo $$ > {shlex.quote(str(limited_parent / "cgroup.procs"))} && exec "$@"'
    env = {"AGENT_SANDBOX": "local", "AGENT_LOCAL_SANDBOX_TOTAL_MEMORY_MB": "1024"}
    ws = tmp_path / "ws"
    with ServerProcess(ws, tmp_path / "data", base_url=fake_llm.base_url,
                       api_key=fake_llm.api_key, env=env, wrap=["sh", "-c", join, "sh"],
                       ) as server, connected(server.url) as client:  # fmt: skip
        if client.call("get_status")["sandbox"]["kind"] != "bubblewrap":
            pytest.skip("bubblewrap is not usable here")
        assert server.pid is not None
        server_cgroups = cgroups_of(server.pid)
        assert server_cgroups["memory"].endswith(f"/{limited_parent.name}")
        limit_to_headroom(limited_parent)
        cid = client.start("run them")
        wait_until(lambda: (ws / "started").exists(), TASK_SECONDS, "the first command")
        pids = processes_running("go-on")
        assert pids
        for pid in pids:
            assert_inside(cgroups_of(pid), server_cgroups, used_controllers())
        (ws / "go-on").touch()
        events = client.wait_done(cid, TASK_SECONDS)
        assert server.pid is not None and cgroups_of(server.pid) == server_cgroups
    results = [e.payload for e in events if e.name == "tool" and e.payload["phase"] == "result"]
    assert [r["ok"] for r in results] == [True, False, True], results
    hog = results[1]["output"]
    assert "allocated all of it" not in hog, hog
    assert "killed for memory: the memory limit set on this server's own cgroup" in hog, hog
    assert "still serving" in results[2]["output"]


def test_v2_the_server_moves_into_a_leaf_of_its_cgroup_with_its_children(tmp_path: Path) -> None:
    """On the real v2 hierarchy (no controller needed to move): the server and its child go
    into SERVER_LEAF; with a process of someone else's in its cgroup, it refuses, saying why."""
    unified = next(
        (Path(line.split()[4]) for line in Path("/proc/self/mountinfo").read_text().splitlines()
         if " - cgroup2 " in line), None,
    )  # fmt: skip
    if unified is None or not os.access(unified, os.W_OK):
        pytest.skip("no writable cgroup v2 hierarchy here")
    place = unified / f"agent-test-v2-{os.getpid()}"
    place.mkdir()
    script = (
        f"import subprocess, sys; sys.path.insert(0, {str(REPO)!r})\n"
        "from pathlib import Path\n"
        "from modules.sandbox.cgroup_place import _move_into_leaf\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        f"print(_move_into_leaf(Path({str(place)!r}), set()))\n"
        "print(open(f'/proc/{child.pid}/cgroup').read().strip().splitlines()[-1])\n"
        "child.kill()\n"
    )
    join = f"echo $$ > {shlex.quote(str(place / 'cgroup.procs'))}"
    stranger = subprocess.Popen(["sh", "-c", f"{join}; exec sleep 60"])
    try:
        wait_until(lambda: str(stranger.pid) in (place / "cgroup.procs").read_text().split(),
                   10, "the stranger to join")  # fmt: skip
        argv = ["sh", "-c", f'{join} && exec "$@"', "sh", sys.executable, "-c", script]
        refused = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert "1 other process(es) share the server's cgroup" in refused.stdout, refused
        assert not (place / SERVER_LEAF).exists()
        stranger.kill()
        stranger.wait()
        moved = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        lines = moved.stdout.splitlines()
        assert lines[0] == "None", moved
        relative = place.relative_to(unified)
        assert lines[1] == f"0::/{relative}/{SERVER_LEAF}", moved
    finally:
        stranger.kill()
        stranger.wait()
        leaf = place / SERVER_LEAF
        wait_until(lambda: not leaf.exists() or not (leaf / "cgroup.procs").read_text().strip(),
                   10, "the leaf to empty")  # fmt: skip
        if leaf.exists():
            leaf.rmdir()
        place.rmdir()


FIND_ROOTS = f"""
import logging, sys
sys.path.insert(0, {str(REPO)!r})
logging.basicConfig(level=logging.WARNING, format="%(message)s %(fields)s")
from modules.sandbox.cgroup import find_roots
print(find_roots().memory)
"""


def test_where_the_servers_own_cgroup_is_not_writable_the_root_is_used_and_logged() -> None:
    """The server's memory cgroup made read-only (a read-only bind mount over it, in a mount
    namespace of the test's own): commands' cgroups go to the hierarchy's root, as before,
    and the log says why."""
    roots = find_roots()
    if roots.memory is None or roots.memory_v2:
        pytest.skip("no writable cgroup v1 memory hierarchy here")
    mountpoint = next(p for p in [roots.memory, *roots.memory.parents] if p.is_mount())
    if roots.memory == mountpoint:
        pytest.skip("this process's memory cgroup is its hierarchy's root")
    own = shlex.quote(str(roots.memory))
    shell = f'mount --bind -o ro {own} {own} && exec "$@"'
    argv = ["unshare", "-m", "sh", "-c", shell, "sh", sys.executable, "-c", FIND_ROOTS]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if "mount" in done.stderr and done.returncode != 0:
        pytest.skip(f"cannot make a read-only bind mount here: {done.stderr.strip()}")
    assert done.stdout.strip() == str(mountpoint), done
    assert "are not nested in the server's own" in done.stderr, done.stderr
    assert f"the server's own cgroup {roots.memory} is not writable" in done.stderr
