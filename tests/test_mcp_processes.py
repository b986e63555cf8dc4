"""`python main.py mcp` offers the model's process tools as it offers run_command: listed by the
real stdio server in auto mode (the reading ones in ask mode too), a process started in the
background by one call, listed and stopped by later ones (its one conversation's session)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.kit.server import REPO, agent_argv

pytestmark = [pytest.mark.e2e]

PROCESS_TOOLS = {"process_output", "process_input", "process_stop", "process_list"}


def serve(tmp_path: Path, *flags: str) -> StdioServerParameters:
    (tmp_path / "ws").mkdir(exist_ok=True)
    command, *args = agent_argv("mcp", tmp_path / "ws", tmp_path / "data", *flags)
    return StdioServerParameters(
        command=command, args=args, cwd=REPO, env={"AGENT_SANDBOX": "local"}
    )


def text(result: Any) -> str:
    return "".join(block.text for block in result.content)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_the_process_tools_are_offered_and_keep_a_process_across_calls(tmp_path: Path) -> None:
    async def session() -> None:
        async with Client(serve(tmp_path)) as asking:
            names = {tool.name for tool in (await asking.list_tools()).tools}
            assert {"process_output", "process_list"} <= names  # reading: offered in ask mode
            assert not {"process_input", "process_stop", "run_command"} & names
        async with Client(serve(tmp_path, "--approval", "auto")) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert PROCESS_TOOLS | {"run_command"} <= set(tools)
            assert "background" in tools["run_command"].input_schema["properties"]
            started = await client.call_tool(
                "run_command", {"command": "sleep 300", "background": True}
            )
            if "sandbox" in text(started) and started.is_error:
                pytest.skip(f"no sandbox session here: {text(started)}")
            assert not started.is_error, text(started)
            assert "running in the background as p1" in text(started)
            listed = await client.call_tool("process_list", {})
            assert "p1 `sleep 300`" in text(listed), text(listed)
            stopped = await client.call_tool("process_stop", {"process_id": "p1"})
            assert not stopped.is_error and "ended (stopped)" in text(stopped), text(stopped)

    anyio.run(session)
