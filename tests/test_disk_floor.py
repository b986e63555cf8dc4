"""The disk floor, on a real small file system of the test's own (a 300 MB tmpfs or
loop-mounted ext4) holding the workspace and the data folder, with the floor at 100 MB: a
command that fills it is killed before the free space goes more than a small margin below the
floor and says so; the next command is refused until room is made; the server, its history
and the task go on. Through bubblewrap, the real server and, when an engine answers, Docker."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from modules.sandbox.disk_floor import DiskFloor, DiskFloorReached, Floor
from modules.sandbox.disk_watch import WATCHER
from modules.sandbox.docker_runner import DockerRunner
from modules.sandbox.factory import build_runner, runner_for, sessions_of
from modules.sandbox.runner import CommandResult, CommandRunner
from modules.undo.journal import UndoJournal
from modules.workspace.paths import Workspace
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import connected
from tests.kit.sandbox_image import SANDBOX_UID, build_test_image, docker_client_or_skip
from tests.kit.server import ServerProcess
from tests.kit.settings import make_settings
from tests.kit.waits import wait_until
from utils.cancel import CancelToken
from utils.settings import Settings

MB = 1024 * 1024
DISK_MB = 300
FLOOR_MB = 100
# How far below the floor a stopped command may leave the disk. Seen on this 2-core machine
# writing 100-1000 MB/s, idle and with both cores busy: at most 13 MB for a local command
# (SIGKILL to its group), 6 MB for Docker (SIGKILL to the container's first process; 32 MB
# through the engine alone, and 72 MB once on a loaded CI machine); the margin leaves room for
# a slower machine.
OVERSHOOT_MB = 30
FILL = "for i in 1 2 3; do head -c 100M /dev/zero > fill$i; done; echo all written"
TASK_SECONDS = 60


@pytest.fixture(params=["tmpfs", "ext4"])
def disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A DISK_MB file system of the test's own, mounted on tmp_path/disk, unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    mountpoint = tmp_path / "disk"
    mountpoint.mkdir()
    if request.param == "tmpfs":
        mount = ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(mountpoint)]
    else:
        if shutil.which("mkfs.ext4") is None:
            pytest.skip("no mkfs.ext4 to make an ext4 file system")
        image = tmp_path / "disk.img"
        with image.open("wb") as sparse:
            sparse.truncate(DISK_MB * MB)
        subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
        mount = ["mount", "-o", "loop", str(image), str(mountpoint)]
    mounted = subprocess.run(mount, capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"this machine cannot mount a {request.param}: {mounted.stderr.strip()}")
    try:
        (mountpoint / "ws").mkdir()
        (mountpoint / "data").mkdir()
        yield mountpoint
    finally:
        subprocess.run(["umount", "--lazy", str(mountpoint)], check=True)


def free_mb(path: Path) -> float:
    found = os.statvfs(path)
    return found.f_bavail * found.f_frsize / MB


def disk_settings(disk: Path, **more: Any) -> Settings:
    return make_settings(None, disk, disk_floor_mb=FLOOR_MB, disk_floor_percent=0, **more)


def run(runner: CommandRunner, command: str) -> CommandResult:
    return runner.run(
        ["bash", "-c", command],
        cwd=runner_workspace(runner),
        timeout=TASK_SECONDS,
        cancel=CancelToken(),
        on_output=lambda _: None,
    )


def runner_workspace(runner: Any) -> Path:
    return Path(runner.settings.workspace)


def assert_stopped_at_the_floor(
    result: CommandResult, disk: Path, overshoot_mb: int = OVERSHOOT_MB
) -> None:
    """Killed before it wrote everything, the disk left near the floor, and told so."""
    assert result.exit_code != 0 and not result.timed_out, result
    assert "all written" not in result.output
    assert "[Stopped: this command was killed when" in result.note, result.note
    assert f"below the floor of {FLOOR_MB} MB" in result.note
    assert "the file system of the workspace and the data folder" in result.note
    assert "delete_file" in result.note
    left = free_mb(disk)
    assert FLOOR_MB - overshoot_mb <= left < FLOOR_MB + 10, f"{left:.1f} MB free"
    assert (disk / "ws" / "fill1").stat().st_size == 100 * MB  # what it wrote is kept


def test_a_local_command_filling_the_disk_is_stopped_at_the_floor(disk: Path) -> None:
    runner = build_runner(disk_settings(disk, sandbox="local"))
    if runner.kind != "bubblewrap":
        pytest.skip(f"bubblewrap is not usable here ({runner.isolation})")
    assert any(line.startswith("disk: a command is not started") for line in runner.isolation)
    assert_stopped_at_the_floor(run(runner, FILL), disk)
    with pytest.raises(DiskFloorReached) as refused:
        run(runner, "echo not run")
    assert "Not run: the file system of the workspace and the data folder" in str(refused.value)
    assert f"MB free, below the floor of {FLOOR_MB} MB" in str(refused.value)
    (disk / "ws" / "fill1").unlink()
    after = run(runner, "echo ran")
    assert after.exit_code == 0 and after.output.strip() == "ran", after


def test_a_background_process_filling_the_disk_ends_its_session_at_the_floor(disk: Path) -> None:
    """A conversation's session is watched as a whole: past the floor every process of it is
    stopped, the session ends, and the record of the process says why."""
    runner = runner_for(disk_settings(disk, sandbox="local"))
    sessions = sessions_of(runner)
    if runner.kind != "bubblewrap" or sessions is None:
        pytest.skip(f"bubblewrap is not usable here ({runner.isolation})")
    try:
        session = sessions.session("conv-fill")
        session.start("sleep 300 & head -c 300M /dev/zero > fill; sleep 300", disk / "ws", 0)
        reasons = wait_until(
            lambda: [r.end_reason for r in sessions.history("conv-fill") if not r.running],
            TASK_SECONDS,
            "the session's end at the floor",
        )
        assert reasons == ["disk_floor"] and session.ended
        assert FLOOR_MB - OVERSHOOT_MB <= free_mb(disk) < FLOOR_MB + 10
        with pytest.raises(DiskFloorReached):
            sessions.session("conv-fill")
    finally:
        runner.close()


def test_a_docker_command_filling_the_workspace_is_stopped_at_the_floor(
    disk: Path, request: pytest.FixtureRequest
) -> None:
    client = docker_client_or_skip()
    image = build_test_image(client)
    os.chown(disk / "ws", SANDBOX_UID, SANDBOX_UID)
    runner = DockerRunner(disk_settings(disk, docker={"image": image, "pool_size": 1}), client)
    request.addfinalizer(runner.close)
    assert_stopped_at_the_floor(run(runner, FILL), disk)
    with pytest.raises(DiskFloorReached):
        run(runner, "echo not run")
    (disk / "ws" / "fill1").unlink()
    assert run(runner, "echo ran").output.strip() == "ran"


def test_one_watcher_stops_every_group_writing_a_disk_below_its_floor(
    disk: Path, tmp_path: Path
) -> None:
    """Process groups no runner started: two writing the small disk together, one idle there,
    one on another file system. The one watcher thread stops the three on the small disk (it
    cannot tell who wrote, and none may write more) and leaves the other alone."""
    floor = DiskFloor(disk_settings(disk))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other_floor = DiskFloor(make_settings(workspace=elsewhere, data_dir=elsewhere, disk_floor_mb=1))
    script = "head -c 150M /dev/zero > fill-$$; exec sleep 60"
    groups = [
        subprocess.Popen(["sh", "-c", script], cwd=disk / "ws", start_new_session=True),
        subprocess.Popen(["sh", "-c", script], cwd=disk / "ws", start_new_session=True),
        subprocess.Popen(["sleep", "60"], cwd=disk / "ws", start_new_session=True),
        subprocess.Popen(["sleep", "60"], cwd=elsewhere, start_new_session=True),
    ]
    stopped: list[int] = []

    def stopper(pid: int) -> Callable[[], None]:
        def stop() -> None:
            stopped.append(pid)
            os.killpg(pid, signal.SIGKILL)

        return stop

    watches = [WATCHER.watch(floor, stopper(g.pid)) for g in groups[:3]]
    watches.append(WATCHER.watch(other_floor, stopper(groups[3].pid)))
    try:
        for group in groups[:3]:
            group.wait(timeout=TASK_SECONDS)
        assert sorted(stopped) == sorted(g.pid for g in groups[:3])
        assert all(w.shortage is not None for w in watches[:3])
        assert groups[3].poll() is None and watches[3].shortage is None
        assert [t.name for t in threading.enumerate()].count("disk-watch") == 1
    finally:
        for watch in watches:
            watch.close()
        for group in groups:
            group.kill()
            group.wait()
    assert free_mb(disk) >= FLOOR_MB - OVERSHOOT_MB


def test_the_task_and_the_history_go_on_after_a_stop(disk: Path, fake_llm: FakeLLM) -> None:
    """Through the real server: the stopped command is a failed tool result the model reads;
    it deletes a file as told, the next command runs, the task completes and is kept."""
    fake_llm.script(
        Reply(tool_calls=[Call("run_command", {"command": FILL})]),
        Reply(tool_calls=[Call("run_command", {"command": "echo refused"})]),
        Reply(tool_calls=[Call("delete_file", {"path": "fill1"})]),
        Reply(tool_calls=[Call("run_command", {"command": "echo ran again"})]),
        Reply(content="Made room and ran it."),
    )
    env = {"AGENT_SANDBOX": "local", "AGENT_DISK_FLOOR_MB": str(FLOOR_MB),
           "AGENT_DISK_FLOOR_PERCENT": "0"}  # fmt: skip
    with ServerProcess(
        disk / "ws", disk / "data", base_url=fake_llm.base_url, api_key=fake_llm.api_key, env=env
    ) as server, connected(server.url) as client:  # fmt: skip
        if client.call("get_status")["sandbox"]["kind"] != "bubblewrap":
            pytest.skip("bubblewrap is not usable here")
        cid = client.start("fill the disk")
        events = client.wait_done(cid, TASK_SECONDS)
        results = [e.payload for e in events if e.name == "tool" and e.payload["phase"] == "result"]
        assert [r["ok"] for r in results] == [False, False, True, True], results
        assert "[Stopped: this command was killed when" in results[0]["output"]
        assert "Not run: the file system of the workspace" in results[1]["output"]
        assert "ran again" in results[3]["output"]
        assert events[-1].payload["reason"] == "complete"
        assert free_mb(disk) >= FLOOR_MB - OVERSHOOT_MB
        got = client.call("get_conversation", {"conversation_id": cid})
        kept = [m.get("content") or "" for m in got["messages"]]
        assert any("[Stopped: this command was killed" in text for text in kept)
        assert kept[-1] == "Made room and ran it."
        wait_until(lambda: fake_llm.drop_script() == 0, 5, "every reply used")


def test_undo_copies_keep_the_floor_of_the_data_folder(disk: Path) -> None:
    """Undo keeps a copy of every file a command may change (up to 50 MB each, no total): the
    copies filled the data folder's disk past the floor that stops commands. A copy that would
    go below it is not made, and undo says why."""
    workspace = disk / "ws"
    names = ["a.bin", "b.bin", "c.bin"]
    size = int((free_mb(disk) - FLOOR_MB) / 4.5 * MB)  # then room for one copy, not two
    for index, name in enumerate(names):  # on disk (not sparse), each its own
        (workspace / name).write_bytes(bytes([index + 1]) + bytes(size - 1))
    (workspace / "notes.txt").write_text("small\n")
    room = (free_mb(disk) - FLOOR_MB) * MB
    assert size < room < 2 * size, f"{room / MB:.0f} MB above the floor, files of {size / MB}"
    journal = UndoJournal(disk / "data", Workspace(workspace), floor=Floor(FLOOR_MB * MB))
    snapshot = journal.task("conv", "task").snapshot()
    kept = [name for name in names if name in snapshot.digests]
    assert len(kept) == 1 and "notes.txt" in snapshot.digests, snapshot.lost
    assert sorted(snapshot.lost) == sorted(set(names) - set(kept))
    for reason in snapshot.lost.values():
        assert "was not copied for undo" in reason and f"floor of {FLOOR_MB} MB" in reason
        assert "AGENT_DISK_FLOOR_MB" in reason
    assert free_mb(disk) >= FLOOR_MB
