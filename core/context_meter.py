"""The context meter: how many tokens the model sees on its next call, as a task goes on.

A call's figure is the provider's count of an earlier call on the same path plus an estimate
of what was added since (its answer, tool results, a changed system prompt), or the estimate
alone when no count applies (a first call, another branch, a condensed history). Within a task
the figure never goes down: a count below an estimate shown before leaves it where it was. A
new task and a condensation start it afresh, so only they can lower it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from history.context_builder import BuiltContext
from protocol.event_values import ContextUsage
from protocol.records import MessageRecord


@dataclass(frozen=True)
class _Call:
    """A model call as built: where its path ended, its raw estimate, what the provider counted."""

    leaf_id: str | None
    size: int
    raw_tokens: float
    prompt_tokens: int = 0

    def continued_by(self, path: Sequence[MessageRecord]) -> bool:
        """Whether `path` is this call's path with records added after it."""
        if self.size > len(path):
            return False
        return self.size == 0 or path[self.size - 1].get("id") == self.leaf_id


class ContextMeter:
    """The figure the status bar shows (`usage`), kept up to date by the context window."""

    def __init__(self, limit_tokens: int) -> None:
        self.usage = ContextUsage(0, limit_tokens)
        self._task: str | None = None
        self._floor = 0  # the highest figure shown during the task
        self._built: _Call | None = None  # the newest call, until the provider counts it
        self._counted: _Call | None = None  # the newest call the provider counted

    def built(
        self, task_id: str, path: Sequence[MessageRecord], built: BuiltContext, ratio: float
    ) -> None:
        """A call of task `task_id` is about to send `built`, made from `path`."""
        if task_id != self._task:
            self._task, self._floor = task_id, 0
        self._built = _Call(path[-1]["id"] if path else None, len(path), built.raw_tokens)
        counted = self._counted
        if counted is not None and counted.continued_by(path):
            added = max(0.0, built.raw_tokens - counted.raw_tokens) * ratio
            self._show(counted.prompt_tokens + math.ceil(added))
        else:
            self._show(built.estimated_tokens)

    def counted(self, prompt_tokens: int, completion_tokens: int) -> None:
        """The provider's usage of the newest call: its prompt, then its answer, are in the
        context of the next."""
        if self._built is None or prompt_tokens <= 0:
            return
        self._counted = replace(self._built, prompt_tokens=prompt_tokens)
        self._show(prompt_tokens + completion_tokens)

    def condensed(self, tokens_after: int) -> None:
        """A summary replaced older turns: the figure starts again from its estimate."""
        self._built = self._counted = None
        self._floor = 0
        self._show(tokens_after)

    def _show(self, tokens: int) -> None:
        self._floor = max(self._floor, tokens)
        self.usage = ContextUsage(self._floor, self.usage.limit_tokens)
