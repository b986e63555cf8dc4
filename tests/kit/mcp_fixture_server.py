"""An MCP server for tests, built on the SDK's low-level server API.

`python tests/kit/mcp_fixture_server.py [--http PORT | --sse PORT] [--marker TEXT]`: stdio by
default; `--marker` only tags the command line so tests can find the process in /proc.
Tools: `echo` (read-only), `write_note` (asks), `slow`, `hang`, `fail`, `crash`, `environment`.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext

TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
NOTHING: dict[str, Any] = {"type": "object", "properties": {}}
TOOLS = [
    types.Tool(
        name="echo",
        description="Say the text back.",
        input_schema=TEXT,
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(name="write_note", description="Pretend to write a note.", input_schema=TEXT),
    types.Tool(
        name="slow",
        description="Answer after `seconds`.",
        input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}},
    ),
    types.Tool(name="hang", description="Never answer.", input_schema=NOTHING),
    types.Tool(name="fail", description="Answer with an error result.", input_schema=NOTHING),
    types.Tool(name="crash", description="Exit the server process.", input_schema=NOTHING),
    types.Tool(
        name="environment",
        description="The names=values it was started with.",
        input_schema=NOTHING,
    ),
]


def text(value: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=value)], is_error=error
    )


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    args = params.arguments or {}
    if params.name == "echo":
        return text(f"echo: {args.get('text')} (pid {os.getpid()})")
    if params.name == "write_note":
        return text(f"noted: {args.get('text')}")
    if params.name == "slow":
        await anyio.sleep(float(args.get("seconds", 0.5)))
        return text("slow done")
    if params.name == "hang":
        await anyio.sleep_forever()
    if params.name == "fail":
        return text("the fixture failed on purpose", error=True)
    if params.name == "environment":
        return text("\n".join(f"{k}={v}" for k, v in sorted(os.environ.items())))
    if params.name == "crash":
        print("fixture server crashing on purpose", file=sys.stderr, flush=True)
        os._exit(3)
    return text(f"unknown tool {params.name}", error=True)


server = Server("fixture", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int)
    parser.add_argument("--sse", type=int)
    parser.add_argument("--marker", default="")
    args = parser.parse_args()
    if args.http is None and args.sse is None:
        anyio.run(serve_stdio)
        return
    import uvicorn

    if args.http is not None:
        app, port = server.streamable_http_app(host="127.0.0.1"), args.http
    else:
        app, port = sse_app(), args.sse
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def sse_app() -> Any:
    """The same tools over the older SSE transport (GET /sse, POST /messages/)."""
    from mcp.server.sse import SseServerTransport
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    sse = SseServerTransport("/messages/")

    async def handle_sse(request: Any) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return Response()

    return Starlette(
        routes=[
            Route("/sse", endpoint=handle_sse, methods=["GET"]),
            Mount("/messages/", app=sse.handle_post_message),
        ]
    )


if __name__ == "__main__":
    main()
