"""protocol/cluster.py: the commands between server processes and their answers travel over
Redis as the version before them wrote them (a rolling restart puts both on one Redis), an op a
process does not know is answered as not handled, and `running` entries keep their text."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis as redis_lib

from protocol.cluster import (
    Answer,
    Applied,
    ApproveCommand,
    Approved,
    CancelCommand,
    Cancelled,
    Command,
    Failed,
    JoinCommand,
    Joined,
    NotHere,
    ReapCommand,
    RunningTask,
    StatusCommand,
    TaskStatus,
    UnknownCommand,
    answer_from_wire,
    command_from_wire,
    command_to_wire,
)
from tests.kit.cluster import RedisServer, missing_programs
from tests.kit.waits import wait_until
from web.cluster.redis_cluster import RedisCluster

STATUS = {"state": "tool", "iteration": 2, "context": {"used_tokens": 5, "limit_tokens": 9}}
# Each command as web/hub.py wrote it before protocol/cluster.py, and an answer it got.
OLD_VERSION: list[tuple[Command, dict[str, Any], Answer, dict[str, Any]]] = [
    (
        CancelCommand("c1"),
        {"op": "cancel", "conversation_id": "c1"},
        Cancelled(True),
        {"ok": True, "cancelled": True},
    ),
    (
        ApproveCommand("c1", "call_1", True, always=True),
        {
            "op": "approve",
            "call_id": "call_1",
            "approved": True,
            "always": True,
            "conversation_id": "c1",
        },
        Approved(["run_command"]),
        {"ok": True, "always_allowed": ["run_command"]},
    ),
    (
        ApproveCommand("c1", "call_2", False),
        {
            "op": "approve",
            "call_id": "call_2",
            "approved": False,
            "always": False,
            "conversation_id": "c1",
        },
        Approved(None),
        {"ok": True, "always_allowed": None},
    ),
    (
        JoinCommand("c1", 3, "sid1", "room1"),
        {"op": "join", "after_seq": 3, "sid": "sid1", "room": "room1", "conversation_id": "c1"},
        Joined(True, 9, 2),
        {"running": True, "last_seq": 9, "replays_after": 2},
    ),
    (
        StatusCommand("c1"),
        {"op": "status", "conversation_id": "c1"},
        TaskStatus(STATUS),
        {"ok": True, "status": STATUS},
    ),
    (ReapCommand("c1"), {"op": "reap", "conversation_id": "c1"}, Applied(), {"ok": True}),
]
IDS = [f"{command.op}-{n}" for n, (command, *_) in enumerate(OLD_VERSION)]


@pytest.mark.parametrize(("command", "old", "answer", "old_answer"), OLD_VERSION, ids=IDS)
def test_commands_and_answers_keep_the_old_version_s_json(
    command: Command, old: dict[str, Any], answer: Answer, old_answer: dict[str, Any]
) -> None:
    assert command_to_wire(command) == old
    assert command_from_wire(json.loads(json.dumps(old))) == command
    assert answer.to_wire() == old_answer
    assert answer_from_wire(command, json.loads(json.dumps(old_answer))) == answer


@pytest.mark.parametrize("command", [c for c, *_ in OLD_VERSION], ids=IDS)
def test_an_answer_that_is_not_the_command_s_is_not_handled(command: Command) -> None:
    """An older process answers an op it does not know with {ok: false}; a failure has an error."""
    for answer in ({"ok": False}, Failed("internal_error", "boom").to_wire(), None, "text"):
        assert answer_from_wire(command, answer) == NotHere()


@pytest.mark.parametrize(
    ("wire", "says"),
    [
        ({"op": "pause", "conversation_id": "c1"}, "no command 'pause' here; known: cancel, "),
        ({"conversation_id": "c1"}, "no command None here"),
        (["cancel"], "a command is a JSON object, not list"),
    ],
)
def test_an_unknown_command_is_refused_saying_what_it_was(wire: Any, says: str) -> None:
    with pytest.raises(UnknownCommand) as refused:
        command_from_wire(wire)
    assert str(refused.value).startswith(says)


def test_a_running_entry_keeps_the_text_the_old_version_wrote() -> None:
    old = json.dumps({"owner": "a1b2c3", "message_id": "m1"})
    assert RunningTask("a1b2c3", "m1").to_wire() == old
    assert RunningTask.from_wire(old) == RunningTask("a1b2c3", "m1")
    for none in (None, "not json", json.dumps(["a1b2c3"]), json.dumps({"message_id": "m1"})):
        assert RunningTask.from_wire(none) is None


needs_redis = pytest.mark.skipif(missing_programs() is not None, reason=str(missing_programs()))


@pytest.fixture
def raw(redis: RedisServer) -> Iterator[redis_lib.Redis]:
    client = redis_lib.Redis.from_url(redis.url(9), decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def new_process(redis: RedisServer) -> Iterator[RedisCluster]:
    process = RedisCluster(redis.url(9))
    yield process
    process.close()


def in_thread(target: Callable[..., Any], *args: Any) -> None:
    threading.Thread(target=target, args=args, daemon=True).start()


def subscribed(raw: redis_lib.Redis, channel: str) -> bool:
    return bool(raw.pubsub_numsub(channel)[0][1])


@needs_redis
def test_a_new_process_answers_an_old_process_s_commands_in_the_old_shape(
    raw: redis_lib.Redis, new_process: RedisCluster
) -> None:
    got: list[Command] = []

    def handler(command: Command) -> Answer:
        got.append(command)
        return next(answer for c, _, answer, _ in OLD_VERSION if c == command)

    new_process.serve(handler, in_thread)
    wait_until(lambda: subscribed(raw, new_process.channel), 10, "the new process listening")
    for _, old, _, old_answer in OLD_VERSION:
        reply = f"agent:reply:{uuid.uuid4().hex}"
        raw.publish(new_process.channel, json.dumps({**old, "reply": reply}))
        answered = raw.blpop([reply], timeout=10)
        assert answered is not None, f"no answer to {old}"
        assert json.loads(answered[1]) == old_answer
    assert got == [command for command, *_ in OLD_VERSION]

    reply = f"agent:reply:{uuid.uuid4().hex}"  # a newer process's op
    raw.publish(
        new_process.channel, json.dumps({"op": "pause", "conversation_id": "c1", "reply": reply})
    )
    answered = raw.blpop([reply], timeout=10)
    assert answered is not None
    refused = json.loads(answered[1])
    assert refused["ok"] is False and refused["error"]["code"] == "bad_request"
    assert "'pause'" in refused["error"]["message"]


@needs_redis
def test_a_new_process_asks_an_old_one_in_the_old_shape(
    raw: redis_lib.Redis, new_process: RedisCluster
) -> None:
    old_channel = "agent:proc:oldversion01"
    heard: list[dict[str, Any]] = []
    answers = {json.dumps(old, sort_keys=True): old_answer for _, old, _, old_answer in OLD_VERSION}
    stop = threading.Event()

    def old_process() -> None:
        with raw.pubsub(ignore_subscribe_messages=True) as pubsub:
            pubsub.subscribe(old_channel)
            while not stop.is_set():
                message = pubsub.get_message(timeout=0.2)
                if message is None:
                    continue
                request = json.loads(message["data"])
                reply = request.pop("reply")
                heard.append(request)
                raw.rpush(reply, json.dumps(answers[json.dumps(request, sort_keys=True)]))

    listener = threading.Thread(target=old_process, daemon=True)
    listener.start()
    try:
        wait_until(lambda: subscribed(raw, old_channel), 10, "the old process listening")
        for command, _, answer, _ in OLD_VERSION:
            assert new_process.ask("oldversion01", command) == answer
        assert heard == [old for _, old, _, _ in OLD_VERSION]
    finally:
        stop.set()
        listener.join(timeout=10)
