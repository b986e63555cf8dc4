"""Scale-out: a client that has seen a task's `done`, on either process and whatever its
reason, can send the next message at once (two `main.py web` processes, one data dir, a real
redis-server). Skipped, with the reason, where redis-server is not installed."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib

from core.services import build_services
from history.conversation import LEAF
from history.store import ConversationStore
from protocol.events import Done, Event
from protocol.records import ToolCallRecord
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import EventClient, connected
from tests.kit.cluster import RedisServer, cluster, missing_programs
from tests.kit.events import Received
from tests.kit.settings import make_settings
from tests.kit.waits import wait_until
from web.cluster.redis_cluster import RedisCluster
from web.hub import TerminalHub

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(missing_programs() is not None, reason=str(missing_programs())),
]

ROUNDS = 20
REAP_SECONDS = 40  # lease (8 s) + heartbeat (2 s), with room for a loaded machine


def wait_dones(client: EventClient, cid: str, count: int, timeout: float = 30) -> dict[str, Any]:
    """Block until the client has seen `count` dones of the conversation; the last one."""
    client.wait_done(cid, timeout, count=count)
    return client.dones(cid)[-1]


class SendOnDone:
    """Sends the next message from the client's read loop the moment `done` number N
    arrives (for each N in `texts`; one conversation per test), before the client even
    records it: no client answers sooner. Notes who held the task lease just before."""

    def __init__(self, client: EventClient, redis_url: str, texts: dict[int, str]) -> None:
        self.client, self.texts = client, texts
        self.seen = 0
        self.acks: dict[int, dict[str, Any]] = {}
        # decode_responses=True: a str or None, though redis-py's get() says bytes | str | None
        self.leases: dict[int, bytes | str | None] = {}
        self._redis = redis_lib.Redis.from_url(redis_url, decode_responses=True)
        client.on("done", self._on_done)

    def _on_done(self, payload: dict[str, Any]) -> None:
        self.seen += 1
        number, cid = self.seen, payload["conversation_id"]
        if number in self.texts:
            self.leases[number] = self._redis.get(f"agent:lease:{cid}")
            self.client.emit(
                "send_message",
                {"conversation_id": cid, "text": self.texts[number]},
                callback=lambda ack: self._acked(number, cid, ack),
            )
        self.client.record("done", payload)

    def _acked(self, number: int, cid: str, ack: dict[str, Any]) -> None:
        if not ack["ok"]:  # who held the conversation when it was refused, for the report
            ack["lease_then"] = self._redis.get(f"agent:lease:{cid}")
            ack["running_then"] = self._redis.hget("agent:running", cid)
        self.acks[number] = ack


def refused(senders: list[SendOnDone]) -> dict[int, dict[str, Any]]:
    """The acks that refused a message, by the number of the `done` it was sent on."""
    return {n: ack for s in senders for n, ack in s.acks.items() if not ack["ok"]}


def history(data_dir: Path, cid: str) -> list[dict[str, Any]]:
    lines = (data_dir / "conversations" / cid / "messages.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_the_next_message_sent_on_done_at_the_other_process_is_never_busy(
    redis: RedisServer, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """Tasks alternate between the processes: each is sent by a client of the process that
    did not run the one before, the moment that one's `done` reaches it."""
    fake_llm.script(*(Reply(content=f"Answer {n}.") for n in range(ROUNDS)))
    with (
        cluster(
            tmp_path, redis.url(0), base_url=fake_llm.base_url, api_key=fake_llm.api_key
        ) as servers,
        connected(servers[0].url) as on_a,
        connected(servers[1].url) as on_b,
    ):
        senders = [
            SendOnDone(
                client, redis.url(0), {n: f"round {n}" for n in range(1, ROUNDS) if n % 2 == parity}
            )
            for parity, client in enumerate((on_a, on_b))
        ]
        cid = on_a.start("round 0")
        on_b.call("join", {"conversation_id": cid, "after_seq": 0})
        on_a.wait_until(
            lambda _: len(on_a.dones(cid)) == ROUNDS or refused(senders),
            timeout=60,
            what="every round's done, or a refusal",
        )
        leases = {n: held for sender in senders for n, held in sender.leases.items()}
        assert not refused(senders), (refused(senders), leases)
        wait_dones(on_b, cid, ROUNDS)
        ended = on_b.call("get_conversation", {"conversation_id": cid})
    acks = {n: ack for sender in senders for n, ack in sender.acks.items()}
    assert sorted(acks) == list(range(1, ROUNDS)), acks
    assert set(leases.values()) == {None}, leases  # freed before each `done` went out
    assert [d["reason"] for d in on_a.dones(cid)] == ["complete"] * ROUNDS
    contents = [r["content"] for r in ended["messages"] if r["role"] == "assistant"]
    assert contents == [f"Answer {n}." for n in range(ROUNDS)]
    ends = ended["conversation"]["meta"]["task_ends"]  # none lost between the processes
    assert len(ends) == ROUNDS and {e["reason"] for e in ends.values()} == {"complete"}


