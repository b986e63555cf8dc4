"""A bound on how deeply a client's Socket.IO payload may nest: one of the limits on what a
client may send (with MAX_REQUEST_BYTES), kept here and not with the transport's speed-ups, so
that no change to those can loosen it.

A payload nested a few hundred levels deep made the stock decoder raise RecursionError, and
the packet was dropped without an answer. One nested deeper than MAX_DEPTH now decodes to
TOO_DEEP in place of the event's arguments, which the event's handler answers with
`bad_request` through the ack (web/handlers.py).

Installed through python-socketio's documented `json` option (web_server.py): a module with
`dumps` and `loads` like the standard library's, which python-socketio's packets and
python-engineio's decode with, so a deep Engine.IO packet is bounded too.
"""

from __future__ import annotations

import re
from typing import Any

from engineio import json as engineio_json

CONTAINERS = frozenset({list, dict})
MAX_DEPTH = 100  # lists and objects within one another; the protocol's payloads nest 4 deep
EVENT_NAME = re.compile(r'\[\s*"([^"\\]{1,200})"\s*[,\]]')  # `["get_status", ...`


class TooDeep:
    """What a client's payload nested deeper than MAX_DEPTH decodes to."""

    message = f"the payload nests lists and objects more than {MAX_DEPTH} levels deep"


TOO_DEEP = TooDeep()


def nested_deeper(value: Any, limit: int) -> bool:
    """Whether lists and objects nest more than `limit` levels deep in a decoded JSON value."""
    level = [value] if type(value) in CONTAINERS else []
    for _ in range(limit):
        level = [
            child
            for item in level
            for child in (item.values() if type(item) is dict else item)
            if type(child) in CONTAINERS
        ]
        if not level:
            return False
    return True


class DepthBoundJson:
    """engineio's JSON, whose `loads` gives a value nested too deeply as TOO_DEEP: an event's
    data (`["name", ...]`) as `["name", TOO_DEEP]`, so its handler is still the one to answer."""

    dumps = staticmethod(engineio_json.dumps)

    @staticmethod
    def loads(text: str) -> Any:
        try:
            value = engineio_json.loads(text)
        except RecursionError:
            return _too_deep(text)
        return _too_deep(text) if nested_deeper(value, MAX_DEPTH) else value


def _too_deep(text: str) -> Any:
    named = EVENT_NAME.match(text)
    return [named[1], TOO_DEEP] if named else TOO_DEEP
