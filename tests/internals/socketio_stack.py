"""The internals of the Socket.IO stack itself: python-engineio, python-socketio,
Flask-SocketIO."""

from __future__ import annotations

import inspect
import queue
import warnings
from typing import Any

import engineio
import engineio.async_drivers.threading
import engineio.socket
import socketio
from engineio.async_drivers._websocket_wsgi import SimpleWebSocketWSGI
from flask import Flask
from flask_socketio import SocketIO
from socketio.packet import ACK, BINARY_EVENT, EVENT, Packet

from tests.internals.kit import (
    BATCHED_WRITES,
    INSTALL,
    MESSAGE_QUEUE,
    QUEUE_CAP,
    Checks,
    parameters,
    same_code,
)
from web.payload_depth import DepthBoundJson
from web.transport.fast_packet import FastPacket

internal = Checks()


def threading_engine() -> engineio.Server:
    return engineio.Server(async_mode="threading")


# python-engineio


@internal(
    "python-engineio",
    "engineio.Server._async",
    QUEUE_CAP,
    "the async mode's table of classes, with a 'queue' and a 'websocket' entry, replaced on one "
    "server: create_queue() makes every Socket's queue of its 'queue' class",
)
def check_async_table() -> None:
    server = threading_engine()
    table = server._async
    assert isinstance(table, dict), f"it is a {type(table).__name__}"
    assert {"queue", "websocket"} <= table.keys(), f"its entries are {sorted(table)}"

    class Marked(queue.Queue[Any]):
        pass

    server._async = {**table, "queue": Marked}
    made = server.create_queue()
    assert type(made) is Marked, f"create_queue() made a {type(made).__name__}"
    assert type(engineio.socket.Socket(server, "sid").queue) is Marked, "a Socket's queue is not"


@internal(
    "python-engineio",
    "engineio.socket.Socket._upgrade_websocket",
    QUEUE_CAP,
    "an upgrade making _async['websocket'](socket._websocket_handler, server) and calling it "
    "with (environ, start_response)",
)
def check_upgrade() -> None:
    server = threading_engine()
    handed: list[Any] = []

    class Recording:
        def __init__(self, handler: Any, given: Any) -> None:
            handed.extend([handler, given])

        def __call__(self, environ: dict[str, Any], start_response: Any) -> list[str]:
            handed.append(environ)
            return ["upgraded"]

    server._async = {**server._async, "websocket": Recording}
    engine_socket = engineio.socket.Socket(server, "sid")
    environ = {"HTTP_CONNECTION": "Upgrade", "HTTP_UPGRADE": "websocket"}
    answer = engine_socket.handle_get_request(environ, lambda *_: None)
    assert answer == ["upgraded"], f"the upgrade answered {answer!r}"
    handler, given, called_with = handed
    assert getattr(handler, "__self__", None) is engine_socket, "the handler is no bound method"
    assert handler.__func__ is engineio.socket.Socket._websocket_handler, handler
    assert given is server and called_with is environ, handed


@internal(
    "python-engineio",
    "engineio.socket.Socket._websocket_handler",
    f"{QUEUE_CAP}, {BATCHED_WRITES}",
    "a method given the WebSocket driver (ws): before `upgraded`, the probe's answer sent with "
    "ws.send; then a writer that takes packets with poll(), sends each with "
    "ws.send(pkt.encode()) and ends on a None in the queue",
)
def check_websocket_handler() -> None:
    handler = engineio.socket.Socket._websocket_handler
    assert parameters(handler) == ["self", "ws"], f"its parameters are {parameters(handler)}"
    same_code(handler, "58afe122719282de")


@internal(
    "python-engineio",
    "engineio.socket.Socket.poll",
    f"{QUEUE_CAP}, {BATCHED_WRITES}",
    "the writer's batch: one blocking queue.get (where the writer waits, so the batch ends "
    "there), then get(block=False) until the queue is empty",
)
def check_poll() -> None:
    blocking: list[bool] = []

    class Recording(queue.Queue[Any]):
        def get(self, block: bool = True, timeout: float | None = None) -> Any:
            blocking.append(block)
            return super().get(block, timeout)

    server = threading_engine()
    server._async = {**server._async, "queue": Recording}
    engine_socket = engineio.socket.Socket(server, "sid")
    for n in range(3):
        engine_socket.queue.put(engineio.packet.Packet(engineio.packet.MESSAGE, data=f"2[{n}]"))
    packets = engine_socket.poll()
    assert [p.data for p in packets] == ["2[0]", "2[1]", "2[2]"], packets
    assert blocking[:1] == [True] and not any(blocking[1:]), f"its gets blocked: {blocking}"


@internal(
    "python-engineio",
    "engineio.socket.Socket and Server state",
    f"{QUEUE_CAP}, {BATCHED_WRITES}",
    "a Socket's queue, sid, upgraded, upgrading and close(wait, abort, reason); a Server's "
    "sockets (by sid), async_mode, start_background_task and reason.SERVER_DISCONNECT",
)
def check_socket_state() -> None:
    server = threading_engine()
    engine_socket = engineio.socket.Socket(server, "sid")
    assert engine_socket.sid == "sid" and hasattr(engine_socket.queue, "put")
    assert engine_socket.upgraded is False and engine_socket.upgrading is False
    closing = parameters(engine_socket.close)
    assert closing[:3] == ["wait", "abort", "reason"], f"close takes {closing}"
    assert isinstance(server.sockets, dict) and server.async_mode == "threading"
    assert callable(server.start_background_task)
    assert server.reason.SERVER_DISCONNECT, "no reason.SERVER_DISCONNECT"