def started(events: list[Received]) -> bool:
    return any(
        e.name == "tool" and e.payload["phase"] == "output" and "started" in e.payload["delta"]
        for e in events
    )


def test_after_a_kill_the_survivor_s_interrupted_done_lets_the_next_message_in(
    redis: RedisServer, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """The owner dies mid-command: the survivor ends the task (`done` interrupted, the call's
    result recorded as interrupted) and takes the message sent the moment `done` arrives."""
    command = "echo started; sleep 20"
    fake_llm.script(
        Reply(tool_calls=[Call("run_command", {"command": command})]), Reply(content="Back.")
    )
    with cluster(
        tmp_path, redis.url(1), base_url=fake_llm.base_url, api_key=fake_llm.api_key
    ) as servers:
        a, b = servers
        with connected(a.url) as on_a, connected(b.url) as on_b:
            cid = on_a.start("a task that dies")
            on_b.call("join", {"conversation_id": cid, "after_seq": 0})
            sender = SendOnDone(on_b, redis.url(1), {1: "go on"})
            on_b.wait_until(started, timeout=30, what="the command's output on B")
            live = on_b.call("get_conversation", {"conversation_id": cid})
            assert live["running"] and [r["role"] for r in live["messages"]] == [
                "user",
                "assistant",
            ], live  # a call running in another process is not answered for it
            a.kill()  # as a crash: no shutdown, no lease released
            done = wait_dones(on_b, cid, 1, timeout=REAP_SECONDS)
            assert done["reason"] == "interrupted"
            ack = on_b.wait_until(lambda _: sender.acks.get(1), what="the next message's ack")
            assert ack["ok"], ack
            assert wait_dones(on_b, cid, 2)["reason"] == "complete"
            assert sender.leases == {1: None}
    records = history(tmp_path / "data", cid)
    assert [r["role"] for r in records] == ["user", "assistant", "tool", "user", "assistant"]
    call_id = records[1]["tool_calls"][0]["id"]
    result = records[2]
    assert (result["tool_call_id"], result["parent_id"]) == (call_id, records[1]["id"])
    assert result["meta"]["interrupted"] is True and result["meta"]["ok"] is False
    assert records[3]["parent_id"] == result["id"]
    request = fake_llm.chat_requests[-1]
    assert request.status == 200
    assert [m["role"] for m in request.messages][-3:] == ["assistant", "tool", "user"]
    assert request.messages[-2]["content"] == result["content"]


class LeaseAtDone:
    """The `send` of an in-process hub: notes who holds the task lease as each top-level
    `done` is handed over for the clients (before any client can have seen it)."""

    def __init__(self, redis_url: str) -> None:
        self._redis = redis_lib.Redis.from_url(redis_url, decode_responses=True)
        # (reason, lease holder, running): the holder a str or None, as for SendOnDone.leases
        self.seen: list[tuple[str, bytes | str | None, bool]] = []

    def __call__(self, event: Event) -> None:
        if isinstance(event, Done) and event.depth is None:
            cid = str(event.conversation_id)
            holder = self._redis.get(f"agent:lease:{cid}")
            running = bool(self._redis.hexists("agent:running", cid))
            self.seen.append((event.reason, holder, running))


@contextlib.contextmanager
def in_process_hub(
    fake_llm: FakeLLM, tmp_path: Path, redis_url: str, send: LeaseAtDone
) -> Iterator[TerminalHub]:
    services = build_services(make_settings(fake_llm, tmp_path))
    redis_cluster = RedisCluster(redis_url)
    try:
        hub = TerminalHub(services, send, cluster=redis_cluster)
        redis_cluster.serve(hub.handle, in_thread)
        yield hub
    finally:
        redis_cluster.close()
        services.close()


def in_thread(target: Callable[..., Any], *args: Any) -> None:
    threading.Thread(target=target, args=args, daemon=True).start()


def test_a_task_s_lease_is_free_before_its_done_is_sent(
    redis: RedisServer, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.script(Reply(content="One."), Reply(content="Two."))
    send = LeaseAtDone(redis.url(2))
    with in_process_hub(fake_llm, tmp_path, redis.url(2), send) as hub:
        terminal = hub.new()

        def run(text: str) -> None:
            before = len(send.seen)
            terminal.start(
                text,
                parent_id=LEAF,
                mode=None,
                approval=None,
                run_in_background=in_thread,
                on_begun=lambda _: hub.register(terminal),
            )
            wait_until(lambda: len(send.seen) > before, 20, f"the done of {text!r}")

        run("first")
        run("at once")
    assert send.seen == [("complete", None, False)] * 2


def test_the_survivor_frees_the_lease_before_it_sends_interrupted(
    redis: RedisServer, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """A task whose process died (its `running` entry stays, its lease expired) is ended by
    the reaper, whose `done` goes out with the conversation free again."""
    conversation = ConversationStore(tmp_path / "data").create(title="left running")
    user = conversation.append("user", "run it")
    conversation.append("assistant", "", tool_calls=[tool_call("call-1", "sleep 20")])
    redis_lib.Redis.from_url(redis.url(3)).hset(
        "agent:running",
        conversation.id,
        json.dumps({"owner": "a-dead-process", "message_id": user["id"]}),
    )
    send = LeaseAtDone(redis.url(3))
    with in_process_hub(fake_llm, tmp_path, redis.url(3), send):
        wait_until(lambda: send.seen, REAP_SECONDS, "the reaper's done")
    assert send.seen == [("interrupted", None, False)]
    records = history(tmp_path / "data", conversation.id)
    assert [r["role"] for r in records] == ["user", "assistant", "tool"]
    assert records[2]["tool_call_id"] == "call-1" and records[2]["meta"]["interrupted"] is True


def tool_call(call_id: str, command: str) -> ToolCallRecord:
    arguments = json.dumps({"command": command})
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "run_command", "arguments": arguments},
    }


def test_a_task_that_ends_as_it_is_reaped_is_not_taken_for_a_dead_one(redis: RedisServer) -> None:
    """The reaper reads the running tasks, then finds no lease. The task may have ended in
    between (its end removes its entry and its lease at once): then nothing is claimed, and no
    lease is left behind to hold the next message off as busy. A dead process's task (its
    entry still there, no lease) is taken over."""
    reaper = RedisCluster(redis.url(7))
    cid, lease = "c" * 32, f"agent:lease:{'c' * 32}"
    read = json.dumps({"owner": "elsewhere", "message_id": "m1"})
    try:
        assert not reaper.claim_orphan(cid, read)  # ended since it was read
        assert reaper._redis.get(lease) is None
        reaper._redis.hset("agent:running", cid, json.dumps({"owner": "x", "message_id": "m2"}))
        assert not reaper.claim_orphan(cid, read)  # another task runs there now
        reaper._redis.hset("agent:running", cid, read)
        assert reaper.claim_orphan(cid, read)  # its process died: no lease, the entry as read
        assert reaper._redis.get(lease) == reaper.process_id
    finally:
        reaper._redis.delete(lease, "agent:running")
        reaper.close()
