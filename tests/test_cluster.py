"""Scale-out: two `main.py web` processes on one data dir, coordinated through a real
redis-server (and, once, reached through haproxy with sticky sessions). Skipped, with the
reason, where redis-server or haproxy is not installed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.services import build_services
from history.conversation import Conversation
from history.store import ConversationStore
from tests.fake_llm import Call, FakeLLM, Reply
from tests.kit.clients import StockSocketIOClient, assert_contiguous, connected
from tests.kit.cluster import ClusterServer, Haproxy, RedisServer, cluster, missing_programs
from tests.kit.events import Received
from tests.kit.settings import make_settings
from tests.kit.waits import wait_until
from web.cluster.redis_cluster import RedisCluster
from web.hub import TerminalHub

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(missing_programs() is not None, reason=str(missing_programs())),
]

ANSWER = "Several processes share this answer, one small piece after another. "


@pytest.fixture(scope="module")
def pair(
    redis: RedisServer, fake: FakeLLM, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[ClusterServer]]:
    root = tmp_path_factory.mktemp("pair")
    with cluster(root, redis.url(0), base_url=fake.base_url, api_key=fake.api_key) as servers:
        yield servers


def slow(text: str = ANSWER, delay: float = 0.03, **extra: Any) -> Reply:
    return Reply(content=text, chunk_size=3, delay=delay, **extra)


def tokens(events: list[Received]) -> str:
    return "".join(e.payload["text"] for e in events if e.name == "token")


def done_of(events: list[Received]) -> dict[str, Any]:
    return next(e.payload for e in events if e.name == "done")


def check_streams_across(servers: list[ClusterServer], fake: FakeLLM) -> None:
    a, b = servers
    fake.script(slow())
    with connected(a.url) as on_a, connected(b.url) as on_b:
        cid = on_a.start("write it")
        ack = on_b.call("join", {"conversation_id": cid, "after_seq": 0})
        assert ack["ok"] and ack["running"] and ack["replays_after"] == 0, ack
        seen_a, seen_b = on_a.wait_done(cid), on_b.wait_done(cid)
    assert tokens(seen_b) == tokens(seen_a) == ANSWER
    assert_contiguous(seen_b)
    assert seen_b[0].payload["seq"] == 1
    assert [e.payload["seq"] for e in seen_b] == [e.payload["seq"] for e in seen_a]


@pytest.mark.parametrize("async_mode", ["threading", "eventlet"])
def test_a_task_started_on_one_process_streams_to_a_client_of_the_other(
    async_mode: str,
    redis: RedisServer,
    fake: FakeLLM,
    pair: list[ClusterServer],
    tmp_path: Path,
) -> None:
    if async_mode == "threading":
        check_streams_across(pair, fake)
        return
    with cluster(
        tmp_path, redis.url(1), base_url=fake.base_url, api_key=fake.api_key, async_mode=async_mode
    ) as servers:
        check_streams_across(servers, fake)


def test_a_reconnect_to_the_other_process_replays_from_its_seq_without_a_gap(
    pair: list[ClusterServer], fake: FakeLLM
) -> None:
    a, b = pair
    fake.script(slow(ANSWER * 2))
    with connected(a.url) as on_a:
        cid = on_a.start("write it")
        with connected(b.url) as first:
            first.call("join", {"conversation_id": cid, "after_seq": 0})
            first.wait_until(lambda events: len(events) >= 8, what="some events on B")
        seen = first.of(cid)
        last = seen[-1].payload["seq"]
        with connected(b.url) as again:
            ack = again.call("join", {"conversation_id": cid, "after_seq": last})
            assert ack["ok"] and ack["running"] and ack["replays_after"] <= last, ack
            rest = again.wait_done(cid)
        # A page that reloads on B mid-way renders the history, then joins after its seq.
        everything = on_a.wait_done(cid)
    assert rest[0].payload["seq"] == last + 1
    assert_contiguous(seen + rest)
    assert tokens(seen + rest) == tokens(everything) == ANSWER * 2


def test_a_reload_on_the_other_process_mid_task_shows_each_token_once(
    pair: list[ClusterServer], fake: FakeLLM
) -> None:
    a, b = pair
    fake.script(
        slow(
            "First the file. ",
            tool_calls=[Call("create_file", {"path": "n.md", "content": "# N\n"})],
        ),
        slow(ANSWER, delay=0.05),
    )
    with connected(a.url) as on_a:
        cid = on_a.start("write n.md")
        on_a.wait_until(
            lambda events: any(e.name == "tool" and e.payload["phase"] == "result" for e in events),
            what="the tool result",
        )
        with connected(b.url) as page:
            snapshot = page.call("get_conversation", {"conversation_id": cid})
            assert snapshot["ok"] and snapshot["running"], snapshot
            assert snapshot["status"]["state"] in ("thinking", "streaming", "tool"), snapshot
            ack = page.call("join", {"conversation_id": cid, "after_seq": snapshot["seq"]})
            assert ack["ok"] and ack["replays_after"] <= snapshot["seq"], ack
            later = page.wait_done(cid)
    stored = "".join(r["content"] for r in snapshot["messages"] if r["role"] == "assistant")
    assert stored + tokens(later) == "First the file. " + ANSWER
    assert [r["role"] for r in snapshot["messages"]] == ["user", "assistant", "tool"]
    assert_contiguous(later)


def test_cancel_and_approve_sent_to_the_other_process_act_within_two_seconds(
    pair: list[ClusterServer], fake: FakeLLM
) -> None:
    a, b = pair
    fake.script(
        Reply(tool_calls=[Call("run_command", {"command": "echo hi"})]),
        slow(ANSWER * 20, delay=0.05),
    )
    with connected(a.url) as on_a, connected(b.url) as on_b:
        cid = on_a.start("run it", approval="ask")
        on_b.call("join", {"conversation_id": cid, "after_seq": 0})
        asked = on_b.wait_until(
            lambda events: next(
                (e for e in events if e.name == "tool" and e.payload["phase"] == "approval"), None
            ),
            what="the approval request on B",
        )
        ack = on_b.call(
            "approve",
            {
                "conversation_id": cid,
                "call_id": asked.payload["call_id"],
                "approved": True,
                "always": True,
            },
        )
        assert ack == {"ok": True, "always_allowed": ["run_command"]}
        at = on_a.wait_until(
            lambda events: next(
                (e.at for e in events if e.name == "tool" and e.payload["phase"] == "result"), None
            ),
            timeout=2,
            what="the command run on A",
        )
        assert at
        on_a.wait_until(lambda events: any(e.name == "token" for e in events), what="tokens")
        ack = on_b.call("cancel", {"conversation_id": cid})
        assert ack == {"ok": True}
        on_a.wait_done(cid, timeout=2)
        assert done_of(on_a.of(cid))["reason"] == "cancelled"
        missing = on_b.call("cancel", {"conversation_id": cid})
        assert missing["ok"] is False and missing["error"]["code"] == "not_running"


def test_busy_and_running_hold_across_processes(pair: list[ClusterServer], fake: FakeLLM) -> None:
    a, b = pair
    fake.script(slow(ANSWER * 3), slow("Now on B."))
    with connected(a.url) as on_a, connected(b.url) as on_b:
        cid = on_a.start("a long one")
        busy = on_b.call("send_message", {"conversation_id": cid, "text": "me too"})
        assert busy["ok"] is False and busy["error"]["code"] == "busy", busy
        listed = on_b.call("list_conversations")
        assert cid in listed["running"], listed
        on_a.wait_done(cid)  # the task's end is stored and its lease free before `done`
        assert cid not in on_b.call("list_conversations")["running"]
        on_b.start("go on", conversation_id=cid)
        on_a.call("join", {"conversation_id": cid, "after_seq": 0})
        second = on_b.wait_done(cid)
        assert tokens(second) == "Now on B."
        history = on_a.call("get_conversation", {"conversation_id": cid})
    assert [r["role"] for r in history["messages"]] == ["user", "assistant", "user", "assistant"]
    assert history["messages"][2]["parent_id"] == history["messages"][1]["id"]
    ends = history["conversation"]["meta"]["task_ends"]
    assert [end["reason"] for end in ends.values()] == ["complete", "complete"]
    seqs = [e.payload["seq"] for e in second]
    assert seqs[0] > done_of(on_a.of(cid))["seq"] or seqs == sorted(seqs)


def test_a_killed_process_s_task_is_interrupted_and_the_other_takes_over(
    redis: RedisServer, fake: FakeLLM, tmp_path: Path
) -> None:
    with cluster(tmp_path, redis.url(2), base_url=fake.base_url, api_key=fake.api_key) as servers:
        a, b = servers
        fake.script(
            Reply(content=ANSWER, chunk_size=3, stall_after=4, stall=60), slow("Back again.")
        )
        with connected(a.url) as on_a, connected(b.url) as on_b:
            cid = on_a.start("a task that dies")
            on_b.call("join", {"conversation_id": cid, "after_seq": 0})
            # The answer stalls after 4 data chunks (the role's, then three pieces of 3
            # characters): once A shows those, nothing more is under way.
            on_a.wait_until(lambda _: tokens(on_a.of(cid)) == ANSWER[:9], what="A at the stall")
            wait_until(lambda: len(on_b.of(cid)) == len(on_a.of(cid)), 5, "B to see what A sent")
            a.kill()
            done = on_b.wait_until(
                lambda events: next((e for e in events if e.name == "done"), None),
                timeout=15,
                what="the interrupted task's done on B",
            )
            assert done.payload["reason"] == "interrupted"
            errors = [e.payload for e in on_b.of(cid) if e.name == "error"]
            assert [e["code"] for e in errors] == ["interrupted"]
            # What A streamed is whole; the end B reports goes past any seq A may have sent
            # but not yet logged (web/cluster/leases.py UNWRITTEN_SEQ_GAP).
            streamed = [e for e in on_b.of(cid) if e.name not in ("error", "done")]
            assert_contiguous(streamed)
            ending = [e.payload["seq"] for e in on_b.of(cid) if e.name in ("error", "done")]
            assert ending[0] > streamed[-1].payload["seq"] and ending[1] == ending[0] + 1
            history = on_b.call("get_conversation", {"conversation_id": cid})
            assert not history["running"]
            (message,) = history["messages"]
            assert history["conversation"]["meta"]["task_ends"][message["id"]]["reason"] == (
                "interrupted"
            )
            # The lease is released before the events go out (core/web_terminal.py _relay).
            assert cid not in on_b.call("list_conversations")["running"]
            before = len(on_b.of(cid))
            on_b.start("go on", conversation_id=cid)
            on_b.wait_until(
                lambda _: sum(e.name == "done" for e in on_b.of(cid)) == 2,
                what="the next task's done",
            )
            after = on_b.of(cid)[before:]
    assert tokens(after) == "Back again." and done_of(after)["reason"] == "complete"
    assert after[0].payload["seq"] > done.payload["seq"]


def test_a_redis_restart_mid_task_lets_the_task_finish_and_the_servers_recover(
    redis: RedisServer, pair: list[ClusterServer], fake: FakeLLM
) -> None:
    a, b = pair
    fake.script(slow(ANSWER, delay=0.1), slow("After the restart."))
    with connected(a.url) as on_a:
        cid = on_a.start("survive a restart")
        on_a.wait_until(lambda events: any(e.name == "token" for e in events), what="tokens")
        redis.stop()
        redis.start()
        on_a.wait_done(cid, timeout=20)
        assert done_of(on_a.of(cid))["reason"] == "complete"

    def streams_across() -> bool:
        with connected(b.url) as on_b, connected(a.url) as watcher:
            ack = on_b.call("send_message", {"conversation_id": cid, "text": "again"})
            if not ack["ok"]:
                return False
            watcher.call("join", {"conversation_id": cid, "after_seq": 0})
            return tokens(watcher.wait_done(cid)) == "After the restart."

    wait_until(streams_across, 20, "a task on B streaming to A after the restart", every=0.5)


def test_haproxy_with_sticky_sessions_polls_then_upgrades(
    pair: list[ClusterServer], fake: FakeLLM, tmp_path: Path
) -> None:
    fake.script(slow(), slow("Second client's turn."))
    with Haproxy(tmp_path / "haproxy", [server.port for server in pair]) as balancer:
        first, second = StockSocketIOClient(balancer.url), StockSocketIOClient(balancer.url)
        for client in (first, second):
            client.connect()

            def upgraded(c: StockSocketIOClient = client) -> bool:
                return c.sio.transport() == "websocket"

            wait_until(upgraded, 5, "the websocket upgrade")
        try:
            sticky = {c.sio.eio.http.cookies.get("SERVERID") for c in (first, second)}
            assert sticky == {"agent1", "agent2"}  # round robin: one client on each process
            cid = first.start("through the balancer")
            second.call("join", {"conversation_id": cid, "after_seq": 0})
            assert tokens(second.wait_done(cid)) == tokens(first.wait_done(cid)) == ANSWER
        finally:
            first.disconnect()
            second.disconnect()


def test_a_write_landing_during_a_reload_is_read_by_the_next_get(
    redis: RedisServer, fake: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process writes the history just after this one re-read it: the next `get`
    must read it again (the version is taken before the history, never after)."""
    services = build_services(make_settings(fake, tmp_path))
    redis_cluster = RedisCluster(redis.url(3))
    try:
        hub = TerminalHub(services, lambda event: None, cluster=redis_cluster)

        def hubs_copy(conversation_id: str) -> Conversation:
            conversation = hub.get(conversation_id).conversation
            assert conversation is not None
            return conversation

        other = ConversationStore(tmp_path / "data").create(title="shared")  # another process
        untyped_other: Any = other  # called as untyped code could: a task end without its usage
        services.store.get(other.id)  # read here before (a rename, say), then written there
        other.append("user", "hello")
        assert [r["content"] for r in hubs_copy(other.id).records] == ["hello"]
        other.append("assistant", "hi")  # the next get re-reads the history...
        reload = services.store.reload

        def reload_then_other_writes(conversation_id: str) -> Conversation:
            reloaded = reload(conversation_id)
            untyped_other.update_meta(task_ends={"m1": {"reason": "complete"}})  # ...and this lands
            return reloaded

        monkeypatch.setattr(services.store, "reload", reload_then_other_writes)
        assert "task_ends" not in hubs_copy(other.id).meta["meta"]
        monkeypatch.setattr(services.store, "reload", reload)
        meta = hubs_copy(other.id).meta["meta"]
        assert meta["task_ends"] == {"m1": {"reason": "complete"}}
    finally:
        redis_cluster.close()
        services.close()
