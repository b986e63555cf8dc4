"""One condensation of a conversation's context: the summary call, its events, its record.

Where the history may be cut and what the model then sees is history/condensed_view.py's; this
module runs it: `condensing`, the summary call (no tools, no thinking), then `condensed` with
the summary record, or `failed` and a notice, the history untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from core.services import ModelClient
from core.spend import TaskSpend, counted, estimated_prompt, estimated_usage
from history.condensed_view import Cut, clean_summary, plan_cut, summary_meta, summary_request
from history.context_builder import CHARS_PER_TOKEN
from history.message_record import message_record
from model.completion import ContentDelta, StreamEnd
from model.errors import ApiError
from protocol.event_values import Usage
from protocol.events import ContextEvent, ContextPhase, Event, Notice
from protocol.records import MessageRecord, SummaryMeta
from utils.cancel import CancelToken, TaskCancelled

KEEP_SHARE = 0.25  # of the window: what the turns kept after the cut may fill
REQUEST_SHARE = 0.6  # of the window: what the summary call's request may fill
REQUEST_MAX_CHARS = 600_000  # however large the window: a summary of more reads poorly

Trigger = Literal["threshold", "user"]
Outcome = Literal["condensed", "nothing", "failed"]


class EmptySummary(ApiError):
    code = "empty_summary"


@dataclass
class Condensation:
    """Condense `path` (the conversation's current root-to-leaf path) once.

    `measure(path)` estimates the tokens the next model call would send for a path (its
    condensed view, in full); `commit(event, record)` reports `condensed` and appends the
    summary record as one step, so the record's seq is that event's.
    """

    path: list[MessageRecord]
    window: int
    model: ModelClient
    cancel: CancelToken
    report: Callable[[Event], None]
    measure: Callable[[list[MessageRecord]], int]
    commit: Callable[[ContextEvent, MessageRecord], None]
    trigger: Trigger
    instructions: str | None = None
    spend: TaskSpend | None = None  # where the summary call's tokens and cost are recorded
    usage: Usage = field(default_factory=Usage)

    def plan(self) -> Cut | None:
        """Where the path would be cut; None when there is nothing older to summarise.

        Asked by the user, everything but the first message and the newest turn is summarised;
        at the threshold, the recent turns that fit KEEP_SHARE of the window stay as they are.
        """
        keep = KEEP_SHARE * self.window if self.trigger == "threshold" else 0
        return plan_cut(self.path, keep_tokens=keep)

    def run(self) -> Outcome:
        """Summarise; TaskCancelled goes through, a failed call leaves the history as it was."""
        cut = self.plan()
        if cut is None:
            return "nothing"
        before = self.measure(self.path)

        def event(phase: ContextPhase, **fields: Any) -> ContextEvent:
            return ContextEvent(phase, self.trigger, before, self.window, **fields)

        self.report(event("condensing"))
        try:
            text = self._summarise(cut)
        except TaskCancelled:
            self.report(event("failed", message="Condensing was stopped."))
            raise
        except ApiError as exc:
            return self._fail(
                event, f"The context could not be condensed, so it stays as it was: {exc}"
            )
        earlier = summary_meta(cut.previous) if cut.previous else None
        summarized = len(cut.replaced) + (earlier.get("summarized", 0) if earlier else 0)
        summary: SummaryMeta = {
            "first_kept_id": cut.first_kept["id"],
            "summarized": summarized,
            "trigger": self.trigger,
            "tokens_before": before,
            "tokens_after": before,  # measured below, with the summary in place
        }
        if cut.previous:
            summary["previous_id"] = cut.previous["id"]
        if self.instructions:
            summary["instructions"] = self.instructions
        record = _summary_record(self.path, text, summary)
        summary["tokens_after"] = after = self.measure([*self.path, record])
        if after >= before:
            return self._fail(
                event,
                "The summary came out no shorter than what it would "
                "replace, so the context stays as it was.",
            )
        self.commit(
            event(
                "condensed",
                tokens_after=after,
                message_id=record["id"],
                first_kept_id=cut.first_kept["id"],
                summarized=summarized,
                summary=text,
            ),
            record,
        )
        return "condensed"

    def _fail(self, event: Callable[..., ContextEvent], message: str) -> Outcome:
        self.report(event("failed", message=message))
        self.report(Notice("condense_failed", message))
        return "failed"

    def _summarise(self, cut: Cut) -> str:
        limit = min(REQUEST_MAX_CHARS, int(REQUEST_SHARE * self.window * CHARS_PER_TOKEN))
        messages = summary_request(self.path, cut, instructions=self.instructions, max_chars=limit)
        parts: list[str] = []
        for item in self.model.stream(
            messages, [], thinking=False, cancel=self.cancel, on_wait=self._on_wait
        ):
            if isinstance(item, ContentDelta):
                parts.append(item.text)
            elif isinstance(item, StreamEnd):
                completion = item.completion
                if not counted(completion.usage):
                    completion.usage = estimated_usage(estimated_prompt(messages), completion)
                self.usage.add(completion.usage)
                if self.spend is not None:
                    self.spend.record(completion.model, completion.usage, completion.price)
        text = clean_summary("".join(parts))
        if not text:
            raise EmptySummary("the model wrote an empty summary")
        return text

    def _on_wait(self, seconds: float, text: str) -> None:
        self.report(Notice("retrying", text, seconds))


def _summary_record(path: list[MessageRecord], text: str, summary: SummaryMeta) -> MessageRecord:
    """The summary as it will be stored at the leaf, measured before it is (a path to cut is
    never empty)."""
    leaf = path[-1]
    return message_record(
        leaf["conversation_id"], "system", text, parent=leaf, meta={"summary": summary}
    )
