"""Several web processes behind one balancer, coordinated through Redis (AGENT_REDIS_URL).

What each key holds (all under `agent:`):
- `lease:CID`  the process id running the conversation's task; `SET NX EX`, renewed by a
  heartbeat, released by a compare-and-delete (Redis 7.0 has no `SET IFEQ`), at the latest
  before the task's `done` goes out (a client that saw it may send the next message at once);
- `running`    a hash CID -> {"owner", "message_id"}: what runs where, so a task whose lease
  expired (its process died) is found and marked interrupted;
- `log:CID`    a stream of the running or last task's events, id `SEQ-0`, expiring a while
  after the task's records are stored; `state:CID` its `last_seq` and `replays_after`
  (replay_log.py);
- `session:CID` the process id holding the conversation's sandbox session (its background
  processes): set when one of them starts, renewed by the heartbeat while the session lives,
  released when it ends; process ops sent to another process are applied there;
- `proc:PID`   the channel where the process PID takes commands (cancel, approve, join,
  status, process ops); it answers on the list named in the request (`reply:...`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis
from redis.exceptions import RedisError

from protocol.cluster import (
    Answer,
    CancelCommand,
    Command,
    Failed,
    ProcessCommand,
    ReapCommand,
    RunningTask,
    UnknownCommand,
    answer_from_wire,
    command_from_wire,
    command_to_wire,
)
from protocol.events import Event
from web.cluster import ClusterUnavailable, Handler, LoggedEvents
from web.cluster.replay_log import LOG_KEEP_SECONDS, PREFIX, ReplayLog, log_key, state_key

log = logging.getLogger(__name__)

LEASE_SECONDS = 8  # a dead process's task is found at most this + HEARTBEAT_SECONDS later
HEARTBEAT_SECONDS = 2.0
ASK_SECONDS = 1.5  # how long a command waits for the owner's answer
REPLY_KEEP_SECONDS = 10
RETRY_SECONDS = 1.0
# After Redis restarts empty, a live process takes its tasks' leases back at its next
# heartbeat: a join waits that long for the owner of a task the history shows unended.
SETTLE_SECONDS = LEASE_SECONDS + HEARTBEAT_SECONDS
LISTEN_POLL_SECONDS = 1.0  # how soon the listener notices close()

# Renew our lease (1), or take it back when it vanished (2: Redis restarted); 0: another owns it.
_RENEW = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] or not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
  return holder and 1 or 2
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
# End the task of one user message, in one step: unless `running` still names it, another
# task (here or elsewhere) may hold the conversation by now, so nothing is touched.
_END = """
local entry = redis.call('HGET', KEYS[2], ARGV[2])
if not entry or (cjson.decode(entry)['message_id'] or '') ~= ARGV[3] then return 0 end
redis.call('HDEL', KEYS[2], ARGV[2])
redis.call('EXPIRE', KEYS[3], ARGV[4])
redis.call('EXPIRE', KEYS[4], ARGV[4])
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""

