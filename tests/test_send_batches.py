"""web.send_batches: a writer's batch of WebSocket frames goes out in one socket write."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Request, TextMessage

from web.send_batches import BatchedSends


@dataclass
class Server:
    """What BatchedSends reads of simple_websocket.Server: its wsproto connection and socket."""

    ws: WSConnection
    sock: socket.socket
    connected: bool = True


@dataclass
class Driver:
    """engineio's SimpleWebSocketWSGI as the handler sees it: `.ws`, `send`, `wait`, `close`."""

    ws: Server
    sent_directly: list[str] = field(default_factory=list)
    closed: bool = False

    def send(self, message: str) -> None:
        self.sent_directly.append(message)
        self.ws.sock.sendall(self.ws.ws.send(TextMessage(data=message)))

    def wait(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def pair() -> Iterator[tuple[Driver, socket.socket, WSConnection]]:
    """A server-side driver on one end of a socket pair, a wsproto client on the other."""
    server_end, client_end = socket.socketpair()
    client, server = WSConnection(ConnectionType.CLIENT), WSConnection(ConnectionType.SERVER)
    server.receive_data(client.send(Request(host="localhost", target="/")))
    assert isinstance(next(server.events()), Request)
    client.receive_data(server.send(AcceptConnection()))
    assert isinstance(next(client.events()), AcceptConnection)
    yield Driver(Server(server, server_end)), client_end, client
    server_end.close()
    client_end.close()


def received(client_end: socket.socket, client: WSConnection) -> tuple[list[str], int]:
    """The messages waiting on the client's end, and in how many reads they came."""
    client_end.setblocking(False)
    messages: list[str] = []
    reads = 0
    while True:
        try:
            data = client_end.recv(65536)
        except BlockingIOError:
            break
        reads += 1
        client.receive_data(data)
        messages += [event.data for event in client.events() if isinstance(event, TextMessage)]
    return messages, reads


def test_before_the_first_wait_a_send_goes_out_at_once(pair: Any) -> None:
    driver, client_end, client = pair
    sends = BatchedSends(driver)
    sends.send("3probe")  # the upgrade's answer: the client waits for it
    assert driver.sent_directly == ["3probe"]
    assert received(client_end, client)[0] == ["3probe"]


def test_a_batch_is_one_write_in_order_at_the_next_wait(pair: Any) -> None:
    driver, client_end, client = pair
    sends = BatchedSends(driver)
    sends.flush()  # the writer's first wait on its queue
    batch = [f'42["token",{{"seq":{n}}}]' for n in range(200)]
    for message in batch:
        sends.send(message)
    assert received(client_end, client) == ([], 0)  # gathered, not written yet
    sends.flush()
    messages, reads = received(client_end, client)
    assert messages == batch
    assert reads == 1
    assert driver.sent_directly == []


def test_close_writes_what_was_gathered_first(pair: Any) -> None:
    driver, client_end, client = pair
    sends = BatchedSends(driver)
    sends.flush()
    sends.send("last")
    sends.close()
    assert driver.closed
    assert received(client_end, client)[0] == ["last"]


def test_a_write_that_fails_makes_the_next_send_fail(pair: Any) -> None:
    driver, client_end, _ = pair
    sends = BatchedSends(driver)
    sends.flush()
    sends.send("lost")
    client_end.close()
    driver.ws.sock.shutdown(socket.SHUT_WR)  # as ClientQueueCap drops a client
    sends.flush()  # the writer's wait does not raise
    with pytest.raises(OSError):
        sends.send("next")
