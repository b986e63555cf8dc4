"""A Python client of the web workspace (docs/protocol.md): `Client` (threads) and
`AsyncClient` (asyncio), with the typed events of protocol/events.py."""

from protocol.events import (
    ContextEvent,
    ConversationUpdate,
    Done,
    Error,
    Event,
    FileTree,
    Notice,
    PlanEvent,
    Process,
    Status,
    Thinking,
    Token,
    ToolEvent,
    Unknown,
    UserMessage,
    parse_event,
)
from protocol.processes import BackgroundProcess, ProcessOutput
from workspace_client.aio import AsyncClient
from workspace_client.client import Client, Started, WorkspaceError
from workspace_client.connection import ConnectionRefused, Disconnected
from workspace_client.stream import Reloaded

__all__ = [
    "AsyncClient",
    "BackgroundProcess",
    "Client",
    "ConnectionRefused",
    "ContextEvent",
    "ConversationUpdate",
    "Disconnected",
    "Done",
    "Error",
    "Event",
    "FileTree",
    "Notice",
    "PlanEvent",
    "Process",
    "ProcessOutput",
    "Reloaded",
    "Started",
    "Status",
    "Thinking",
    "Token",
    "ToolEvent",
    "Unknown",
    "UserMessage",
    "WorkspaceError",
    "parse_event",
]
