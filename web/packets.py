"""The server's Socket.IO packet: python-socketio's JSON packet with a cheaper test for binary
data, and a bound on how deeply a client's payload may nest.

Every emit asks whether its data holds bytes (they go out as attachments). The stock test
builds a list and a `functools.reduce` with a lambda for every value, at every level: for a
token's payload that is most of what an emit costs in Python calls. Here scalars are passed
over without a call, and the answer is the same.

A payload nested a few hundred levels deep made the stock decoder raise RecursionError, and
the packet was dropped without an answer. One nested deeper than MAX_DEPTH now decodes to
TOO_DEEP in place of the event's arguments, which the event's handler answers with
`bad_request` through the ack.
"""

from __future__ import annotations

import re
from typing import Any

from engineio import json as engineio_json
from socketio.packet import Packet

SCALARS = frozenset({str, int, float, bool, type(None)})
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


class JsonPacket(Packet):
    """Given to the server as its `serializer` (python-socketio's documented hook)."""

    json = DepthBoundJson

    @classmethod
    def data_is_binary(cls, data: Any) -> bool:
        if isinstance(data, (bytes, bytearray)):
            return True
        if isinstance(data, list):
            values: Any = data
        elif isinstance(data, dict):
            values = data.values()
        else:
            return False
        for value in values:  # noqa: SIM110  (any() over a generator: a frame resumed per value)
            if type(value) not in SCALARS and cls.data_is_binary(value):
                return True
        return False