# Take over a task whose process died: its `running` entry still as read, and no lease. A task
# ending meanwhile removes both at once (_END), so an ended task is never taken for a dead one.
_CLAIM_ORPHAN = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if redis.call('HGET', KEYS[2], ARGV[2]) ~= ARGV[3] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[4])
return 1
"""


class RedisCluster:
    """A web process's view of the others: leases, replay logs and commands, over Redis."""

    shared = True

    def __init__(self, url: str, *, sleep: Callable[[float], Any] = time.sleep) -> None:
        self.process_id = uuid.uuid4().hex[:12]
        self._redis = redis.Redis.from_url(
            url,
            decode_responses=True,
            socket_timeout=5,
            socket_connect_timeout=3,
            health_check_interval=30,
        )
        self._url = url
        self._sleep = sleep
        self._renew = self._redis.register_script(_RENEW)
        self._release = self._redis.register_script(_RELEASE)
        self._end = self._redis.register_script(_END)
        self._claim_orphan = self._redis.register_script(_CLAIM_ORPHAN)
        self._held: dict[str, str] = {}  # conversation id -> message id of our running task
        self._sessions: dict[str, Callable[[], bool]] = {}  # conversation id -> whether it lives
        self._start: Callable[..., Any] | None = None
        self._leases = threading.Lock()  # held while renewing: no renewal outlives its end
        self._log = ReplayLog(self._redis, sleep)
        self._closed = False

    @property
    def channel(self) -> str:
        return f"{PREFIX}proc:{self.process_id}"

    # --- leases -----------------------------------------------------------------------

    def claim(self, conversation_id: str) -> bool:
        try:
            return bool(
                self._redis.set(_lease(conversation_id), self.process_id, nx=True, ex=LEASE_SECONDS)
            )
        except RedisError as exc:
            raise ClusterUnavailable(f"Redis does not answer ({exc}); try again shortly") from exc

    def orphan(self, conversation_id: str) -> str | None:
        try:
            entry = self._redis.hget(f"{PREFIX}running", conversation_id)
        except RedisError:
            return None
        task = RunningTask.from_wire(entry)
        if task is None or task.owner == self.process_id:
            return None
        return task.message_id or None

    def begin(self, conversation_id: str, message_id: str, replays_after: int) -> None:
        with self._leases:
            self._held[conversation_id] = message_id
        self._log.begin(conversation_id, replays_after)
        info = RunningTask(self.process_id, message_id).to_wire()
        try:
            self._redis.hset(f"{PREFIX}running", conversation_id, info)
        except RedisError as exc:  # the heartbeat puts it back once Redis answers
            log.warning(
                "could not record a task start in Redis",
                extra={"fields": {"conversation_id": conversation_id, "error": str(exc)}},
            )

    def record(self, event: Event) -> None:
        """Queue the event for its conversation's stream: written in batches, off the path
        of the token (the owner replays a running task from memory; `end` flushes)."""
        self._log.record(event)

    def end(self, conversation_id: str, message_id: str) -> None:
        self._log.end(conversation_id)
        with self._leases:
            if self._held.get(conversation_id) == message_id:
                del self._held[conversation_id]
        try:
            self._end(
                keys=[
                    _lease(conversation_id),
                    f"{PREFIX}running",
                    log_key(conversation_id),
                    state_key(conversation_id),
                ],
                args=[self.process_id, conversation_id, message_id, LOG_KEEP_SECONDS],
            )
        except RedisError as exc:  # the lease expires by itself
            log.warning(
                "could not end a task in Redis",
                extra={"fields": {"conversation_id": conversation_id, "error": str(exc)}},
            )

    def release(self, conversation_id: str) -> None:
        try:
            self._release(keys=[_lease(conversation_id)], args=[self.process_id])
        except RedisError as exc:  # it expires by itself
            log.warning(
                "could not release a task lease",
                extra={"fields": {"conversation_id": conversation_id, "error": str(exc)}},
            )

    # --- what runs where --------------------------------------------------------------

    def owner(self, conversation_id: str) -> str | None:
        try:
            holder = self._redis.get(_lease(conversation_id))
        except RedisError:
            return None
        return _text(holder) if holder and _text(holder) != self.process_id else None

    def running(self) -> set[str]:
        try:
            entries = self._redis.hgetall(f"{PREFIX}running")
        except RedisError:
            return set()
        return {_text(cid) for cid, info in entries.items() if not self._ours(info)}

    def _ours(self, entry: bytes | str) -> bool:
        task = RunningTask.from_wire(_text(entry))
        return task is not None and task.owner == self.process_id

    def last_seq(self, conversation_id: str) -> int:
        return self._log.last_seq(conversation_id)

    def replay_log(self, conversation_id: str, after_seq: int) -> LoggedEvents | None:
        return self._log.read(conversation_id, after_seq)

    def settling(self) -> float:
        try:
            uptime = int(self._redis.info("server").get("uptime_in_seconds", SETTLE_SECONDS))
        except RedisError as exc:
            raise ClusterUnavailable(f"Redis does not answer ({exc}); try again shortly") from exc
        return float(max(SETTLE_SECONDS - uptime, 0))

    # --- sandbox sessions ---------------------------------------------------------------

    def hold_session(self, conversation_id: str, alive: Callable[[], bool]) -> None:
        with self._leases:
            self._sessions[conversation_id] = alive
        try:  # the newest session is where the conversation's processes start from now on
            self._redis.set(_session(conversation_id), self.process_id, ex=LEASE_SECONDS)
        except RedisError as exc:  # the heartbeat sets it once Redis answers
            log.warning(
                "could not record a sandbox session in Redis",
                extra={"fields": {"conversation_id": conversation_id, "error": str(exc)}},
            )

    def session_owner(self, conversation_id: str) -> str | None:
        try:
            holder = self._redis.get(_session(conversation_id))
        except RedisError:
            return None
        return _text(holder) if holder and _text(holder) != self.process_id else None

    def _keep_sessions(self) -> None:
        """Renew the leases of our sessions that live; give back the others'."""
        with self._leases:
            sessions = list(self._sessions.items())
        for cid, alive in sessions:
            key = _session(cid)
            kept = alive() and self._renew(keys=[key], args=[self.process_id, LEASE_SECONDS])
            if not kept:
                self._release(keys=[key], args=[self.process_id])
                with self._leases:
                    if self._sessions.get(cid) is alive:
                        del self._sessions[cid]

    # --- commands between processes ---------------------------------------------------

    def ask(self, owner: str, command: Command, wait: float | None = None) -> Answer | None:
        reply = f"{PREFIX}reply:{uuid.uuid4().hex}"
        try:
            heard = self._redis.publish(
                f"{PREFIX}proc:{owner}", json.dumps({**command_to_wire(command), "reply": reply})
            )
            if not heard:
                return None
            got = self._redis.blpop([reply], timeout=wait or ASK_SECONDS)
        except RedisError as exc:
            log.warning(
                "could not reach the owner process",
                extra={"fields": {"owner": owner, "op": command.op, "error": str(exc)}},
            )
            return None
        return answer_from_wire(command, _json(got[1])) if got else None

    def serve(self, handler: Handler, start: Callable[..., Any]) -> None:
        self._start = start
        start(self._listen, handler)
        start(self._keep_leases, handler)
        start(self._log.run)

    def _listen(self, handler: Handler) -> None:
        """Take commands from our channel until closed, resubscribing after a Redis outage."""
        while not self._closed:
            try:
                with self._redis.pubsub(ignore_subscribe_messages=True) as pubsub:
                    pubsub.subscribe(self.channel)
                    while not self._closed:
                        message = pubsub.get_message(timeout=LISTEN_POLL_SECONDS)
                        if message is not None and message.get("type") == "message":
                            self._take(handler, _json(message.get("data")))
            except (RedisError, OSError, ValueError) as exc:  # the latter two: close() ran
                if self._closed:
                    return
                log.warning(
                    "lost the command channel; resubscribing", extra={"fields": {"error": str(exc)}}
                )
                self._sleep(RETRY_SECONDS)

    def _take(self, handler: Handler, request: dict[str, Any]) -> None:
        """Answer a command; a process op (which may wait seconds for a process to stop) in
        a task of its own, so no cancel or approval waits behind it."""
        if request.get("op") == ProcessCommand.op and self._start is not None:
            self._start(self._answer, handler, request)
        else:
            self._answer(handler, request)

    def _answer(self, handler: Handler, request: dict[str, Any]) -> None:
        reply = request.pop("reply", None)
        answer: Answer
        try:
            answer = handler(command_from_wire(request))
        except UnknownCommand as exc:  # from a newer process: it acts as if none ran the task
            answer = Failed("bad_request", str(exc))
        except Exception as exc:
            log.exception("a command from another process failed")
            answer = Failed("internal_error", f"{type(exc).__name__}: {exc}")
        if isinstance(reply, str) and reply.startswith(f"{PREFIX}reply:"):
            with self._redis.pipeline() as pipe:
                pipe.rpush(reply, json.dumps(answer.to_wire()))
                pipe.expire(reply, REPLY_KEEP_SECONDS)
                pipe.execute()

    def _keep_leases(self, handler: Handler) -> None:
        """Renew our leases; reap the tasks of processes whose lease expired."""
        while not self._closed:
            self._sleep(HEARTBEAT_SECONDS)
            try:
                self._heartbeat(handler)
                self._keep_sessions()
                self._reap(handler)
            except RedisError as exc:
                log.warning(
                    "Redis does not answer the heartbeat", extra={"fields": {"error": str(exc)}}
                )

    def _heartbeat(self, handler: Handler) -> None:
        lost = []
        with self._leases:  # a task that ends meanwhile is not taken back after its end
            for cid, message_id in self._held.items():
                renewed = self._renew(keys=[_lease(cid)], args=[self.process_id, LEASE_SECONDS])
                if not renewed:
                    lost.append(cid)
                    continue
                if renewed == 2:  # Redis restarted empty: it lost the task's stream as well
                    self._log.lost(cid)
                # Put back what a restarted Redis forgot; a no-op otherwise.
                entry = RunningTask(self.process_id, message_id).to_wire()
                self._redis.hset(f"{PREFIX}running", cid, entry)
        for cid in lost:
            log.error(
                "lost the lease of a running task; stopping it",
                extra={"fields": {"conversation_id": cid}},
            )
            handler(CancelCommand(cid))

    def claim_orphan(self, conversation_id: str, entry: str) -> bool:
        """Take the lease of a task whose process died: only if its `running` entry is still
        `entry` (as read) and no lease is held. Checked and claimed apart, a task ending in
        between was taken for a dead one, and that lease (which no `running` entry names, so
        no end releases it) held the next message off as busy until it expired."""
        keys = [_lease(conversation_id), f"{PREFIX}running"]
        args: list[str | int] = [self.process_id, conversation_id, entry, LEASE_SECONDS]
        return bool(self._claim_orphan(keys=keys, args=args))

    def _reap(self, handler: Handler) -> None:
        for key, info in self._redis.hgetall(f"{PREFIX}running").items():
            cid, task = _text(key), RunningTask.from_wire(_text(info))
            if self._ours(info) or self._redis.exists(_lease(cid)):
                continue
            if self.claim_orphan(cid, _text(info)):
                log.warning(
                    "a task's process stopped answering; marking it interrupted",
                    extra={"fields": {"conversation_id": cid, "info": info}},
                )
                try:  # the handler's `interrupted` done ends it, lease included, before it goes out
                    handler(ReapCommand(cid))
                finally:  # a no-op then; else (nothing to mark) end it here
                    self.end(cid, task.message_id if task is not None else "")

    def close(self) -> None:
        self._closed = True
        with self._leases:
            held = dict(self._held)
        for cid, message_id in held.items():
            self.end(cid, message_id)
        for cid in list(self._sessions):
            with contextlib.suppress(RedisError):
                self._release(keys=[_session(cid)], args=[self.process_id])
        self._log.close()
        self._redis.close()


def _text(value: bytes | str) -> str:
    """A value as text: the client decodes every answer, though its types say bytes too."""
    return value.decode() if isinstance(value, bytes) else value


def _lease(conversation_id: str) -> str:
    return f"{PREFIX}lease:{conversation_id}"


def _session(conversation_id: str) -> str:
    return f"{PREFIX}session:{conversation_id}"


def _json(text: object) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
