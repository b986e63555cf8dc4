"""Context building: budgets, whole tool groups, the current turn, usage correction."""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence

import pytest

from history.context_builder import ContextBuilder, estimate_text_tokens
from model.messages import ChatMessage
from model.providers import prepare_messages, resolve_provider
from protocol.records import Role, ToolCallRecord
from tests.fake_llm.flavours import FLAVOURS
from tests.fake_llm.validation import validate_chat
from tests.kit.settings import make_settings


def check_api_rules(messages: Sequence[ChatMessage]) -> None:
    """Fail unless an OpenAI-compatible chat API would accept this message order."""
    assert messages and messages[0]["role"] == "system", "the system prompt comes first"
    assert all(m["role"] != "system" for m in messages[1:2]) or len(messages) == 1
    rest = messages[1:]
    if rest:
        assert rest[0]["role"] == "user", f"history starts with {rest[0]['role']}"
    i = 0
    while i < len(rest):
        message = rest[i]
        assert message["role"] in {"user", "assistant", "system"}, f"orphan tool message at {i}"
        i += 1
        if message["role"] == "assistant" and message.get("tool_calls"):
            call_ids = [c["id"] for c in message["tool_calls"]]
            answered = []
            while i < len(rest) and rest[i]["role"] == "tool":
                answered.append(rest[i]["tool_call_id"])
                i += 1
            assert sorted(answered) == sorted(call_ids), "tool calls and results do not match"


def _rec(
    role: Role,
    content: str,
    *,
    tool_calls: list[ToolCallRecord] | None = None,
    tool_call_id: str | None = None,
) -> ChatMessage:
    """A record as the context is built from it; a field given as None is left out."""
    record: ChatMessage = {"id": uuid.uuid4().hex, "role": role, "content": content}
    if tool_calls is not None:
        record = {**record, "tool_calls": tool_calls}
    if tool_call_id is not None:
        record = {**record, "tool_call_id": tool_call_id}
    return record


def _call(name: str = "read_file") -> ToolCallRecord:
    return {
        "id": "call_" + uuid.uuid4().hex[:8],
        "type": "function",
        "function": {"name": name, "arguments": '{"path": "a.py"}'},
    }


def _random_path(rng: random.Random) -> list[ChatMessage]:
    """A history path with turns, tool groups and the damage a crash can leave."""
    path: list[ChatMessage] = []
    for _ in range(rng.randint(1, 6)):
        path.append(_rec("user", "u" * rng.randint(1, 400)))
        for _ in range(rng.randint(0, 4)):
            calls = [_call() for _ in range(rng.randint(0, 3))]
            path.append(_rec("assistant", "a" * rng.randint(0, 300), tool_calls=calls or None))
            for call in calls:
                if rng.random() < 0.1:
                    continue  # result never recorded (crash, cancel)
                path.append(_rec("tool", "t" * rng.randint(0, 2000), tool_call_id=call["id"]))
                if rng.random() < 0.05:
                    path.append(_rec("tool", "dup", tool_call_id=call["id"]))
            if rng.random() < 0.05:
                path.append(_rec("tool", "orphan", tool_call_id="call_nowhere"))
        if rng.random() < 0.7:
            path.append(_rec("assistant", "final " * rng.randint(1, 50)))
    return path  # `tool_calls=None`: _rec leaves it out


def test_random_conversations_always_satisfy_the_api_rules() -> None:
    rng = random.Random(20240601)
    for _ in range(400):
        path = _random_path(rng)
        builder = ContextBuilder(rng.randint(50, 6000), reserve_output_tokens=rng.randint(0, 40))
        built = builder.build("system prompt " * rng.randint(1, 30), path)
        check_api_rules(built.messages)

        from_path = [m for m in built.messages[1:] if "id" in m]
        positions = [path.index(m) for m in from_path]
        assert positions == sorted(positions), "order of the path is kept"
        assert built.dropped == len(path) - len(from_path)
        last_user = max(i for i, r in enumerate(path) if r["role"] == "user")
        assert path[last_user] in from_path, "the newest user message is always sent"
        newest_assistant = [r for r in path[last_user:] if r["role"] == "assistant"]
        if newest_assistant:
            assert newest_assistant[-1] in from_path, "the last step of the turn is always sent"
        over = built.estimated_tokens > builder.budget_tokens
        if over:  # only the current turn may exceed the budget
            assert all(p >= last_user for p in positions)


