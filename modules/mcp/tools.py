"""An MCP server's tools as registry tools named `mcp__SERVER__TOOL`, and their results as
tool output for the model."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from modules.mcp.config import ServerEntry, tool_name
from modules.results import ToolError, ToolOutput
from modules.tools.registry import JsonArguments, Tool
from modules.tools.tool_context import ToolContext
from utils.cancel import CancelToken

if TYPE_CHECKING:
    from mcp import Client

DESCRIPTION_LIMIT = 2_000
MAX_TOOL_PAGES = 50

# Calls the server's tool by its own name with the arguments; the connection's `call`.
Caller = Callable[[str, dict[str, Any], CancelToken], ToolOutput]
# The tools by namespaced name, and each one's name on the server.
Listing = tuple[dict[str, Tool], dict[str, str]]


async def list_tools(client: Client) -> list[Any]:
    """Every tool the server lists, following its pages (at most MAX_TOOL_PAGES)."""
    tools, cursor = [], None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def registry_tools(
    server: str, entry: ServerEntry, listed: list[Any], call: Caller, *, time_limit: float
) -> Listing:
    """The listed tools the entry allows, each asking before it runs unless the server marks
    it read-only or the entry's `always_allow` names it."""
    tools, remote_names = {}, {}
    for remote in listed:
        if entry.allowed_tools is not None and not _matches(remote.name, entry.allowed_tools):
            continue
        read_only = bool(remote.annotations and remote.annotations.read_only_hint)
        allowed = read_only or _matches(remote.name, entry.always_allow)
        description = (remote.description or remote.title or remote.name)[:DESCRIPTION_LIMIT]
        name = tool_name(server, remote.name)
        remote_names[name] = remote.name
        tools[name] = Tool.described(
            name,
            _function(call, remote.name),
            description=f"[MCP server {server}] {description}",
            parameters=remote.input_schema or {"type": "object", "properties": {}},
            read_only=read_only,
            asks="never" if allowed else "always",
            time_limit=time_limit,
        )
    return tools, remote_names


def _function(call: Caller, remote: str) -> Any:
    def run(ctx: ToolContext, args: JsonArguments) -> ToolOutput:
        return call(remote, args.model_dump(), ctx.cancel)

    return run


def output(result: Any) -> ToolOutput:
    """A CallToolResult as text for the model; ToolError when the server says it failed."""
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            size = len(block.data) * 3 // 4
            parts.append(f"[{kind} {block.mime_type}, {size:,} bytes, not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        elif kind == "resource":
            text = getattr(block.resource, "text", None)
            parts.append(text if text is not None else f"[resource {block.resource.uri}, binary]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts) or "(no output)"
    if result.is_error:
        raise ToolError(text)
    return ToolOutput(text)


def _matches(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
