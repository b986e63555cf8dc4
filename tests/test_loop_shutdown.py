"""Stopping the asyncio loop thread (utils/async_loop.py) ends every task it holds, the ones
scheduled but never stepped too: an MCP server still connecting when the program stops left
"coroutine ... was never awaited" warnings on stderr, and its stdio child unwaited."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import warnings
from pathlib import Path

import anyio

from tests.kit.mcp_servers import FIXTURE, running
from tests.kit.server import REPO, free_port
from tests.kit.waits import SLOWNESS, wait_until
from utils.async_loop import LoopThread

UNCLEAN = ("never awaited", "is closed", "Task was destroyed")


def test_a_task_scheduled_as_the_loop_stops_still_runs_and_ends() -> None:
    ended: list[str] = []

    async def child() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            ended.append("child")

    async def spawn_then_stop() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(child)  # scheduled: its first step comes after the stop
            asyncio.get_running_loop().stop()
            await anyio.sleep_forever()

    loop = LoopThread("test-loop")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loop.submit(spawn_then_stop())
        wait_until(lambda: not loop.running, 10, "the loop thread to end")
        gc.collect()
    assert ended == ["child"]
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []


CLOSE_WHILE_CONNECTING = """
import sys
from pathlib import Path
from tests.kit.mcp_servers import manager_for
manager = manager_for(Path(sys.argv[1]), {
    "nobody": {"url": sys.argv[2]},
    "fixture": {"command": sys.executable, "args": [sys.argv[3], "--marker", "loop-shutdown"]},
})
manager.start()
manager.close()
"""


def test_mcp_servers_closed_while_they_connect_leave_nothing_unawaited(tmp_path: Path) -> None:
    """What a start-up that fails (a port taken) or a CLI quit at once does: the connections
    are stopped midway, then the interpreter exits and collects what is left."""
    nobody = f"http://127.0.0.1:{free_port()}/mcp"  # refused at once
    for attempt in range(3):  # the close lands at a different moment of the connections
        folder = tmp_path / str(attempt)
        done = subprocess.run(
            [sys.executable, "-c", CLOSE_WHILE_CONNECTING, str(folder), nobody, str(FIXTURE)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60 * SLOWNESS,
        )
        assert done.returncode == 0, done.stderr
        unclean = [line for line in done.stderr.splitlines() if any(u in line for u in UNCLEAN)]
        assert unclean == [], done.stderr
    assert running("loop-shutdown") == []