def test_reused_builder_matches_a_fresh_one_as_history_grows_and_branches() -> None:
    rng = random.Random(99)
    for _ in range(60):
        trunk = _random_path(rng)
        branch = trunk[: rng.randint(0, len(trunk))] + _random_path(rng)
        window = rng.randint(100, 20_000)
        reused = ContextBuilder(window, reserve_output_tokens=0)
        for _ in range(30):
            source = trunk if rng.random() < 0.5 else branch
            path = source[: rng.randint(0, len(source))]
            got = reused.build("sys", path)
            want = ContextBuilder(window, reserve_output_tokens=0).build("sys", path)
            assert got == want


def test_tool_group_is_never_split_at_the_budget_edge() -> None:
    call_a, call_b = _call(), _call()
    path = [
        _rec("user", "old question"),
        _rec("assistant", "", tool_calls=[call_a, call_b]),
        _rec("tool", "x" * 3000, tool_call_id=call_a["id"]),
        _rec("tool", "small", tool_call_id=call_b["id"]),
        _rec("assistant", "old answer"),
        _rec("user", "new question"),
    ]
    for window in range(20, 2000, 7):
        built = ContextBuilder(window, reserve_output_tokens=0).build("sys", path)
        check_api_rules(built.messages)
        kept = {m["id"] for m in built.messages[1:]}
        group = {r["id"] for r in path[1:4]}
        assert group <= kept or not group & kept


def test_current_turn_is_kept_even_over_budget() -> None:
    calls = [_call() for _ in range(3)]
    path = [
        _rec("user", "old " * 100),
        _rec("assistant", "old answer " * 100),
        _rec("user", "do it " * 500),
    ]
    for call in calls:
        path.append(_rec("assistant", "step", tool_calls=[call]))
        path.append(_rec("tool", "r" * 5000, tool_call_id=call["id"]))
    builder = ContextBuilder(200, reserve_output_tokens=50)
    built = builder.build("the system prompt", path)
    check_api_rules(built.messages)
    roles = [m["role"] for m in built.messages]
    assert roles == ["system", "user", "assistant", "tool"], "middle steps dropped, ends kept"
    assert built.messages[1] is path[2] and built.messages[-1] is path[-1]
    assert built.dropped == len(path) - 3
    assert built.estimated_tokens > builder.budget_tokens


def test_oldest_turns_are_dropped_first() -> None:
    path = []
    for i in range(10):
        path += [_rec("user", f"question {i} " + "q" * 200), _rec("assistant", "a" * 200)]
    path.append(_rec("user", "now"))
    everything = ContextBuilder(100_000).build("sys", path)
    assert everything.dropped == 0 and len(everything.messages) == len(path) + 1

    builder = ContextBuilder(600, reserve_output_tokens=0)
    built = builder.build("sys", path)
    check_api_rules(built.messages)
    assert 0 < built.dropped < len(path)
    assert built.messages[1:] == path[built.dropped :], "a suffix of whole turns is kept"
    assert built.estimated_tokens <= builder.budget_tokens


def test_system_prompt_is_always_first() -> None:
    built = ContextBuilder(1000).build("You are an agent.", [])
    assert built.messages == [{"role": "system", "content": "You are an agent."}]
    big = ContextBuilder(50, reserve_output_tokens=0).build("S" * 10_000, [_rec("user", "hi")])
    assert big.messages[0] == {"role": "system", "content": "S" * 10_000}
    assert [m["role"] for m in big.messages] == ["system", "user"]


def test_usage_correction_changes_the_estimate() -> None:
    path = [_rec("user", "hello " * 300)]
    builder = ContextBuilder(100_000)
    first = builder.build("sys", path)
    assert builder.last_used_tokens == first.estimated_tokens
    builder.observe_usage(first.estimated_tokens, first.estimated_tokens * 2)
    assert builder.last_used_tokens == first.estimated_tokens * 2
    second = builder.build("sys", path)
    assert second.estimated_tokens > first.estimated_tokens * 1.3
    for _ in range(10):
        built = builder.build("sys", path)
        builder.observe_usage(built.estimated_tokens, first.estimated_tokens * 2)
    converged = builder.build("sys", path).estimated_tokens
    assert abs(converged - first.estimated_tokens * 2) <= first.estimated_tokens * 0.05
    builder.observe_usage(0, 100)  # nonsense is ignored
    builder.observe_usage(100, 0)
    assert builder.build("sys", path).estimated_tokens == converged


