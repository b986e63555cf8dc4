"""A Socket.IO client over a bare TCP socket, the handshakes done by hand: one that can stop
reading (its receive buffer kept tiny) while it still answers pings, as a stuck client does."""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import threading
import time
from typing import Any

PONG_EVERY_SECONDS = 2.0  # well inside the server's 10 s ping interval


def upgrade_request(port: int, query: str = "") -> bytes:
    """The HTTP request that opens Engine.IO's WebSocket (`query`: more of it, `&sid=...`)."""
    key = base64.b64encode(os.urandom(16)).decode()
    return (
        f"GET /socket.io/?EIO=4&transport=websocket{query} HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    ).encode()


def client_frame(opcode: int, payload: bytes) -> bytes:
    """One masked frame, as a client must send."""
    mask, size = os.urandom(4), len(payload)
    head = bytes([0x80 | opcode])
    if size < 126:
        head += bytes([0x80 | size])
    elif size < 65536:
        head += bytes([0x80 | 126]) + struct.pack(">H", size)
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", size)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def parse_frame(data: bytes) -> tuple[int, bytes, bytes] | None:
    """(opcode, payload, what follows) of the server's frame at the start of `data`; None
    while it has not all arrived."""
    if len(data) < 2:
        return None
    opcode, length, at = data[0] & 0x0F, data[1] & 0x7F, 2
    if length == 126:
        if len(data) < 4:
            return None
        (length,), at = struct.unpack(">H", data[2:4]), 4
    elif length == 127:
        if len(data) < 10:
            return None
        (length,), at = struct.unpack(">Q", data[2:10]), 10
    if len(data) < at + length:
        return None
    return opcode, data[at : at + length], data[at + length :]


class RawSocketIO:
    """Engine.IO 4 over a WebSocket on `socket.socket`; `events()` parses what arrived."""

    def __init__(self, port: int, token: str, *, receive_buffer: int | None = None) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer is not None:  # before connect, so the window starts small
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.settimeout(10)
        self.sock.connect(("127.0.0.1", port))
        self._buffer = b""
        self._send_lock = threading.Lock()
        self._stop = threading.Event()
        self.frames: list[str] = []
        self._upgrade(port)
        opened = self.read_frame()
        assert opened is not None and opened.startswith("0"), opened
        self.send_text("40" + json.dumps({"token": token}))
        connected = self.read_frame()
        assert connected is not None and connected.startswith("40"), connected
        self.sid = json.loads(connected[2:])["sid"]

    def _upgrade(self, port: int) -> None:
        self.sock.sendall(upgrade_request(port))
        while b"\r\n\r\n" not in self._buffer:
            self._fill()
        head, self._buffer = self._buffer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        self._buffer += data
        return bool(data)

    def read_frame(self) -> str | None:
        """The next text frame (None at the end of the connection); pings are answered."""
        while True:
            frame = self._parse()
            if frame is None:
                try:
                    if self._fill():
                        continue
                except ConnectionError:
                    pass
                return None
            opcode, payload = frame
            if opcode == 0x8:
                return None
            if opcode != 0x1:
                continue
            text = payload.decode()
            if text == "2":
                self.send_text("3")
                continue
            return text

    def _parse(self) -> tuple[int, bytes] | None:
        frame = parse_frame(self._buffer)
        if frame is None:
            return None
        opcode, payload, self._buffer = frame
        return opcode, payload

    def send_text(self, text: str) -> None:
        """One masked text frame, as a client must send."""
        frame = client_frame(0x1, text.encode())
        with self._send_lock:
            self.sock.sendall(frame)

    def call(self, event: str, payload: dict[str, Any], ack_id: int = 1) -> Any:
        """Emit with an ack and read until it comes (events before it are kept in `frames`)."""
        return self.call_text(json.dumps([event, payload]), ack_id)

    def call_text(self, data: str, ack_id: int = 1) -> Any:
        """`call` with the event's data given as JSON text, `["name", payload]`."""
        self.send_text(f"42{ack_id}" + data)
        while True:
            frame = self.read_frame()
            assert frame is not None, "the connection ended before the ack"
            if frame.startswith(f"43{ack_id}"):
                return json.loads(frame[2 + len(str(ack_id)) :])[0]
            self.frames.append(frame)

    def stop_reading(self) -> None:
        """From now on read nothing, but send a pong every few seconds, as if it had read
        the pings: the server keeps the connection while its messages pile up."""

        def pong() -> None:
            while not self._stop.wait(PONG_EVERY_SECONDS):
                try:
                    self.send_text("3")
                except OSError:
                    return

        threading.Thread(target=pong, daemon=True).start()

    def drain(self, timeout: float = 30) -> bool:
        """Read everything that arrived until the server closes; whether it did in time."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                frame = self.read_frame()
            except TimeoutError:
                return False
            if frame is None:
                return True
            self.frames.append(frame)
        return False

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """The Socket.IO events among the frames read, as (name, payload)."""
        found = []
        for frame in self.frames:
            if frame.startswith("42"):
                name, payload = json.loads(frame[2:])
                found.append((name, payload))
        return found

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