@internal(
    "python-engineio",
    "engineio.async_drivers._websocket_wsgi.SimpleWebSocketWSGI",
    f"{BATCHED_WRITES}, {QUEUE_CAP}",
    "threading mode's WebSocket class, made with (handler, server): the handler is given the "
    "driver itself, whose `ws` is the connection's simple_websocket.Server and whose send, wait "
    "and close it calls; under Werkzeug it ends the request raising ConnectionError",
)
def check_threading_websocket() -> None:
    websocket = engineio.async_drivers.threading._async["websocket"]
    assert websocket is SimpleWebSocketWSGI, f"threading mode's WebSocket class is {websocket}"
    same_code(SimpleWebSocketWSGI, "ef4f852b672632e5")


@internal(
    "python-engineio",
    "engineio.async_drivers.eventlet._async",
    QUEUE_CAP,
    "eventlet mode's queue class being eventlet's Queue, and its WebSocket class made with "
    "(handler, server)",
)
def check_eventlet_table() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eventlet says it is deprecated
        import eventlet.queue
        from engineio.async_drivers import eventlet as eventlet_driver
    table = eventlet_driver._async
    assert table["queue"] is eventlet.queue.Queue, f"its queue class is {table['queue']}"
    made_with = parameters(table["websocket"])
    assert made_with == ["handler", "server"], f"its WebSocket class takes {made_with}"


# python-socketio


@internal(
    "python-socketio",
    "socketio.packet.Packet's text",
    QUEUE_CAP,
    "an ack's encoded text beginning with 3 (6 when binary): acks are not held against the cap",
)
def check_ack_text() -> None:
    assert Packet(ACK, data=["ok"], id=1).encode().startswith("3")
    binary = Packet(ACK, data=[b"x"], id=1).encode()
    assert isinstance(binary, list) and binary[0].startswith("6"), binary


@internal(
    "python-socketio",
    "socketio.packet.Packet.data_is_binary",
    "web/transport/fast_packet.py",
    "a classmethod (data) that Packet.__init__ asks whether an event is binary, overridden",
)
def check_data_is_binary() -> None:
    stock = inspect.getattr_static(Packet, "data_is_binary")
    assert isinstance(stock, classmethod), f"it is a {type(stock).__name__}"
    assert parameters(Packet.data_is_binary) == ["data"], parameters(Packet.data_is_binary)
    asked: list[Any] = []

    class Asking(FastPacket):
        @classmethod
        def data_is_binary(cls, data: Any) -> bool:
            asked.append(data)
            return super().data_is_binary(data)

    data = ["file", {"data": b"\x00"}]
    packet = Asking(EVENT, data=data)
    assert asked[:1] == [data], "Packet.__init__ did not ask the subclass"
    assert packet.packet_type == BINARY_EVENT, "the subclass's answer was not taken"


@internal(
    "python-socketio",
    "socketio.Manager.rooms and sid_from_eio_sid",
    f"{INSTALL}, {MESSAGE_QUEUE}",
    "rooms[namespace][room]: the room's clients, sid to Engine.IO sid (rooms[namespace][None] "
    "every client, rooms[namespace][sid] its own room); sid_from_eio_sid(eio_sid, namespace)",
)
def check_rooms() -> None:
    manager = socketio.Server(async_mode="threading").manager
    sid = manager.connect("eio-1", "/")
    manager.enter_room(sid, "/", "c1/batched")
    rooms = manager.rooms
    assert dict(rooms["/"]["c1/batched"]) == {sid: "eio-1"}, rooms
    assert sid in rooms["/"][None] and sid in rooms["/"], rooms
    assert manager.sid_from_eio_sid("eio-1", "/") == sid


@internal(
    "python-socketio",
    "socketio.Server.emit and eio",
    INSTALL,
    "the Server's own emit(event, data, to, namespace) and its Engine.IO server as `eio`",
)
def check_server_emit() -> None:
    server = socketio.Server(async_mode="threading")
    assert isinstance(server.eio, engineio.Server), type(server.eio)
    emitting = parameters(server.emit)
    assert emitting[:2] == ["event", "data"], f"emit takes {emitting}"
    assert {"to", "namespace"} <= set(emitting), f"emit takes {emitting}"


@internal(
    "python-socketio",
    "socketio.RedisManager's listener",
    MESSAGE_QUEUE,
    "_listen taking messages from _redis_listen_with_retries(), a generator we replace; "
    "_redis_connect setting `pubsub`; `channel`; emit(..., ignore_queue=True)",
)
def check_redis_listener() -> None:
    manager = socketio.RedisManager
    made_with = parameters(manager.__init__)
    assert {"url", "channel", "redis_options"} <= set(made_with), f"it takes {made_with}"
    assert inspect.isgeneratorfunction(manager._redis_listen_with_retries)
    same_code(manager._listen, "cf4821d0f65d752c")
    same_code(manager._redis_connect, "da4530c936323c25")
    assert "ignore_queue" in inspect.getsource(socketio.PubSubManager.emit)


# Flask-SocketIO


@internal(
    "flask-socketio",
    "flask_socketio.SocketIO.init_app and server",
    f"web_server.py, {INSTALL}",
    "init_app handing python-socketio's options (serializer, json, client_manager) to the "
    "Server it makes, which is then `SocketIO.server`",
)
def check_init_app() -> None:
    class Probe(FastPacket):
        pass

    engine_json = engineio.packet.Packet.json  # the `json` option sets it, process-wide
    try:
        flask_socketio = SocketIO()
        flask_socketio.init_app(
            Flask("check"), async_mode="threading", serializer=Probe, json=DepthBoundJson
        )
        server = flask_socketio.server
        assert isinstance(server, socketio.Server), type(server)
        assert server.packet_class is Probe, server.packet_class
        assert Probe.json is DepthBoundJson, "the json option did not reach the packet class"
    finally:
        engineio.packet.Packet.json = engine_json
