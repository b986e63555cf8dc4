"""Scale-out through a Redis restart: redis-server (no persistence) stopped and started again
on its port while a task streams on process A to a watcher on process B. The watcher is told
when the message queue goes and when it is back, and no `join` says a replay is whole when it
is not. Skipped, with the reason, where redis-server or haproxy is not installed."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib

from protocol.cluster import NotHere
from protocol.events import Token
from tests.fake_llm import FakeLLM, Reply
from tests.kit.clients import EventClient, connected
from tests.kit.cluster import ClusterServer, RedisServer, cluster, missing_programs
from tests.kit.events import Received
from tests.kit.waits import wait_until
from web.cluster.redis_cluster import RedisCluster

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(missing_programs() is not None, reason=str(missing_programs())),
]

# 250 pieces of 5 characters, one every 30 ms: a task that streams on for seconds after
# redis-server is back.
ANSWER = "".join(f"w{n:03d} " for n in range(250))


def long_answer() -> Reply:
    return Reply(content=ANSWER, chunk_size=5, delay=0.03)


def seqs(events: list[Received]) -> list[int]:
    return [e.payload["seq"] for e in events if "seq" in e.payload]


def notice(events: list[Received], code: str) -> int | None:
    """The index of the first `notice` with this code among `events`."""
    return next(
        (i for i, e in enumerate(events) if e.name == "notice" and e.payload["code"] == code),
        None,
    )


@pytest.fixture
def pair(redis: RedisServer, fake: FakeLLM, tmp_path: Path) -> Iterator[list[ClusterServer]]:
    with cluster(tmp_path, redis.url(0), base_url=fake.base_url, api_key=fake.api_key) as servers:
        yield servers


def watch_a_restart(redis: RedisServer, on_a: EventClient, on_b: EventClient) -> tuple[str, int]:
    """Start the long task on A with B watching; once B has seen some of it, stop
    redis-server, let A stream on without it, and start it again. Returns the conversation id
    and the last seq B had before Redis stopped."""
    cid = on_a.start("a long answer")
    assert on_b.call("join", {"conversation_id": cid, "after_seq": 0})["ok"]
    on_b.wait_until(lambda _: len(seqs(on_b.of(cid))) >= 20, what="the task's first events on B")
    before = max(seqs(on_b.of(cid)))
    redis.stop()
    sent = len(on_a.of(cid))
    on_a.wait_until(lambda _: len(on_a.of(cid)) >= sent + 20, what="A streaming without Redis")
    redis.start()
    return cid, before


def test_a_watcher_told_of_lost_events_rejoins_and_misses_none(
    redis: RedisServer, fake: FakeLLM, pair: list[ClusterServer]
) -> None:
    a, b = pair
    fake.script(long_answer())
    with connected(a.url) as on_a, connected(b.url) as on_b:
        cid, before = watch_a_restart(redis, on_a, on_b)
        on_b.wait_until(
            lambda _: notice(on_b.of(cid), "events_lost") is not None or on_b.dones(cid),
            timeout=30,
            what="B to say it lost events, or to get every one",
        )
        seen = on_b.of(cid)
        lost = notice(seen, "events_lost")
        if lost is not None:  # as the page does: join again after the last event it has
            last = max(seqs(seen[:lost]))
            assert seqs(seen[:lost]) == list(range(1, last + 1))
            ack = on_b.call("join", {"conversation_id": cid, "after_seq": last}, timeout=30)
            # Whole: the owner replays the running task, or it wrote its lost stream again.
            assert ack["ok"] and ack["replays_after"] <= last <= ack["last_seq"], ack
        on_b.wait_done(cid, timeout=30)
        done = on_a.wait_done(cid)[-1].payload["seq"]
        assert sorted(set(seqs(on_b.of(cid)))) == list(range(1, done + 1))
        assert on_b.of(cid)[-1].name == "done"
    # A page opened on B once it is over: every event after its seq, or told to reload.
    with connected(b.url) as late:
        ack = late.call("join", {"conversation_id": cid, "after_seq": before})
        assert ack["ok"] and not ack["running"], ack
        assert ack["replays_after"] <= before and ack["last_seq"] == done, ack
        assert seqs(late.wait_done(cid)) == list(range(before + 1, done + 1))


def test_a_watcher_is_told_when_redis_goes_and_gets_the_events_once_it_is_back(
    redis: RedisServer, fake: FakeLLM, pair: list[ClusterServer]
) -> None:
    a, b = pair
    fake.script(long_answer())
    with connected(a.url) as on_a, connected(b.url) as on_b:
        cid, before = watch_a_restart(redis, on_a, on_b)
        done = on_a.wait_done(cid)[-1].payload["seq"]
        on_b.wait_done(cid, timeout=30)
        seen = on_b.of(cid)
    gone, back = notice(seen, "relay_lost"), notice(seen, "events_lost")
    assert gone is not None and back is not None and gone < back, [e.name for e in seen]
    assert seqs(seen[:gone]) == list(range(1, len(seqs(seen[:gone])) + 1))
    # Once Redis is back, the events A sends reach B again, in order, up to the task's end.
    later = seqs(seen[back:])
    assert later == list(range(later[0], done + 1)) and later[0] > before


def test_a_message_sent_while_redis_is_down_is_refused_as_unavailable(
    redis: RedisServer, fake: FakeLLM, tmp_path: Path
) -> None:
    """protocol §13: no task starts while Redis does not answer, and the ack says why. (One
    process of a cluster: what refuses is its own Redis connection, not a peer.)"""
    fake.script(Reply(content="First."), Reply(content="Second."))
    alone = cluster(
        tmp_path, redis.url(0), base_url=fake.base_url, api_key=fake.api_key, processes=1
    )
    with alone as (a,), connected(a.url) as on_a:
        cid = on_a.start("first")
        on_a.wait_done(cid, 20)
        redis.stop()
        try:
            ack = on_a.call("send_message", {"conversation_id": cid, "text": "second"})
        finally:
            redis.start()
        assert ack["ok"] is False and ack["error"]["code"] == "unavailable", ack
        assert "Redis does not answer" in ack["error"]["message"]
        on_a.start("second", conversation_id=cid)  # Redis is back: it starts
        on_a.wait_done(cid, 20, count=2)
        assert [done["reason"] for done in on_a.dones(cid)] == ["complete", "complete"]


def test_a_log_with_a_hole_is_replayed_as_whole_only_after_it(redis: RedisServer) -> None:
    client = redis_lib.Redis.from_url(redis.url(5), decode_responses=True)
    cluster_view = RedisCluster(redis.url(5))

    def logged(cid: str, kept: list[int], state: dict[str, int]) -> None:
        for seq in kept:
            entry = json.dumps(["token", {"conversation_id": cid, "seq": seq}])
            client.xadd(f"agent:log:{cid}", {"e": entry}, id=f"{seq}-0")
        for key, value in state.items():
            client.hset(f"agent:state:{cid}", key, value)

    def replay(cid: str, after_seq: int) -> tuple[list[int], int]:
        answer = cluster_view.replay_log(cid, after_seq)
        assert answer is not None
        return [wire["seq"] for _, wire in answer.events], answer.replays_after

    try:
        # Redis restarted mid-task: the stream starts where the writes went on.
        logged("head", [6, 7, 8], {"last_seq": 8})
        assert replay("head", 3) == ([6, 7, 8], 5)
        # A batch lost in between.
        logged("middle", [1, 2, 3, 6, 7], {"replays_after": 0, "last_seq": 7})
        assert replay("middle", 0) == ([6, 7], 5)
        assert replay("middle", 6) == ([7], 0)
        # The newest events never reached the stream.
        logged("tail", [1, 2, 3], {"replays_after": 0, "last_seq": 5})
        assert replay("tail", 1) == ([], 5)
        logged("whole", [1, 2, 3, 4], {"replays_after": 0, "last_seq": 4})
        assert replay("whole", 2) == ([3, 4], 0)
    finally:
        cluster_view.close()
        client.close()


def test_the_owner_writes_a_stream_redis_forgot_again_whole(redis: RedisServer) -> None:
    client = redis_lib.Redis.from_url(redis.url(6), decode_responses=True)
    owner = RedisCluster(redis.url(6))
    owner.serve(lambda command: NotHere(), in_thread)

    def token(seq: int) -> Token:
        return Token("m1", f"t{seq}", conversation_id="c1", seq=seq)

    def replayed() -> tuple[list[int], int, int] | None:
        answer = owner.replay_log("c1", 0)
        if answer is None:
            return None
        return [wire["seq"] for _, wire in answer.events], answer.replays_after, answer.last_seq

    try:
        owner.begin("c1", "m1", replays_after=4)
        for seq in range(5, 9):
            owner.record(token(seq))
        wait_until(lambda: replayed() == ([5, 6, 7, 8], 4, 8), 5, "the stream written")
        client.flushdb()  # what a restart without persistence leaves
        owner.record(token(9))
        wait_until(lambda: replayed() == ([5, 6, 7, 8, 9], 4, 9), 5, "the stream written again")
    finally:
        owner.close()
        client.close()


def in_thread(target: Callable[..., Any], *args: Any) -> None:
    threading.Thread(target=target, args=args, daemon=True).start()
