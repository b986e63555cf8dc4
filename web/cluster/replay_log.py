"""The replay streams of a scaled-out server (redis_cluster.py).

Each conversation's running or last task has two keys: `agent:log:CID`, a stream of its events
(id `SEQ-0`), and `agent:state:CID`, a hash of `replays_after` (the seq the stream starts
after) and `last_seq` (its newest). Redis may lose both (a restart without persistence) or be
out of reach for a while, so the process running a task keeps the task's events until the
stream holds them all: a write that fails is tried again, and a stream whose state Redis no
longer has is written again whole, from the task's first event. A reader trusts a stream only
as far as its seqs run on without a hole (`whole_tail`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.exceptions import RedisError

from protocol.events import Event
from web.cluster import LoggedEvents

log = logging.getLogger(__name__)

PREFIX = "agent:"
LOG_KEEP_SECONDS = 600  # a finished task's events stay replayable this long
WRITE_BATCH_SECONDS = 0.01
RETRY_SECONDS = 1.0  # how soon a failed write is tried again (and close() is noticed)
CHUNK_EVENTS = 2000  # events per script call: a whole task written again holds Redis briefly
WARN_EVERY_SECONDS = 5.0

# KEYS: log, state. ARGV: replays_after, keep (seconds the keys live on; 0 while the task
# runs), whole ("1": the stream is written again, starting after replays_after), then pairs of
# seq and entry; an entry at or below the stream's last seq is there already and skipped.
# Returns the stream's last seq, or -1 when Redis lost its state: write the stream whole.
_WRITE = """
if ARGV[3] == '1' then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[2], 'replays_after', ARGV[1], 'last_seq', ARGV[1])
elseif redis.call('HEXISTS', KEYS[2], 'replays_after') == 0 then
  return -1
end
local last = tonumber(redis.call('HGET', KEYS[2], 'last_seq') or ARGV[1])
for i = 4, #ARGV, 2 do
  local seq = tonumber(ARGV[i])
  if seq > last then
    redis.call('XADD', KEYS[1], ARGV[i] .. '-0', 'e', ARGV[i + 1])
    last = seq
  end
end
redis.call('HSET', KEYS[2], 'last_seq', last)
if ARGV[2] ~= '0' then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
  redis.call('EXPIRE', KEYS[2], ARGV[2])
end
return last
"""


@dataclass(eq=False)
class _TaskLog:
    """A task's events as this process sent them, until its stream holds them all."""

    replays_after: int
    events: list[Event] = field(default_factory=list)
    written: int = 0  # how many of `events` the stream holds
    whole: bool = True  # write the stream from the first event (a new task, or Redis lost it)
    ended: bool = False  # dropped once written; its keys then expire


@dataclass
class _Write:
    """One flush's share of a task log: events[start:end], the stream written anew or not."""

    conversation_id: str
    task: _TaskLog
    whole: bool
    start: int
    end: int


