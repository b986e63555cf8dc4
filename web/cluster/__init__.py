"""Where the web server's tasks run: this process alone, or one of several sharing a Redis.

`TerminalHub` and its `TaskLeases` (leases.py) talk to a `Cluster`; `LocalCluster` is the
single process (every answer is "here, nobody else"), `redis_cluster.RedisCluster` the
scaled-out one, imported only when AGENT_REDIS_URL is set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from protocol.cluster import Answer, Command
from protocol.events import Event
from utils.errors import Unavailable

Handler = Callable[[Command], Answer]  # applies a command for a task of this process


class ClusterUnavailable(Unavailable):
    """The coordination store (Redis) does not answer: no task may start now."""


@dataclass
class LoggedEvents:
    """A conversation's replay log as another process left it: `events` (name, wire payload)
    are every event after max(after_seq, replays_after) up to `last_seq`, none missing."""

    events: list[tuple[str, dict[str, Any]]]
    last_seq: int
    replays_after: int


class Cluster(Protocol):
    """What a web process shares with the other processes serving the same data dir."""

    shared: bool  # other processes write the same data dir: reload before trusting a cache

    def claim(self, conversation_id: str) -> bool:
        """Take the conversation's task lease; False when another process holds it.
        Raises ClusterUnavailable."""
        ...

    def orphan(self, conversation_id: str) -> str | None:
        """With the lease held: the user message id of a task a dead process left running."""
        ...

    def begin(self, conversation_id: str, message_id: str, replays_after: int) -> None:
        """A task of ours started: it runs here, its replay log starts after `replays_after`."""
        ...

    def record(self, event: Event) -> None:
        """Append an event of a task running here to the conversation's replay log."""
        ...

    def end(self, conversation_id: str, message_id: str) -> None:
        """The task of user message `message_id` ended and its end is stored: its log is
        written and left to expire, its lease released. Only that task's: a second call, or
        one after another task began, does nothing."""
        ...

    def release(self, conversation_id: str) -> None:
        """Give back a lease taken by `claim` for a task that did not begin."""
        ...

    def owner(self, conversation_id: str) -> str | None:
        """The other process running the conversation's task; None: here or nowhere."""
        ...

    def running(self) -> set[str]:
        """The conversations whose task runs in another process."""
        ...

    def last_seq(self, conversation_id: str) -> int:
        """The newest seq another process gave this conversation's events (0: unknown)."""
        ...

    def replay_log(self, conversation_id: str, after_seq: int) -> LoggedEvents | None:
        """The events of the conversation's last task after `after_seq`, as far as the log
        holds them whole (`replays_after` says from where); None: none kept."""
        ...

    def settling(self) -> float:
        """Seconds a live process may still take to claim back its running tasks, which the
        shared store forgot when it restarted moments ago (0: it did not). Raises
        ClusterUnavailable."""
        ...

    def hold_session(self, conversation_id: str, alive: Callable[[], bool]) -> None:
        """The conversation's sandbox session lives here: process ops sent to other processes
        come here while `alive()` (asked at each heartbeat)."""
        ...

    def session_owner(self, conversation_id: str) -> str | None:
        """The other process holding the conversation's sandbox session; None: here or
        nowhere."""
        ...

    def ask(self, owner: str, command: Command, wait: float | None = None) -> Answer | None:
        """Have the owner process apply a command; None when it does not answer in time
        (`wait` seconds; None: the time a task's command is given)."""
        ...

    def serve(self, handler: Handler, start: Callable[..., Any]) -> None:
        """Apply the commands other processes send here with `handler`, in a task `start`ed
        in the background; also keep our leases alive and reap the ones dead processes left
        (through the handler, a ReapCommand)."""
        ...

    def close(self) -> None:
        """Release every lease held here and stop the background work."""
        ...


class LocalCluster:
    """One process: every task runs here, and nothing is shared."""

    shared = False

    def claim(self, conversation_id: str) -> bool:
        return True

    def orphan(self, conversation_id: str) -> str | None:
        return None

    def begin(self, conversation_id: str, message_id: str, replays_after: int) -> None:
        pass

    def record(self, event: Event) -> None:
        pass

    def end(self, conversation_id: str, message_id: str) -> None:
        pass

    def release(self, conversation_id: str) -> None:
        pass

    def owner(self, conversation_id: str) -> str | None:
        return None

    def running(self) -> set[str]:
        return set()

    def last_seq(self, conversation_id: str) -> int:
        return 0

    def replay_log(self, conversation_id: str, after_seq: int) -> LoggedEvents | None:
        return None

    def settling(self) -> float:
        return 0.0

    def hold_session(self, conversation_id: str, alive: Callable[[], bool]) -> None:
        pass

    def session_owner(self, conversation_id: str) -> str | None:
        return None

    def ask(self, owner: str, command: Command, wait: float | None = None) -> Answer | None:
        return None

    def serve(self, handler: Handler, start: Callable[..., Any]) -> None:
        pass

    def close(self) -> None:
        pass
