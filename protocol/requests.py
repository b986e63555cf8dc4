"""The client's events and their payloads (docs/protocol.md §4.1, the MCP panel's of §10), as
the server validates them: a payload that does not fit is refused with `bad_request`, its
message saying why. A client may build what it sends with them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StrictBool, StringConstraints, model_validator

from protocol.budgets import BudgetOverride
from protocol.options import MAX_ATTACHMENTS, MAX_FOCUS, Approval, MemoryScope, Mode

Id = Annotated[str, Field(min_length=1, max_length=128)]  # ours are 32; the model's a few more
WorkspacePath = Annotated[str, Field(max_length=4096)]
WorkspacePaths = Annotated[list[WorkspacePath], Field(max_length=10_000)]
Title = Annotated[str, Field(min_length=1, max_length=200)]

# --- tasks ----------------------------------------------------------------------------------


class SendMessage(BaseModel):
    conversation_id: Id | None = None
    text: str = Field(min_length=1, max_length=200_000)
    mode: Mode | None = None
    parent_id: Id | None = None
    approval: Approval | None = None
    agent: Id | None = None
    skill: Id | None = None
    focus: list[WorkspacePath] | None = Field(None, max_length=MAX_FOCUS)
    # workspace paths (POST /api/upload answers them); their text goes to the model
    attachments: list[Annotated[str, Field(min_length=1, max_length=4096)]] | None = Field(
        None, max_length=MAX_ATTACHMENTS
    )
    budget_override: BudgetOverride | None = None  # a higher limit for this task only


class ConversationRef(BaseModel):
    conversation_id: Id


class Cancel(ConversationRef):
    pass


class Approve(ConversationRef):
    call_id: Id
    approved: bool
    always: bool = False


class RevokeApproval(ConversationRef):
    tool: Id


class Join(ConversationRef):
    after_seq: int = 0


class Compact(ConversationRef):
    instructions: str | None = Field(None, max_length=2000)  # what the summary should keep


# --- reading --------------------------------------------------------------------------------


class Empty(BaseModel):
    pass


class ListConversations(BaseModel):
    query: str | None = Field(None, max_length=200)  # search titles and messages


class StatusRequest(BaseModel):
    conversation_id: Id | None = None


# --- undo and proposed edits ----------------------------------------------------------------


class UndoTask(ConversationRef):
    message_id: Id | None = None
    # paths changed since the task are left as they are, unless named here (true: all)
    overwrite: StrictBool | WorkspacePaths = False


class UndoPreviewRequest(ConversationRef):
    message_id: Id | None = None


class EditRef(ConversationRef):
    proposal_id: Id


# --- conversations, focus, memory -----------------------------------------------------------


class Rename(ConversationRef):
    title: Title


class Focus(ConversationRef):
    path: str = Field(min_length=1, max_length=4096)


class MemoryRef(BaseModel):
    conversation_id: Id | None = None


class SetMemory(MemoryRef):
    scope: MemoryScope
    content: str = Field(max_length=200_000)  # the store's own limit is smaller and says so


# --- the MCP panel (§10) --------------------------------------------------------------------

ServerName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
Text = Annotated[str, Field(min_length=1, max_length=4096)]
Variables = Annotated[
    dict[
        Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_-]{0,127}$")],
        Annotated[str, Field(max_length=8192)],
    ],
    Field(max_length=100),
]


class ServerRef(BaseModel):
    name: Annotated[str, Field(min_length=1, max_length=200)]


class SetEnabled(ServerRef):
    enabled: bool


class AddServer(BaseModel):
    """A stdio server (`command`, `args`, `env`) or a remote one (`url`, `transport`, `headers`)."""

    name: ServerName
    command: Text | None = None
    args: Annotated[list[Annotated[str, Field(max_length=4096)]], Field(max_length=100)] = []
    env: Variables = {}
    url: Annotated[str, Field(pattern=r"^https?://", max_length=4096)] | None = None
    transport: Literal["http", "sse"] = "http"
    headers: Variables = {}

    @model_validator(mode="after")
    def _one_target(self) -> AddServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (a local server) or `url` (a remote one)")
        if self.url is None and self.headers:
            raise ValueError("`headers` go with a `url`; a command gets `env`")
        if self.command is None and (self.args or self.env):
            raise ValueError("`args` and `env` go with a `command`; a URL gets `headers`")
        return self

    def entry(self) -> dict[str, Any]:
        """The `mcpServers` entry, as the user typed it."""
        if self.command is not None:
            return {
                "command": self.command,
                **({"args": self.args} if self.args else {}),
                **({"env": self.env} if self.env else {}),
            }
        return {
            "type": self.transport,
            "url": self.url,
            **({"headers": self.headers} if self.headers else {}),
        }


class ProcessRef(ConversationRef):
    """A background process of a conversation (§4.1 list_processes and what follows it)."""

    process_id: Annotated[str, Field(min_length=1, max_length=32)]


class ProcessOutputRequest(ProcessRef):
    offset: Annotated[int, Field(ge=0)] = 0


class OpenApp(ConversationRef):
    """An app of the conversation to open (§4.1 open_app): the port a background process
    listens on, named by the process (its first port), the port, or both."""

    process_id: Annotated[str, Field(min_length=1, max_length=32)] | None = None
    port: Annotated[int, Field(ge=1, le=65535)] | None = None

    @model_validator(mode="after")
    def _something_to_open(self) -> OpenApp:
        if self.process_id is None and self.port is None:
            raise ValueError("give `process_id`, `port` or both")
        return self


# --- the user's settings (get_settings takes Empty) ----------------------------------------


class SetSettings(BaseModel):
    """`set_settings`: each setting to change by its name (`model`, `api_key`, ...); null or
    "" takes it out of the settings file. Which names and values are good is the server's
    Settings: it names each it refuses."""

    settings: dict[Annotated[str, Field(max_length=64)], Any] = Field(min_length=1, max_length=32)
