"""Bytes between the browser and an app: the browser's side read into a bounded buffer (a
head, a line, so many bytes) with a time limit on each read (the socket's SO_RCVTIMEO), and a
plain copy from one socket to another. Blocking calls on real sockets, one OS thread each."""

from __future__ import annotations

import contextlib
import socket
import struct

from web.app_proxy.http_head import MAX_HEAD, BadRequest

CHUNK = 64 * 1024
MAX_LINE = 8 * 1024  # a chunk's size line or a trailer field


class Closed(Exception):
    """The other side closed its end (or it went quiet for too long)."""


class Reader:
    """What a socket sends, read as the proxy needs it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def quiet_limit(self, seconds: int) -> None:
        """Give up (Closed) when the browser sends nothing for `seconds` in a read."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", seconds, 0))

    def head(self) -> bytes:
        """The next request head, up to and with its blank line (BadRequest past MAX_HEAD)."""
        while True:
            end = self.buffer.find(b"\r\n\r\n", 0, MAX_HEAD)
            if end >= 0:
                return self.take(end + 4)
            if len(self.buffer) >= MAX_HEAD:
                raise BadRequest("a request head over 64 KiB")
            self._fill()

    def line(self) -> bytes:
        """The next line, with its CRLF."""
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                return self.take(end + 1)
            if len(self.buffer) > MAX_LINE:
                raise BadRequest("a chunk line over 8 KiB")
            self._fill()

    def copy(self, count: int, to: socket.socket) -> None:
        """Send the next `count` bytes on to `to`."""
        while count > 0:
            if not self.buffer:
                self._fill()
            piece = self.take(min(count, len(self.buffer)))
            to.sendall(piece)
            count -= len(piece)

    def take(self, count: int) -> bytes:
        piece = bytes(self.buffer[:count])
        del self.buffer[:count]
        return piece

    def _fill(self) -> None:
        try:
            data = self.sock.recv(CHUNK)
        except BlockingIOError:  # SO_RCVTIMEO passed
            raise Closed("quiet for too long") from None
        if not data:
            raise Closed("closed")
        self.buffer += data


def pump(source: socket.socket, to: socket.socket) -> None:
    """Copy everything `source` sends to `to` until either end closes; then tell `to` that
    nothing more comes."""
    with contextlib.suppress(OSError):
        while data := source.recv(CHUNK):
            to.sendall(data)
    with contextlib.suppress(OSError):
        to.shutdown(socket.SHUT_WR)