def test_correction_tightens_what_fits() -> None:
    path = []
    for i in range(20):
        path += [_rec("user", f"q{i} " + "q" * 100), _rec("assistant", "a" * 100)]
    path.append(_rec("user", "now"))
    builder = ContextBuilder(1000, reserve_output_tokens=0)
    before = builder.build("sys", path)
    builder.observe_usage(before.estimated_tokens, before.estimated_tokens * 3)
    after = builder.build("sys", path)
    assert after.dropped > before.dropped
    assert after.estimated_tokens <= builder.budget_tokens


def test_tools_and_limits() -> None:
    builder = ContextBuilder(32_000)
    assert builder.limit_tokens == 32_000
    assert builder.budget_tokens == 32_000 - 8000
    tools = [{"type": "function", "function": {"name": "x", "description": "d" * 3500}}]
    plain = builder.build("sys", [_rec("user", "hi")])
    with_tools = builder.build("sys", [_rec("user", "hi")], tools=tools)
    assert with_tools.estimated_tokens >= plain.estimated_tokens + 1000
    with pytest.raises(ValueError):
        ContextBuilder(0)


def test_cjk_text_counts_more_than_ascii_per_character() -> None:
    assert estimate_text_tokens("abcdefg") == pytest.approx(2.0)
    assert estimate_text_tokens("这是一个测试") > estimate_text_tokens("abcdef") * 2


def test_ten_thousand_message_path_builds_whole() -> None:
    rng = random.Random(7)
    path: list[ChatMessage] = []
    for i in range(2500):
        call = _call()
        path += [
            _rec("user", f"q{i} " + "x" * rng.randint(10, 300)),
            _rec("assistant", "", tool_calls=[call]),
            _rec("tool", "y" * rng.randint(10, 1500), tool_call_id=call["id"]),
            _rec("assistant", "z" * rng.randint(10, 300)),
        ]
    keys_before = [set(r) for r in path]
    builder = ContextBuilder(10_000_000)
    builder.build("sys", path)  # warm the per-record estimates
    built = builder.build("sys", path)  # its speed: bench/history.py
    assert built.dropped == 0 and len(built.messages) == 10_001
    check_api_rules(built.messages)
    assert [set(r) for r in path] == keys_before, "no private keys are added to records"


def _kimi_call(number: int) -> ToolCallRecord:
    return {
        "id": f"functions.read_file:{number}",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
    }


def test_a_call_id_repeated_after_older_calls_left_out_is_renamed_in_the_request() -> None:
    """Kimi numbers call ids by the calls in the request: after a cut, a new call can
    repeat a kept one's id, which the strict APIs refuse."""
    kept = _rec("assistant", "", tool_calls=[_kimi_call(0), _kimi_call(1)])
    again = _rec("assistant", "", tool_calls=[_kimi_call(1)])
    path = [
        _rec("user", "first"),
        kept,
        _rec("tool", "one", tool_call_id="functions.read_file:0"),
        _rec("tool", "two", tool_call_id="functions.read_file:1"),
        _rec("user", "second"),
        again,
        _rec("tool", "three", tool_call_id="functions.read_file:1"),
    ]
    original = [dict(r) for r in path]
    built = ContextBuilder(100_000).build("sys", path)
    check_api_rules(built.messages)
    ids = [c["id"] for m in built.messages for c in m.get("tool_calls") or ()]
    assert ids == ["functions.read_file:0", "functions.read_file:1", "functions.read_file:2"]
    assert built.messages[-1]["tool_call_id"] == "functions.read_file:2"
    assert built.messages[-1]["content"] == "three"
    assert path == original, "the records keep the ids the model gave them"
    assert ContextBuilder(100_000).build("sys", path).messages == built.messages
    config = resolve_provider(make_settings(provider="kimi", api_key="k"))
    body = {
        "model": FLAVOURS["kimi"].models[0],
        "stream": True,
        "messages": prepare_messages(built.messages, config),
    }
    validate_chat(body, FLAVOURS["kimi"], set())
