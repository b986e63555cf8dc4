"""The conversation's context window: what each model call sends, and condensing the history.

A call sends the system prompt, the tool schemas and the condensed view of its transcript
(history/condensed_view.py), fitted to the window by history/context_builder.py. For the
conversation's own agent the history is condensed first (core/condensation.py) when the user
asked for it or the threshold is passed; the user can also condense it between tasks.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from core.agent_specs import AgentSpec
from core.condensation import Condensation, Outcome, Trigger
from core.context_meter import ContextMeter
from core.services import AgentServices
from core.spend import Ledger, TaskSpend
from core.task import Task
from core.timeline import EventSink, Timeline
from history.condensed_view import ViewCache
from history.context_builder import BuiltContext, ContextBuilder
from history.conversation import Conversation
from model.messages import ChatMessage
from modules.tools.focus import FocusFiles
from modules.tools.process_tools import with_ended_processes
from modules.workspace.file_tree import describe_tree
from protocol.event_values import ContextUsage
from protocol.events import ContextEvent, Event, Notice
from protocol.records import MessageRecord
from utils.cancel import CancelToken, TaskCancelled
from utils.prompts import render_system_prompt

log = logging.getLogger(__name__)


class ContextWindow:
    """Builds each model call's messages within the window and condenses the history.

    A summary's `condensed` event and its record go out under the timeline's lock, so the
    record's seq is the event's. `focus` is the conversation's focus files.
    """

    def __init__(self, services: AgentServices, timeline: Timeline, focus: FocusFiles) -> None:
        self.services = services
        self._timeline = timeline
        self._focus = focus
        self._builder = ContextBuilder(services.provider.context_window)
        self._views = ViewCache()
        self.meter = ContextMeter(self._builder.limit_tokens)
        self._request: str | None = None  # instructions for the running task's next call
        self._failed: str | None = None  # trace id of a task not to condense again

    def build(self, task: Task, tools: list[dict[str, Any]]) -> tuple[list[ChatMessage], int]:
        """The messages of the task's next call and their estimated tokens."""
        if task.depth == 0:
            self._follow(task.setup.provider.context_window)
        prompt = self._system_prompt(task.conversation, task.agent, tools)
        built = self._fit(prompt, task.agent, task.transcript.path(), tools)
        if task.depth == 0:
            built = self._condense_if_due(task, prompt, tools, built)
            path = task.transcript.path()
            self.meter.built(task.trace_id, path, built, self._builder.ratio)
        return built.messages, built.estimated_tokens

    def _follow(self, window: int) -> None:
        """Measure anew in the window of the model the user changed to."""
        if window != self._builder.limit_tokens:
            self._builder = ContextBuilder(window)
            self.meter = ContextMeter(window)

    @property
    def usage(self) -> ContextUsage:
        """What the model sees on its next call, of the window (core/context_meter.py)."""
        return self.meter.usage

    def observe_usage(self, estimated: int, prompt_tokens: int, completion_tokens: int) -> None:
        """Correct the estimates by what the provider counted for a call built here."""
        self._builder.observe_usage(estimated, prompt_tokens)
        self.meter.counted(prompt_tokens, completion_tokens)

    def request(self, instructions: str | None) -> None:
        """Condense before the running task's next model call."""
        with self._timeline.lock:
            self._request = instructions or ""

    def condensable(self, conversation: Conversation | None, agent: str) -> bool:
        """Whether the conversation's path has an older turn a summary could replace."""
        path = conversation.path() if conversation else []
        condensation = self._condensation(
            path,
            "user",
            CancelToken(),
            self._timeline.report,
            agent=self.services.agents.get(agent),
        )
        return condensation.plan() is not None

    def condense_now(
        self,
        conversation: Conversation,
        agent_name: str,
        tools: list[dict[str, Any]],
        cancel: CancelToken,
        instructions: str | None = None,
    ) -> Outcome:
        """Condense the history outside any task (whose calls would offer `tools`); its
        events go out as a task's do."""
        agent = self.services.agents.get(agent_name)

        def report(event: Event) -> None:
            event.agent = agent.name
            self._timeline.report(event)

        try:
            prompt = self._system_prompt(conversation, agent, tools)
            return self._condensation(
                conversation.path(),
                "user",
                cancel,
                report,
                instructions,
                agent=agent,
                prompt=prompt,
                tools=tools,
                # no task to charge: the call still counts in the day's ledger
                spend=TaskSpend(Ledger(self.services.settings.data_dir), conversation.id),
            ).run()
        except TaskCancelled:
            return "failed"
        except Exception as exc:
            log.exception("condensing crashed")
            report(
                ContextEvent(
                    "failed",
                    "user",
                    0,
                    self._builder.limit_tokens,
                    message=f"Condensing failed: {type(exc).__name__}: {exc}",
                )
            )
            return "failed"

    def _system_prompt(
        self, conversation: Conversation, agent: AgentSpec, tools: list[dict[str, Any]]
    ) -> str:
        services = self.services
        return render_system_prompt(
            workspace_root=str(services.workspace.root),
            tree=describe_tree(services.workspace, services.annotations),
            memory=services.memory.read("main", conversation.id),
            task_memory=services.memory.read("task", conversation.id),
            focus=self._focus.contents(services.workspace),
            now=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            role=agent.system_prompt,
            skills=services.skills.catalog(),
            tools=[tool["function"]["name"] for tool in tools],
        )

    def _fit(
        self,
        prompt: str,
        agent: AgentSpec,
        path: list[MessageRecord],
        tools: list[dict[str, Any]],
    ) -> BuiltContext:
        """A root-to-leaf path as one call sends it: its condensed view, expanded, fitted."""
        services = self.services
        images = getattr(services.model_for(agent), "config", services.provider).images

        def expand(record: ChatMessage) -> ChatMessage:
            told = with_ended_processes(services.skills.expand(record))
            return services.attachments.expand(told, images=images)

        return self._builder.build(prompt, self._views.view(path, expand, images), tools=tools)

    def _condense_if_due(
        self, task: Task, prompt: str, tools: list[dict[str, Any]], built: BuiltContext
    ) -> BuiltContext:
        """Condense before this call when the user asked or the threshold is passed."""
        with self._timeline.lock:
            request, self._request = self._request, None
        threshold = self.services.settings.condense_threshold
        # also before the builder would have to leave older turns out (a small window's reserve)
        limit = min(threshold * self._builder.limit_tokens, self._builder.budget_tokens)
        due = request is not None or (
            threshold > 0 and limit <= built.full_tokens and self._failed != task.trace_id
        )
        if not due:
            return built
        condensation = self._condensation(
            task.transcript.path(),
            "user" if request is not None else "threshold",
            task.cancel,
            task.report,
            request,
            agent=task.agent,
            prompt=prompt,
            tools=tools,
            spend=task.spend,
        )
        outcome = condensation.run()
        task.usage.add(condensation.usage)
        if outcome == "failed":
            self._failed = task.trace_id
        elif outcome == "nothing" and request is not None:
            task.report(
                Notice(
                    "condense_skipped",
                    "Nothing to condense yet: the running "
                    "task and the first message are always kept.",
                )
            )
        if outcome != "condensed":
            return built
        return self._fit(prompt, task.agent, task.transcript.path(), tools)

    def _condensation(
        self,
        path: list[MessageRecord],
        trigger: Trigger,
        cancel: CancelToken,
        report: EventSink,
        instructions: str | None = None,
        *,
        agent: AgentSpec,
        prompt: str = "",
        tools: list[dict[str, Any]] | None = None,
        spend: TaskSpend | None = None,
    ) -> Condensation:
        def measure(candidate: list[MessageRecord]) -> int:
            return self._fit(prompt, agent, candidate, tools or []).full_tokens

        def commit(event: ContextEvent, record: MessageRecord) -> None:
            with self._timeline.lock:  # the record's seq is the event's
                report(event)
                self._timeline.record(
                    "system", record["content"], id=record["id"], meta=record["meta"]
                )
                self.meter.condensed(event.tokens_after or 0)

        return Condensation(
            path,
            self._builder.limit_tokens,
            self.services.model_for(agent),
            cancel,
            report,
            measure,
            commit,
            trigger,
            instructions,
            spend,
        )
