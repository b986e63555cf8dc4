"""What lands on disk (docs/protocol.md §5): message records and meta.json, as history keeps
them and get_conversation and list_conversations (§4.1) send them. They are JSON on disk and
on the wire, so they are TypedDicts: plain dicts at run time, checked by mypy. Nothing here
validates what is read from disk."""

from typing import Any, Literal, NotRequired, TypedDict

from protocol.options import Approval, Mode

Role = Literal["system", "user", "assistant", "tool"]

# --- a message record (messages.jsonl, one per line) ----------------------------------------


class FunctionCall(TypedDict):
    name: str
    arguments: str  # JSON text as the model sent it


class ToolCallRecord(TypedDict):
    """One call of an assistant record's `tool_calls`."""

    id: str
    type: Literal["function"]
    function: FunctionCall


class MoneyWire(TypedDict):
    amount: float
    currency: str


class TokenUsage(TypedDict):
    """A model call's `usage`, as records and task ends keep it and `done` sends it (§4.2)."""

    prompt_tokens: int
    completion_tokens: int
    estimated: NotRequired[bool]  # true: our estimate, the server sent no usage
    cached_prompt_tokens: NotRequired[int]  # of prompt_tokens, read from the provider's cache
    cost: NotRequired[MoneyWire | None]  # a task end's: null when a price is unknown


StepStatus = Literal["pending", "running", "done", "failed"]


class PlanStepMeta(TypedDict):
    index: int
    title: str
    status: StepStatus
    summary: NotRequired[str]


class PlanMeta(TypedDict):
    """A plan_execute agent's whole plan (§8), as `meta.plan` keeps it and `plan` events send
    it."""

    revision: int
    steps: list[PlanStepMeta]


class EndedProcessMeta(TypedDict):
    """A background process that ended when the server stopped, told to the model with the
    next user message of its conversation (modules/tools/process_tools.py words it)."""

    id: str
    command: str


class AttachmentMeta(TypedDict):
    """One attached file (§11): modules/uploads/attachments.py's Attachment, as JSON."""

    path: str
    name: str
    size: int
    kind: str
    sha256: str
    chars: int
    truncated: bool
    note: str
    mime: str


class ProposalMeta(TypedDict):
    id: str
    path: str
    diff: str


class SummaryMeta(TypedDict):
    """A summary record's `meta.summary` (§12)."""

    first_kept_id: str
    summarized: int
    trigger: str  # threshold | user
    tokens_before: int
    tokens_after: int
    previous_id: NotRequired[str]
    instructions: NotRequired[str]


class MessageMeta(TypedDict, total=False):
    """The `meta` keys the program writes on records (§5), each on some roles only."""

    skill: str  # user
    attachments: list[AttachmentMeta]  # user
    processes_ended: list[EndedProcessMeta]  # user: ended with the server since the last task
    plan_prompt: str  # user: created | replanned | finish | final
    plan_step: int  # user
    plan: PlanMeta  # user (with plan_prompt or plan_step), tool (make_plan, finish_step)
    usage: TokenUsage  # assistant
    interrupted: str | bool  # assistant: cancelled | stream_cut | loop; tool: true
    ok: bool  # tool
    declined: bool  # tool: true when the user declined the call (it did not run)
    cancelled: bool  # tool: true when the user's stop cut the call (it did not finish)
    unchanged: bool  # tool: true when the call found nothing to change (propose_edit)
    duration_ms: int  # tool
    proposal: ProposalMeta  # tool (propose_edit)
    agent: str  # tool (a delegation)
    summary: SummaryMeta  # system


class MessageRecord(TypedDict):
    """One line of messages.jsonl."""

    id: str
    conversation_id: str
    parent_id: str | None
    depth: int
    version: int
    role: Role
    content: str
    reasoning_content: NotRequired[str]
    tool_calls: NotRequired[list[ToolCallRecord]]
    tool_call_id: NotRequired[str]
    name: NotRequired[str]
    created_at: str  # ISO-8601 UTC with a Z
    meta: MessageMeta
    seq: NotRequired[int]  # the seq of the last event before it


# --- meta.json ------------------------------------------------------------------------------


class TaskEnd(TypedDict):
    """How a task ended: its `done`'s reason and the tokens it used."""

    reason: str
    usage: TokenUsage
    budget: NotRequired[dict[str, Any]]  # a `budget` end's: done.budget


class ConversationState(TypedDict, total=False):
    """meta.json's free-form `meta`: what the conversation was last run with, and more."""

    mode: Mode  # as this program wrote it: one read back is checked
    approval: Approval
    agent: str
    focus: list[str]
    title_by_user: bool
    last_seq: int
    seq_reserved: int  # no event outside a task had a higher seq (core/timeline.py)
    task_ends: dict[str, TaskEnd]  # by the id of the task's user message


class ConversationMeta(TypedDict):
    """meta.json."""

    id: str
    title: str | None
    agent_type: str
    created_at: str
    updated_at: str
    meta: ConversationState


class ConversationHit(ConversationMeta):
    """A search result (list_conversations with a `query`, §4.1): the conversation's meta and
    the words around the hit ("" for a title), also cut at each hit (odd items are the matched
    text; [] for a title)."""

    snippet: str
    snippet_parts: list[str]
