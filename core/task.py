"""One task, a user message's run: everything that lives exactly as long as it does.

A sub-agent's run is a Task too: it shares its parent's cancel token, usage, journal and
approvals, but has its own agent, budget and transcript (kept in memory: only its final
report reaches the parent's history), and its events say whose they are.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.agent_specs import AgentSpec
from core.budgets import BudgetGuard
from core.model_setup import ModelSetup
from core.repeats import RepeatWatch
from core.spend import TaskSpend
from core.timeline import EventSink, Timeline
from history.conversation import Conversation
from history.message_record import message_record
from model.completion import CallStarted, Completion
from modules.undo.journal import TaskJournal
from protocol.event_values import Usage
from protocol.events import DoneReason, Event
from protocol.options import Approval, Mode
from protocol.records import MessageRecord, Role
from utils.cancel import CancelToken

MAX_DEPTH = 2  # a sub-agent's sub-agent is as deep as delegation goes


class Transcript(Protocol):
    """The messages a task's model calls read and its steps append to."""

    def path(self) -> list[MessageRecord]: ...

    def append(self, role: Role, content: str, **fields: Any) -> MessageRecord: ...


class MemoryTranscript:
    """A sub-agent's fresh message list, kept only while it runs: records shaped as stored
    ones, each under the one before."""

    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        self.records: list[MessageRecord] = []

    def path(self) -> list[MessageRecord]:
        return list(self.records)

    def append(self, role: Role, content: str, **fields: Any) -> MessageRecord:
        parent = self.records[-1] if self.records else None
        record = message_record(self.conversation_id, role, content, parent=parent, **fields)
        self.records.append(record)
        return record


class StoredTranscript:
    """The top agent's transcript: its conversation's path, appended through the timeline
    (which stamps each record with its seq)."""

    def __init__(self, timeline: Timeline) -> None:
        self._timeline = timeline

    def path(self) -> list[MessageRecord]:
        conversation = self._timeline.conversation
        return conversation.path() if conversation is not None else []

    def append(self, role: Role, content: str, **fields: Any) -> MessageRecord:
        return self._timeline.record(role, content, **fields)


@dataclass
class Task:
    """A running task: whose it is, what it may use, its cancel token, journal and counters."""

    conversation: Conversation
    user_record: MessageRecord
    journal: TaskJournal
    mode: Mode
    approval: Approval
    agent: AgentSpec
    transcript: Transcript
    sink: EventSink  # the terminal's: stamps conversation and seq
    setup: ModelSetup  # the settings and model clients of its start, kept to its end
    cancel: CancelToken = field(default_factory=CancelToken)
    usage: Usage = field(default_factory=Usage)
    spend: TaskSpend | None = None  # its calls' cost, shared with its sub-agents
    depth: int = 0
    parent_call_id: str | None = None
    iteration: int = 0
    trace_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    budgets: BudgetGuard | None = None  # the top task's, its sub-agents' too
    budget_reached: dict[str, Any] | None = None  # BudgetReached.details() of its end
    repeats: RepeatWatch = field(default_factory=RepeatWatch)

    def report(self, event: Event) -> None:
        """Send an event, saying which agent it comes from and, in a sub-agent, whose call."""
        event.agent = self.agent.name
        if self.depth:
            event.parent_call_id, event.depth = self.parent_call_id, self.depth
        self.sink(event)

    def child(self, agent: AgentSpec, parent_call_id: str) -> Task:
        """A sub-agent's task under this one, on a fresh transcript."""
        return Task(
            self.conversation,
            self.user_record,
            self.journal,
            self.mode,
            self.approval,
            agent,
            MemoryTranscript(self.conversation.id),
            self.sink,
            self.setup,
            self.cancel,
            self.usage,
            depth=self.depth + 1,
            parent_call_id=parent_call_id,
            trace_id=self.trace_id,
            spend=self.spend,
            budgets=self.budgets,
        )

    def thinks(self) -> bool:
        """Seed policy: `thinking` thinks on the first model call of a task only."""
        wants = self.agent.thinking if self.agent.thinking is not None else self.mode == "thinking"
        return wants and self.iteration == 1


@dataclass
class LoopEnd:
    """How a task's tool loop ended: `complete` (an answer without tool calls, or a call that
    ends the loop) or `max_iterations`, with the last reply."""

    reason: DoneReason
    reply: Completion | None = None


@dataclass
class StreamProgress:
    """What one model call has streamed so far, kept for an answer that gets interrupted."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_names: dict[str, str] = field(default_factory=dict)
    call: CallStarted | None = None

    def partial(self) -> Completion:
        model, price = (self.call.model, self.call.price) if self.call else ("", None)
        content, reasoning = "".join(self.content), "".join(self.reasoning)
        return Completion(content=content, reasoning_content=reasoning, model=model, price=price)
