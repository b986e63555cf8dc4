"""The server's end of a supervisor's control socket: requests with ids and their answers
(with the file descriptors they carry), and the supervisor's unsolicited exit notices, read by
one OS thread per session.

Everything that arrives is the sandbox's word: a supervisor runs inside the sandbox, where a
command could have replaced it. Answers are checked for shape before use, descriptors for
kind, and a session whose supervisor misbehaves is ended, never trusted further.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from modules.sandbox.session.os_threads import new_condition, original, start_thread, wait_for

log = logging.getLogger(__name__)

MAX_MESSAGE = 1 << 18
MAX_FDS = 4
REQUEST_SECONDS = 10.0  # an answer later than this is a supervisor that stopped answering
SEND_SECONDS = 5.0


class ChannelClosed(OSError):
    """The supervisor is gone (its session ended), or stopped answering."""


class Refusal(OSError):
    """The supervisor refused a request; its text says why."""


@dataclass
class Answer:
    """A supervisor's answer: its fields and the descriptors it carried (the caller's to
    close)."""

    fields: dict[str, Any]
    fds: list[int] = field(default_factory=list)
    result: Any = None  # what the request's `then` made of it

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


class SupervisorChannel:
    """Requests to one supervisor and the notices it sends, over a SOCK_SEQPACKET socket."""

    def __init__(
        self,
        sock: socket.socket,
        on_event: Callable[[dict[str, Any]], None],
        on_closed: Callable[[], None],
        name: str,
    ) -> None:
        self._sock = sock
        self._sock.setsockopt(
            socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", int(SEND_SECONDS), 0)
        )
        self._on_event = on_event
        self._on_closed = on_closed
        self._changed = new_condition()
        self._answers: dict[int, Answer] = {}
        self._waiting: dict[int, Callable[[Answer], Any] | None] = {}
        self._next_id = 0
        self._send_lock = original("threading").Lock()
        self.closed = False
        self._thread = start_thread(self._read, f"session-channel-{name}")

    def request(
        self,
        op: str,
        timeout: float = REQUEST_SECONDS,
        then: Callable[[Answer], Any] | None = None,
        **fields: Any,
    ) -> Answer:
        """Ask the supervisor and wait for its answer; Refusal when it says no, ChannelClosed
        when it is gone or silent for `timeout` seconds. `then` is called with a good answer
        on the reading thread, before any later message is read (its value is the answer's
        `result`; what it raises, the request raises)."""
        with self._changed:
            if self.closed:
                raise ChannelClosed("the session has ended")
            self._next_id += 1
            request_id = self._next_id
            self._waiting[request_id] = then
        data = json.dumps({"op": op, "id": request_id, **fields}).encode()
        try:
            with self._send_lock:
                self._sock.send(data)
            answered = wait_for(
                self._changed, lambda: request_id in self._answers or self.closed, timeout
            )
        except OSError as exc:
            self._forget(request_id)
            self.close()
            raise ChannelClosed(f"the session's supervisor cannot be reached: {exc}") from None
        answer = self._forget(request_id)
        if answer is None:
            if not answered:
                self.close()
                raise ChannelClosed(f"the session's supervisor did not answer {op} in time")
            raise ChannelClosed("the session has ended")
        if isinstance(answer.result, BaseException):
            raise answer.result
        if answer.fields.get("ok") is not True:
            answer.close()
            raise Refusal(str(answer.fields.get("error", "refused"))[:500])
        return answer

    def close(self) -> None:
        """Close the socket: the supervisor sees its end and ends the session."""
        with self._changed:
            if self.closed:
                return
            self.closed = True
            self._changed.notify_all()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def _forget(self, request_id: int) -> Answer | None:
        with self._changed:
            self._waiting.pop(request_id, None)
            return self._answers.pop(request_id, None)

    def _read(self) -> None:
        try:
            while self._receive():
                pass
        except Exception:  # a reader that dies would leave every request waiting
            log.exception("a session's control channel failed")
        finally:
            with self._changed:
                self.closed = True
                for answer in self._answers.values():
                    answer.close()
                self._answers.clear()
                self._changed.notify_all()
            self._sock.close()
            self._on_closed()

    def _receive(self) -> bool:
        """Take one message; False once the supervisor is gone."""
        try:
            data, fds, flags, _ = socket.recv_fds(self._sock, MAX_MESSAGE, MAX_FDS)
        except InterruptedError:
            return True
        except OSError:
            return False
        answer = Answer({}, list(fds))
        if not data and not fds:
            return False
        try:
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                raise ValueError("a message too long")
            message = json.loads(data)
            if not isinstance(message, dict):
                raise ValueError("a message that is no object")
        except ValueError as exc:
            answer.close()
            log.warning("a supervisor sent %s; ignored", exc)
            return True
        if "event" in message:
            answer.close()
            self._on_event(message)
            return True
        request_id = message.get("id")
        if not isinstance(request_id, int):
            answer.close()
            return True
        with self._changed:
            waiting = request_id in self._waiting
            then = self._waiting.get(request_id)
        if not waiting:
            answer.close()  # an answer nobody waits for any more
            return True
        answer.fields = message
        if then is not None and message.get("ok") is True:
            try:
                answer.result = then(answer)
            except Exception as exc:  # raised by the request
                answer.close()
                answer.result = exc
        with self._changed:
            if request_id in self._waiting:
                self._answers[request_id] = answer
                self._changed.notify_all()
                return True
        answer.close()
        return True


def checked_fds(answer: Answer, kinds: list[int]) -> list[int]:
    """The answer's descriptors when there are exactly len(kinds) of them, each of its
    stat.S_IFMT kind; otherwise they are closed and Refusal is raised."""
    fds = answer.fds
    try:
        if len(fds) != len(kinds):
            raise Refusal(f"the supervisor sent {len(fds)} descriptors, not {len(kinds)}")
        for fd, kind in zip(fds, kinds, strict=True):
            if stat.S_IFMT(os.fstat(fd).st_mode) != kind:
                raise Refusal("the supervisor sent a descriptor of the wrong kind")
    except (Refusal, OSError):
        answer.close()
        raise
    answer.fds = []
    return fds
