"""The page's list of server events is the server's; its payload typedefs have the server's fields.

The server's events are the `Event` subclasses of protocol/events.py (each `name`, its fields as
`to_wire` sends them) and the names web/ emits itself (`conversation_update`, `deltas`, ...).
The page's are `SERVER_EVENTS` and `DELTAS_EVENT` in static/js/events.js, with a JSDoc typedef
per payload (`ServerEventMap`). Both sides are read from their files: nothing ties them otherwise.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from protocol import events
from protocol.event_values import Usage

ROOT = Path(__file__).resolve().parent.parent
PAGE_EVENTS = ROOT / "static" / "js" / "events.js"
CONNECTION = ROOT / "static" / "js" / "connection.js"
WEB_EMITTERS = [*sorted((ROOT / "web").rglob("*.py")), ROOT / "web_server.py"]
EMIT_CALLS = {"emit", "_emit"}
JS_STRING = re.compile(r'"([^"\\]*)"')


# protocol/events.py's events that the core does not send: what a client reads of web/'s
# conversation_update, and what the decoder makes of an event it does not know.
READ_ONLY = (events.ConversationUpdate, events.Unknown)


def core_event_classes() -> dict[str, type[events.Event]]:
    """Every Event subclass protocol/events.py defines with a wire name and the core sends, by
    that name (the client library's own, in workspace_client, are not the server's)."""
    found: dict[str, type[events.Event]] = {}
    pending = list(events.Event.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.name and cls.__module__ == events.__name__ and cls not in READ_ONLY:
            assert found.setdefault(cls.name, cls) is cls, f"two events named {cls.name!r}"
    return found


def web_emitted_names() -> dict[str, list[str]]:
    """The event names web/ passes as a literal to an `emit`/`_emit` call, with where."""
    names: dict[str, list[str]] = {}
    for path in WEB_EMITTERS:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func, first = node.func, node.args[0]
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if (
                called in EMIT_CALLS
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
            ):
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                names.setdefault(first.value, []).append(where)
    return names


def server_event_names() -> dict[str, str]:
    """Every event name the server sends, with where it comes from."""
    sources = {
        name: f"protocol/events.py {cls.__name__}" for name, cls in core_event_classes().items()
    }
    for name, places in web_emitted_names().items():
        sources.setdefault(name, ", ".join(places))
    return sources


def js_const(source: str, name: str) -> str:
    """The text of `export const NAME = ...;` in the page's events file."""
    match = re.search(rf"^export const {name}\b[^=]*=\s*(.*?);\s*$", source, re.M | re.S)
    assert match, f"static/js/events.js has no `export const {name} = ...;`"
    return match.group(1)


def page_event_names() -> list[str]:
    source = PAGE_EVENTS.read_text(encoding="utf-8")
    listed = JS_STRING.findall(js_const(source, "SERVER_EVENTS"))
    deltas = JS_STRING.findall(js_const(source, "DELTAS_EVENT"))
    assert len(deltas) == 1, "DELTAS_EVENT should be one string"
    return [*listed, *deltas]


def typedefs() -> dict[str, tuple[str, str]]:
    """Each typedef of the page's events file, by name: its type expression and its JSDoc block."""
    source = PAGE_EVENTS.read_text(encoding="utf-8")
    blocks: dict[str, tuple[str, str]] = {}
    for block in re.findall(r"/\*\*(.*?)\*/", source, re.S):
        match = re.search(r"@typedef \{(.*)\} (\w+)\s*$", block, re.M)
        if match:
            blocks[match.group(2)] = (match.group(1), block)
    return blocks


def typedef_fields(name: str, blocks: dict[str, tuple[str, str]]) -> dict[str, bool]:
    """The fields of typedef `name` (through `A & B & {...}`), each with whether it is optional."""
    expression, block = blocks[name]
    fields: dict[str, bool] = {}
    if expression == "object":
        for optional, field in re.findall(r"@property \{.*?\} (\[)?(\w+)\]?", block):
            fields[field] = bool(optional)
        return fields
    for part in (p.strip() for p in expression.split("&")):
        if part.startswith("{"):
            for field, optional in re.findall(r"(\w+)(\?)?\s*:", part):
                fields[field] = bool(optional)
        else:
            assert part in blocks, f"typedef {name} uses {part}, not defined in static/js/events.js"
            fields.update(typedef_fields(part, blocks))
    return fields