class ReplayLog:
    """The streams of the tasks this process runs, written in batches off the path of the
    token (the owner replays a running task from memory), and read by any process."""

    def __init__(self, client: redis.Redis, sleep: Callable[[float], Any] = time.sleep) -> None:
        self._redis = client
        self._sleep = sleep
        self._write = client.register_script(_WRITE)
        self._tasks: dict[str, _TaskLog] = {}
        self._lock = threading.Lock()
        self._flushing = threading.Lock()  # one flush at a time: a stream's ids must grow
        self._wake = threading.Event()
        self._closed = False
        self._warned_at = 0.0

    def begin(self, conversation_id: str, replays_after: int) -> None:
        """A task of ours started: its stream is written anew, starting after replays_after."""
        with self._lock:
            self._tasks[conversation_id] = _TaskLog(replays_after)
        self._wake.set()

    def record(self, event: Event) -> None:
        cid, seq = event.conversation_id, event.seq
        if cid is None or seq is None:
            return
        with self._lock:
            task = self._tasks.get(cid)
            if task is None:  # outside a task begun here (an interrupted end, a condensation)
                task = self._tasks[cid] = _TaskLog(seq - 1, whole=False, ended=True)
            task.events.append(event)
        self._wake.set()

    def end(self, conversation_id: str) -> None:
        """The conversation's task ended: write what is left; its keys then expire."""
        with self._lock:
            task = self._tasks.get(conversation_id)
            if task is not None:
                task.ended = True
        self.flush()

    def lost(self, conversation_id: str) -> None:
        """Redis forgot the conversation's task (it restarted): write its stream again whole."""
        with self._lock:
            task = self._tasks.get(conversation_id)
            if task is not None:
                task.whole = True
        self._wake.set()

    def run(self) -> None:
        """Write the streams until closed: soon after events come, and again after a failure."""
        while not self._closed:
            if self._wake.wait(RETRY_SECONDS):
                self._wake.clear()
                self._sleep(WRITE_BATCH_SECONDS)  # let a stream's next tokens join the batch
            self.flush()

    def flush(self) -> None:
        with self._flushing:
            writes = self._due()
            if not writes:
                return
            try:
                with self._redis.pipeline(transaction=False) as pipe:
                    calls = [self._queue(pipe, write) for write in writes]
                    results = pipe.execute()
            except RedisError as exc:  # the events reached the clients; the stream waits
                self._failed(writes, exc)
                return
            self._done(writes, calls, results)

    def _due(self) -> list[_Write]:
        with self._lock:
            writes = []
            for cid, task in self._tasks.items():
                if task.whole or task.written < len(task.events):
                    start = 0 if task.whole else task.written
                    writes.append(_Write(cid, task, task.whole, start, len(task.events)))
                    task.whole = False
            return writes

    def _queue(self, pipe: Any, write: _Write) -> int:
        """Queue the write's script calls on the pipeline; returns how many."""
        task, cid = write.task, write.conversation_id
        keep = LOG_KEEP_SECONDS if task.ended else 0
        first, calls = write.start, 0
        while calls == 0 or first < write.end:
            chunk = task.events[first : min(first + CHUNK_EVENTS, write.end)]
            args: list[Any] = [task.replays_after, keep, int(write.whole and calls == 0)]
            for event in chunk:
                entry = json.dumps([event.name, event.to_wire()], ensure_ascii=False)
                args += [event.seq, entry]
            self._write(keys=[log_key(cid), state_key(cid)], args=args, client=pipe)
            first, calls = first + len(chunk), calls + 1
        return calls

    def _failed(self, writes: list[_Write], exc: RedisError) -> None:
        with self._lock:
            for write in writes:
                write.task.whole = write.task.whole or write.whole
        now = time.monotonic()
        if now - self._warned_at > WARN_EVERY_SECONDS:
            self._warned_at = now
            log.warning(
                "could not log events in Redis; trying again",
                extra={"fields": {"tasks": len(writes), "error": str(exc)}},
            )

    def _done(self, writes: list[_Write], calls: list[int], results: list[Any]) -> None:
        with self._lock:
            at = 0
            for write, count in zip(writes, calls, strict=True):
                task, answers = write.task, results[at : at + count]
                at += count
                if -1 in answers:  # Redis lost the stream: written whole next time
                    task.whole = True
                    self._wake.set()
                    continue
                task.written = max(task.written, write.end)
                drained = not task.whole and task.written == len(task.events)
                if task.ended and drained and self._tasks.get(write.conversation_id) is task:
                    del self._tasks[write.conversation_id]

    def read(self, conversation_id: str, after_seq: int) -> LoggedEvents | None:
        """The stream's events after `after_seq`, as far as they are whole (None: none kept)."""
        after = max(after_seq, 0)
        try:
            with self._redis.pipeline(transaction=True) as pipe:
                pipe.hgetall(state_key(conversation_id))
                pipe.xrange(log_key(conversation_id), min=f"{after + 1}-0")
                state, entries = pipe.execute()
        except RedisError:
            return None
        if not state:
            return None
        last_seq = int(state.get("last_seq", 0))
        logged = [(int(str(id_).split("-")[0]), json.loads(fields["e"])) for id_, fields in entries]
        # Without replays_after (an older writer's state), the stream's own seqs tell.
        replays_after = int(state.get("replays_after", 0))
        events, replays_after = whole_tail(logged, after, replays_after, last_seq)
        return LoggedEvents(events, last_seq, replays_after)

    def last_seq(self, conversation_id: str) -> int:
        try:
            return int(self._redis.hget(state_key(conversation_id), "last_seq") or 0)
        except (RedisError, ValueError):
            return 0

    def close(self) -> None:
        self.flush()
        self._closed = True


def whole_tail(
    logged: list[tuple[int, Any]], after: int, replays_after: int, last_seq: int
) -> tuple[list[tuple[str, dict[str, Any]]], int]:
    """What of a stream's `logged` (seq, [name, payload]) entries after `after` can be replayed,
    and the seq after which that is whole: a hole (events Redis lost, or never got) makes only
    what follows it whole, and a stream that stops short of `last_seq` makes nothing whole."""
    expected = max(after, replays_after) + 1
    tail: list[tuple[str, dict[str, Any]]] = []
    for seq, (name, payload) in logged:
        if seq > expected:
            replays_after, tail = seq - 1, []
        tail.append((name, payload))
        expected = seq + 1
    if expected <= last_seq:
        return [], last_seq
    return tail, replays_after


def log_key(conversation_id: str) -> str:
    return f"{PREFIX}log:{conversation_id}"


def state_key(conversation_id: str) -> str:
    return f"{PREFIX}state:{conversation_id}"
