"""Flask-SocketIO's Redis message queue, saying when it may have lost messages.

python-socketio's RedisManager publishes every emit on one pub/sub channel that each server
process listens to. Pub/sub keeps nothing: what is published while a process is not
subscribed (Redis restarting, a connection lost, the listener waiting to try again) never
reaches that process, and neither python-socketio nor redis-py says so (redis-py even
subscribes again by itself, between two messages). Here the listening connection never
retries on its own: the listener sees every loss, tells the clients of this process that are
in a conversation's room (`notice` `relay_lost`), subscribes again every RETRY_SECONDS, and
once back, before handing on anything that came after, tells them again (`notice`
`events_lost`): a client then joins the conversation again after the last seq it has
(docs/protocol.md §13).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import socketio
from redis.backoff import NoBackoff
from redis.retry import Retry

from protocol.events import Notice
from web.transport.delta_batcher import BATCHED_SUFFIX

log = logging.getLogger(__name__)
RETRY_SECONDS = 0.5
RELAY_LOST = Notice(
    "relay_lost",
    "Redis does not answer: the events of tasks running in other server processes cannot "
    "reach this one until it is back.",
)
EVENTS_LOST = Notice(
    "events_lost",
    "Redis answers again; events of tasks running in other server processes may have been "
    "lost meanwhile: join again after the last seq you have.",
)


class WatchedRedisManager(socketio.RedisManager):
    """The Redis client manager of python-socketio, whose listener tells the clients of this
    process when messages for them may have been lost."""

    def __init__(self, url: str, *, channel: str) -> None:
        super().__init__(url, channel=channel, redis_options={"retry": Retry(NoBackoff(), 0)})

    def _redis_listen_with_retries(self) -> Iterator[dict[str, Any]]:
        lost = False
        while True:
            try:
                self._redis_connect()
                pubsub = self.pubsub
                pubsub.subscribe(self.channel)
                if lost:
                    log.warning("the Socket.IO message queue is back")
                    self._tell_rooms(EVENTS_LOST)
                    lost = False
                yield from pubsub.listen()
            except Exception as exc:  # redis-py's errors or any other: listening goes on
                if not lost:
                    log.warning(
                        "lost the Socket.IO message queue; subscribing again",
                        extra={"fields": {"error": str(exc)}},
                    )
                    self._tell_rooms(RELAY_LOST)
                    lost = True
                time.sleep(RETRY_SECONDS)

    def _tell_rooms(self, notice: Notice) -> None:
        """Send `notice` to the clients of this process in each conversation's room."""
        rooms = self.rooms.get("/", {})
        clients = rooms.get(None, {})  # each client is also in a room of its own
        for room in [r for r in list(rooms) if r is not None and r not in clients]:
            payload = {**notice.to_wire(), "conversation_id": room.removesuffix(BATCHED_SUFFIX)}
            self.emit(notice.name, payload, namespace="/", room=room, ignore_queue=True)
