"""web.transport.batched_writes on a real simple_websocket connection (engineio's threading
driver) with a wsproto client on the other end of a socket pair, permessage-deflate on as with a
browser: a writer's batch of frames goes out in one socket write, and the connection's own
writes (a close's answer) never land inside it."""

from __future__ import annotations

import secrets
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from engineio.async_drivers._websocket_wsgi import SimpleWebSocketWSGI
from simple_websocket import Server
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Request, TextMessage
from wsproto.extensions import PerMessageDeflate

from web.transport.batched_writes import BatchedSends

PATIENCE = 30.0


def environ_of(request: bytes, sock: socket.socket) -> dict[str, Any]:
    """The WSGI environ Werkzeug gives a WebSocket request (its headers, its socket)."""
    lines = request.decode().split("\r\n")[1:]
    headers = dict(line.split(": ", 1) for line in lines if line)
    environ: dict[str, Any] = {"werkzeug.socket": sock}
    for name, value in headers.items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    return environ


@pytest.fixture
def pair() -> Iterator[tuple[Any, socket.socket, WSConnection]]:
    """engineio's driver on one end of a socket pair, a wsproto client on the other."""
    server_end, client_end = socket.socketpair()
    client = WSConnection(ConnectionType.CLIENT)
    request = client.send(Request(host="localhost", target="/", extensions=[PerMessageDeflate()]))
    driver = SimpleWebSocketWSGI(None, None)
    driver.ws = Server(environ_of(request, server_end))
    client.receive_data(client_end.recv(65536))
    assert isinstance(next(client.events()), AcceptConnection)
    yield driver, client_end, client
    client_end.close()
    driver.ws.sock.close()


def received(client_end: socket.socket, client: WSConnection) -> tuple[list[str], int]:
    """The messages waiting on the client's end, and in how many reads they came."""
    client_end.setblocking(False)
    messages: list[str] = []
    reads = 0
    while True:
        try:
            data = client_end.recv(1 << 20)
        except BlockingIOError:
            break
        reads += 1
        client.receive_data(data)
        messages += [event.data for event in client.events() if isinstance(event, TextMessage)]
    return messages, reads


def test_before_the_first_wait_a_send_goes_out_at_once(pair: Any) -> None:
    driver, client_end, client = pair
    sends = BatchedSends(driver, lambda: True)
    sends.send("3probe")  # the upgrade's answer: the client waits for it
    assert received(client_end, client)[0] == ["3probe"]


def test_a_poll_waiting_during_the_upgrade_does_not_start_the_gathering(pair: Any) -> None:
    driver, client_end, client = pair
    upgraded = False
    sends = BatchedSends(driver, lambda: upgraded)
    sends.flush()  # a polling request's wait on the same queue, while the upgrade is probed
    sends.send("3probe")
    assert received(client_end, client)[0] == ["3probe"]  # at once: the client waits for it
    upgraded = True
    sends.flush()  # the writer's first wait
    sends.send("gathered")
    assert received(client_end, client) == ([], 0)
    sends.flush()
    assert received(client_end, client)[0] == ["gathered"]


def test_a_batch_is_one_write_in_order_at_the_next_wait(pair: Any) -> None:
    driver, client_end, client = pair
    sends = BatchedSends(driver, lambda: True)
    sends.flush()  # the writer's first wait on its queue
    batch = [f'42["token",{{"seq":{n}}}]' for n in range(200)]
    for message in batch:
        sends.send(message)
    assert received(client_end, client) == ([], 0)  # gathered, not written yet
    sends.flush()
    messages, reads = received(client_end, client)
    assert messages == batch
    assert reads == 1


def test_close_writes_what_was_gathered_first(pair: Any) -> None:
    driver, client_end, client = pair
    sends = BatchedSends(driver, lambda: True)
    sends.flush()
    sends.send("last")
    sends.close()
    client_end.setblocking(True)
    client.receive_data(client_end.recv(65536))
    events = list(client.events())
    assert isinstance(events[0], TextMessage) and events[0].data == "last"
    assert isinstance(events[-1], CloseConnection)


def test_the_answer_to_a_close_waits_for_a_batch_cut_by_a_full_socket(pair: Any) -> None:
    """A batch larger than the socket's buffers is written in several `send` calls; the
    connection's reader answers the client's close meanwhile. Its frame must come after the
    whole batch, never between two of the batch's writes."""
    driver, client_end, client = pair
    sends = BatchedSends(driver, lambda: True)
    sends.flush()
    batch = [secrets.token_urlsafe(3000) for _ in range(1000)]  # 3 MB deflated: past the buffers
    for message in batch:
        sends.send(message)
    writer = threading.Thread(target=sends.flush)
    writer.start()
    client_end.sendall(client.send(CloseConnection(code=1000)))
    deadline = time.monotonic() + PATIENCE
    while driver.ws.connected:  # the reader has the close: its answer is on its way
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert writer.is_alive()  # still cut by the full socket: nothing read yet
    messages: list[str] = []
    part = ""  # a message arrives in pieces as the socket gives it
    closed = False
    client_end.settimeout(PATIENCE)
    while not closed:
        client.receive_data(client_end.recv(1 << 16))
        for event in client.events():  # a frame cut into would raise here
            if isinstance(event, TextMessage):
                assert not closed
                part += event.data
                if event.message_finished:
                    messages.append(part)
                    part = ""
            closed = closed or isinstance(event, CloseConnection)
    writer.join(PATIENCE)
    assert messages == batch


def test_a_write_that_fails_makes_the_next_send_fail(pair: Any) -> None:
    driver, _, _ = pair
    sends = BatchedSends(driver, lambda: True)
    sends.flush()
    sends.send("lost")
    driver.ws.sock.shutdown(socket.SHUT_WR)  # as ClientQueueCap drops a client
    sends.flush()  # the writer's wait does not raise
    with pytest.raises(OSError):
        sends.send("next")
