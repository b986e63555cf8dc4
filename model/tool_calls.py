"""Tool calls as a stream delivers them: fragments assembled by index into whole calls."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from protocol.records import ToolCallRecord


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model sent it

    def to_message(self) -> ToolCallRecord:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass
class ToolCallStarted:
    index: int
    call_id: str
    name: str


@dataclass
class ToolCallArgs:
    index: int
    call_id: str
    delta: str


def field_of(obj: Any, name: str) -> Any:
    """Read `name` from an SDK object or a plain dict alike."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


@dataclass
class _PartialCall:
    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""
    started: bool = False


class ToolCallAssembler:
    """Rebuilds streamed tool calls from their fragments, reporting starts and argument text.

    A call is reported as started once its name is complete, i.e. when its first argument
    text arrives (or at `finish()`), because a few providers split the name.
    """

    def __init__(self) -> None:
        self._calls: list[_PartialCall] = []
        self._by_index: dict[int, _PartialCall] = {}  # the provider's index -> latest call
        self._by_id: dict[str, _PartialCall] = {}

    def feed(self, fragment: Any) -> list[ToolCallStarted | ToolCallArgs]:
        """Take one `delta.tool_calls[]` entry (SDK object or dict); return what it completes."""
        call = self._call_for(field_of(fragment, "index"), field_of(fragment, "id") or "")
        function = field_of(fragment, "function")
        name = field_of(function, "name") or ""
        arguments = field_of(function, "arguments") or ""
        if name and name != call.name and not call.started:
            call.name += name
        call.arguments += arguments
        if call.started:
            return [ToolCallArgs(call.index, call.id, arguments)] if arguments else []
        if not arguments:
            return []
        return [self._start(call), ToolCallArgs(call.index, call.id, call.arguments)]

    def finish(self) -> list[ToolCallStarted]:
        """Report the calls that never received argument text."""
        return [self._start(call) for call in self._calls if not call.started]

    def calls(self) -> list[ToolCall]:
        """The assembled calls in index order; empty arguments become "{}"."""
        ordered = sorted(self._calls, key=lambda call: call.index)
        return [ToolCall(_own_id(call), call.name, call.arguments or "{}") for call in ordered]

    def _start(self, call: _PartialCall) -> ToolCallStarted:
        call.started = True
        return ToolCallStarted(call.index, _own_id(call), call.name)

    def _call_for(self, index: int | None, call_id: str) -> _PartialCall:
        if call_id in self._by_id:
            return self._by_id[call_id]
        if index is not None:
            known = self._by_index.get(index)
        else:  # no index: a fragment without an id continues the latest call
            known = self._calls[-1] if self._calls and not call_id else None
        if known is not None and not (call_id and known.id):
            if call_id:
                known.id = call_id
                self._by_id[call_id] = known
            return known
        taken = {call.index for call in self._calls}
        slot = index if index is not None and index not in taken else max(taken, default=-1) + 1
        call = _PartialCall(slot, call_id)
        self._calls.append(call)
        self._by_index[slot if index is None else index] = call
        if call_id:
            self._by_id[call_id] = call
        return call


def _own_id(call: _PartialCall) -> str:
    """The call's id; one of ours, unique in the conversation, for a server that sent none
    (the history and the page know a call by its id)."""
    if not call.id:
        call.id = f"call_{call.index}_{secrets.token_hex(6)}"
    return call.id


def assemble_tool_calls(fragments: Iterable[Any]) -> list[ToolCall]:
    """Assemble complete tool calls from every `delta.tool_calls[]` fragment of one stream."""
    assembler = ToolCallAssembler()
    for fragment in fragments:
        assembler.feed(fragment)
    return assembler.calls()
