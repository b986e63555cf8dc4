"""The internals of the SDKs the other servers are built on: mcp's streamable HTTP sessions,
uvicorn's signals."""

from __future__ import annotations

import inspect
from typing import Any

import uvicorn
import uvicorn.server
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from tests.internals.kit import Checks, parameters, same_code

internal = Checks()


# mcp


@internal(
    "mcp",
    "mcp.server.streamable_http_manager.StreamableHTTPSessionManager's sessions",
    "mcp_server/http.py",
    "_admit_session(requestor) making a new session's transport (or None) before any request "
    "reads the transport's `_event_store`, which we set; async _discard_session(session_id, "
    "transport) at every end of a session",
)
def check_mcp_sessions() -> None:
    manager = StreamableHTTPSessionManager
    assert parameters(manager._admit_session) == ["self", "requestor"]
    assert parameters(manager._discard_session) == ["self", "session_id", "transport"]
    assert inspect.iscoroutinefunction(manager._discard_session)
    same_code(manager._admit_session, "be70a49c7998add8")
    same_code(manager._discard_session, "29912d64573817be")
    store: Any = object()
    transport = StreamableHTTPServerTransport(mcp_session_id="s", event_store=store)
    assert transport._event_store is store, "the transport keeps its event store elsewhere"


# uvicorn


@internal(
    "uvicorn",
    "uvicorn.Server.capture_signals",
    "web/asgi.py",
    "serve() installing signal handlers only through capture_signals(), a context manager we "
    "replace with one that installs none (the web server keeps SIGINT and SIGTERM)",
)
def check_uvicorn_signals() -> None:
    assert "with self.capture_signals():" in inspect.getsource(uvicorn.Server.serve)
    capturing = inspect.getsource(uvicorn.Server.capture_signals).count("signal.signal(")
    everywhere = inspect.getsource(uvicorn.server).count("signal.signal(")
    assert capturing and capturing == everywhere, "it sets signal handlers elsewhere too"
