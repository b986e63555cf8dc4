"""Repeats that waste money: the same tool call giving the same result again and again, and the
same reply as the call before. The first time, the model is warned by a note in its next
request; if the repeat goes on, the task ends with `done` reason `loop` (RepeatLoop). A reply
looping within itself is caught while it streams (core/text_loops.py).

Legitimate repetition is not a repeat here: the same call with a different result (polling a
file that changes, re-reading a file after editing it) is a new call.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from dataclasses import dataclass, field

from model.completion import Completion

# The same call with the same result: the second may be a deliberate check, the third gives
# the model nothing it did not have; two more after the warning means the warning went unheard.
CALL_REPEAT_WARN = 3
CALL_REPEAT_STOP = 5
# How far back a repeated call counts: repeats need not be adjacent (A, B, A, B, ...), but a
# call made again long after, with much work between, is not the same loop.
RECENT_CALLS = 30

# The same reply as the call before, word for word and with the same calls (at least
# SAME_REPLY_CHARS of text, so a short "Checking again." before polling a file is never one):
# warned the first time, the task ended on the third reply in a row.
SAME_REPLY_CHARS = 200
SAME_REPLY_STOP = 3
QUOTE_CHARS = 80  # how much of a repeated passage a message quotes


class RepeatLoop(Exception):
    """The task repeats itself past its warning; the message says what and how many times."""

    code = "loop_detected"


@dataclass
class RepeatWatch:
    """One task's record of its recent calls and replies, and the note owed to the model."""

    _calls: deque[str] = field(default_factory=lambda: deque(maxlen=RECENT_CALLS))
    _warned_calls: set[str] = field(default_factory=set)
    _last_reply: str = ""
    _same_replies: int = 0
    _note: str = ""
    _stop: str = ""

    def after_reply(self, reply: Completion) -> None:
        """Look at a finished model reply: the same as the one before warns the model, a third
        in a row stops the task after its calls ran (`raise_if_stopped`). A reply without
        calls ended by itself and is the task's answer: never relabelled a loop."""
        if not reply.tool_calls:
            self._last_reply, self._same_replies = "", 0
            return
        calls = "".join(c.name + _normal_arguments(c.arguments) for c in reply.tool_calls)
        self._check_same_reply(_normal(reply.content + "\n" + reply.reasoning_content), calls)

    def after_call(self, name: str, arguments: str, ok: bool, output: str) -> str:
        """Record one call's result; returns the note to append to that result for the model
        (a warning, or one held from its reply), "" when there is none."""
        key = _digest(name, _normal_arguments(arguments), str(ok), output)
        self._calls.append(key)
        count = self._calls.count(key)
        if count >= CALL_REPEAT_STOP:
            self._stop = (
                f"The model called {name} with the same arguments {count} times and got "
                f"the same result each time: {_quote(arguments)}."
            )
        elif count >= CALL_REPEAT_WARN and key not in self._warned_calls:
            self._warned_calls.add(key)
            self._warn(
                f"{name} has now been called {count} times with these same arguments and "
                "gave the same result each time. Calling it again will not change it"
            )
        note, self._note = self._note, ""
        return note

    def raise_if_stopped(self) -> None:
        """End the task (RepeatLoop) once a repeat went on past its warning."""
        if self._stop:
            raise RepeatLoop(self._stop + " The task was stopped so as not to spend more.")

    def _check_same_reply(self, text: str, calls: str) -> None:
        signature = _digest(text, calls)
        same = len(text) >= SAME_REPLY_CHARS and signature == self._last_reply
        self._same_replies = self._same_replies + 1 if same else 1
        self._last_reply = signature
        if self._same_replies >= SAME_REPLY_STOP:
            self._stop = (
                f"The model gave the same reply {self._same_replies} times in a row: "
                f"{_quote(text)}."
            )
        elif same:
            self._warn("your last reply was word for word the one before. Do not repeat it")

    def _warn(self, what: str) -> None:
        self._note += (
            f"\n\n[warning] {what}: change approach or finish the task; if this goes on, "
            "the task will be stopped."
        )


def _normal(text: str) -> str:
    return " ".join(text.split())


def _normal_arguments(arguments: str) -> str:
    """The arguments as one spelling of their JSON: key order and spacing do not count."""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return arguments.strip()


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def _quote(text: str) -> str:
    text = _normal(text)
    return f'"{text[:QUOTE_CHARS]}…"' if len(text) > QUOTE_CHARS else f'"{text}"'
