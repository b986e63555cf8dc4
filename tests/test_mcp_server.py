"""`python main.py mcp`: the workspace's tools served over stdio, used by the SDK's own client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from mcp_server.server import offered_tools
from modules.tools.catalogue import build_registry
from tests.kit.server import REPO, agent_argv
from tests.kit.settings import make_settings


def serve(tmp_path: Path, *flags: str) -> StdioServerParameters:
    (tmp_path / "ws").mkdir(exist_ok=True)  # a --workspace must exist
    command, *args = agent_argv("mcp", tmp_path / "ws", tmp_path / "data", *flags)
    return StdioServerParameters(command=command, args=args, cwd=REPO)


def text(result: Any) -> str:
    return "".join(block.text for block in result.content)


def test_ask_mode_offers_reading_tools_plus_the_opted_in_ones(tmp_path):
    async def session() -> None:
        async with Client(serve(tmp_path, "--allow-tool", "create_file")) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert {"read_file", "list_files", "search_code", "create_file"} <= set(tools)
            assert not {"run_command", "delete_file", "focus_file"} & set(tools)
            reading, creating = tools["read_file"].annotations, tools["create_file"].annotations
            assert reading is not None and creating is not None
            assert reading.read_only_hint is True
            assert creating.read_only_hint is False
            assert "path" in tools["create_file"].input_schema["properties"]

            created = await client.call_tool(
                "create_file", {"path": "a/b.txt", "content": "hello\n"}
            )
            assert not created.is_error, text(created)
            read = await client.call_tool("read_file", {"path": "a/b.txt"})
            assert "hello" in text(read)
            outside = await client.call_tool("read_file", {"path": "../escape.txt"})
            assert outside.is_error and "outside the workspace" in text(outside)
            invalid = await client.call_tool("read_file", {"start_line": 1})
            assert invalid.is_error and "path" in text(invalid)
            with pytest.raises(MCPError, match="Unknown tool 'run_command'") as refused:
                await client.call_tool("run_command", {"command": "true"})
            assert refused.value.error.code == INVALID_PARAMS

    anyio.run(session)
    assert (tmp_path / "ws" / "a" / "b.txt").read_text() == "hello\n"
    assert not (tmp_path / "escape.txt").exists()
    assert (tmp_path / "data" / "logs" / "agent.jsonl").exists()


def test_auto_mode_offers_commands_which_run_in_the_workspace(tmp_path):
    async def session() -> None:
        async with Client(serve(tmp_path, "--approval", "auto")) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"run_command", "delete_file", "update_memory"} <= names
            ran = await client.call_tool("run_command", {"command": "pwd"})
            assert not ran.is_error and str(tmp_path / "ws") in text(ran)

    anyio.run(session)


def test_read_only_mode_refuses_opt_ins_that_change_things(tmp_path):
    registry = build_registry()
    settings = make_settings(
        workspace=tmp_path,
        data_dir=tmp_path,
        approval="read-only",
        mcp_server_tools=["create_file", "no_such_tool", "read_file"],
    )
    offered, warnings = offered_tools(registry, settings)
    assert "create_file" not in offered and "read_file" in offered
    assert all(tool.read_only for tool in offered.values())
    assert any("create_file changes the workspace" in w for w in warnings)
    assert any("no tool 'no_such_tool'" in w for w in warnings)


def test_stdio_serves_the_files_as_resources_and_the_skills_as_prompts(tmp_path):
    (tmp_path / "ws" / "docs").mkdir(parents=True)
    (tmp_path / "ws" / "docs" / "a.md").write_text("# A\n")

    async def session() -> None:
        async with Client(serve(tmp_path), mode="legacy") as client:
            uris = [resource.uri for resource in (await client.list_resources()).resources]
            assert uris == ["workspace:///docs/a.md"]
            read = (await client.read_resource("workspace:///docs/a.md")).contents[0]
            assert getattr(read, "text", None) == "# A\n"
            names = {prompt.name for prompt in (await client.list_prompts()).prompts}
            assert "code-review" in names

    anyio.run(session)