def payload_typedefs(blocks: dict[str, tuple[str, str]]) -> dict[str, str]:
    """ServerEventMap: the typedef of each event's payload, by event name."""
    return dict(
        (event, typedef)
        for typedef, event in re.findall(r"@property \{(\w+)\} (\w+)", blocks["ServerEventMap"][1])
    )


# Fields whose to_wire needs a value of their own type (`done` sends its usage and cost as one
# `usage` object, so `cost` is no key of its own).
TYPED_SAMPLES: dict[tuple[type[events.Event], str], Any] = {
    (events.Done, "usage"): Usage(),
    (events.Done, "cost"): None,
}


def wire_fields(cls: type[events.Event]) -> dict[str, bool]:
    """The keys `to_wire` sends for an event class, each with whether it may be left out (None)."""
    fields = [f for f in dataclasses.fields(cls) if f.init]
    # Every field set (to a marker string, whatever its type): every key sent.
    markers = {f.name: TYPED_SAMPLES.get((cls, f.name), f"<{f.name}>") for f in fields}
    wire = cls(**markers).to_wire()
    # By value, as a key may be renamed (ToolEvent sends `tool` as `name`).
    key_of = {value: key for key, value in wire.items() if isinstance(value, str)}
    sent = {}
    for f in fields:
        key = key_of.get(f"<{f.name}>", f.name)
        if key in wire:
            sent[key] = f.default is None
    return sent


def differences(
    left: str, right: str, a: set[str], b: set[str], where: dict[str, str]
) -> list[str]:
    """What `a` (named `left`) has and `b` (`right`) lacks, as `+`, and the other way, as `-`."""
    lines = []
    for name in sorted(a - b):
        source = f" ({where[name]})" if name in where else ""
        lines.append(f"  + {name}: in {left}{source}, not in {right}")
    for name in sorted(b - a):
        lines.append(f"  - {name}: in {right}, not in {left}")
    return lines


def test_the_page_lists_every_event_the_server_sends() -> None:
    server = server_event_names()
    page = page_event_names()
    assert len(page) == len(set(page)), f"static/js/events.js lists an event twice: {page}"
    page_list = "static/js/events.js (SERVER_EVENTS, DELTAS_EVENT)"
    diff = differences("the server", page_list, set(server), set(page), server)
    if diff:
        pytest.fail("the page's events are not the server's:\n" + "\n".join(diff), pytrace=False)


def test_every_listed_event_has_a_payload_typedef() -> None:
    blocks = typedefs()
    mapped = payload_typedefs(blocks)
    source = PAGE_EVENTS.read_text(encoding="utf-8")
    listed = set(JS_STRING.findall(js_const(source, "SERVER_EVENTS")))
    diff = differences("SERVER_EVENTS", "the ServerEventMap typedef", listed, set(mapped), {})
    if diff:
        heading = "the page's events and their payload typedefs differ:\n"
        pytest.fail(heading + "\n".join(diff), pytrace=False)
    for event, typedef in mapped.items():
        assert typedef in blocks, f"ServerEventMap.{event} is {typedef}, not a typedef of events.js"


def test_payload_typedefs_have_the_fields_the_server_sends() -> None:
    blocks = typedefs()
    mapped = payload_typedefs(blocks)
    problems = []
    for name, cls in sorted(core_event_classes().items()):
        if name not in mapped:
            continue  # reported by the tests above
        typedef = mapped[name]
        sent, typed = wire_fields(cls), typedef_fields(typedef, blocks)
        for field in sorted(sent.keys() - typed.keys()):
            problems.append(f"  {name}: the server sends {field!r}, {typedef} lacks it")
        for field in sorted(typed.keys() - sent.keys()):
            problems.append(f"  {name}: {typedef} has {field!r}, {cls.__name__} does not send it")
        for field in sorted(sent.keys() & typed.keys()):
            if sent[field] != typed[field]:
                should = "optional (left out when None)" if sent[field] else "required"
                problems.append(f"  {name}: {typedef}.{field} should be {should}")
    if problems:
        heading = "the payload typedefs of static/js/events.js are not the server's:\n"
        pytest.fail(heading + "\n".join(problems), pytrace=False)


def test_the_connection_listens_to_the_pages_list() -> None:
    """connection.js takes its event names from events.js, not from a list of its own."""
    source = CONNECTION.read_text(encoding="utf-8")
    imported = re.search(r"import \{([^}]*)\} from \"\./events\.js\";", source)
    assert imported, "connection.js does not import from ./events.js"
    assert {"SERVER_EVENTS", "DELTAS_EVENT"} <= {n.strip() for n in imported.group(1).split(",")}
    assert "const SERVER_EVENTS" not in source
