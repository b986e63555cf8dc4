"""A polling client whose WebSocket upgrade is closed by the client before the server answers
its probe (as a page refused by a restarted server does): the server must write nothing but
WebSocket frames on that connection. An error escaping the upgrade made Werkzeug write an
HTTP 500 response into the WebSocket stream, which Chromium reports as "Invalid frame header"."""

from __future__ import annotations

import json
import socket
import struct
import urllib.request

import pytest

from tests.kit.raw_socket import client_frame, parse_frame, upgrade_request
from tests.kit.server import ServerProcess

pytestmark = [pytest.mark.e2e, pytest.mark.server(modes=["threading", "eventlet"])]
PATIENCE = 30.0


def polling_sid(port: int) -> str:
    url = f"http://127.0.0.1:{port}/socket.io/?EIO=4&transport=polling"
    with urllib.request.urlopen(url, timeout=PATIENCE) as answer:
        opened = answer.read().decode()
    assert opened.startswith("0"), opened
    return str(json.loads(opened[1:])["sid"])


CLOSE = client_frame(0x8, struct.pack("!H", 1000))


@pytest.mark.parametrize("after_probe_answer", [False, True], ids=["with-the-probe", "after-it"])
def test_an_upgrade_the_client_closes_gets_frames_only(
    server: ServerProcess, after_probe_answer: bool
) -> None:
    """Closed with the probe (the probe's answer fails), or right after the probe's answer
    (engine.io reads the close where it waits for the upgrade packet)."""
    sid = polling_sid(server.port)
    with socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE) as sock:
        sock.sendall(upgrade_request(server.port, f"&sid={sid}"))
        received = b""
        while b"\r\n\r\n" not in received:
            received += sock.recv(65536)
        head, _, rest = received.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101"), head
        if after_probe_answer:
            sock.sendall(client_frame(0x1, b"2probe"))
            while b"3probe" not in rest:
                rest += sock.recv(65536)
            sock.sendall(CLOSE)
        else:  # in one write: the server reads both before it answers
            sock.sendall(client_frame(0x1, b"2probe") + CLOSE)
        while 0x8 not in opcodes_of(rest):  # the server answers the close
            rest += sock.recv(65536)
        sock.shutdown(socket.SHUT_WR)  # as a browser ends the connection after the close
        while chunk := sock.recv(65536):
            rest += chunk
    assert b"HTTP/1.1" not in rest, rest
    assert opcodes_of(rest)[-1] == 0x8


def opcodes_of(data: bytes) -> list[int]:
    """The opcodes of the server's frames in `data`."""
    opcodes = []
    while (frame := parse_frame(data)) is not None:
        opcode, _, data = frame
        opcodes.append(opcode)
    return opcodes
