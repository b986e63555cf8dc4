"""WebTerminal tells the web front's TaskHooks each step of a task in the order the room sees
it (core/web_terminal.py): the hold around the begin, let go of when the begin fails; the task
begun, its log starting right before its first event; every event before it goes out; and the
end once it is stored and before the room hears of it, then once more after the run. The hooks
here write down what they hear; the cluster's own (web/cluster/leases.py) are held to the same
order over a real Redis in tests/test_cluster_handover.py."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from core.services import build_services
from core.web_terminal import WebTerminal
from history.conversation import LEAF
from protocol.events import Event
from tests.fake_llm import FakeLLM, Reply
from tests.kit.settings import make_settings
from tests.kit.waits import wait_until

Step = tuple[Any, ...]


class WrittenDown:
    """TaskHooks that note each call, and at an end whether meta.json holds it already."""

    def __init__(self, steps: list[Step], data_dir: Path) -> None:
        self.steps = steps
        self._conversations = data_dir / "conversations"

    @contextlib.contextmanager
    def hold(self, terminal: WebTerminal) -> Iterator[None]:
        self.steps.append(("hold", terminal.conversation_id))
        try:
            yield
        except BaseException as exc:
            self.steps.append(("let go", type(exc)))
            raise

    def begun(
        self, conversation_id: str, message_id: str, replays_after: int, *, created: bool
    ) -> None:
        self.steps.append(("begun", message_id, replays_after, created))

    def relayed(self, event: Event) -> None:
        self.steps.append(("relayed", event.name, event.seq))

    def ended(self, conversation_id: str, message_id: str) -> None:
        meta = json.loads((self._conversations / conversation_id / "meta.json").read_text())
        self.steps.append(("ended", message_id, message_id in meta["meta"]["task_ends"]))


def in_thread(target: Callable[..., Any], *args: Any) -> None:
    threading.Thread(target=target, args=args, daemon=True).start()


def test_the_hooks_hear_each_step_in_the_order_the_room_does(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.script(Reply(content="Done."))
    services = build_services(make_settings(fake_llm, tmp_path))
    steps: list[Step] = []
    try:
        terminal = WebTerminal(
            services,
            None,
            send=lambda event: steps.append(("sent", event.name, event.seq)),
            hooks=WrittenDown(steps, tmp_path / "data"),
        )
        record = terminal.start(
            "hello", parent_id=LEAF, mode=None, approval=None, run_in_background=in_thread
        )
        message_id = record["id"]
        ended = ("ended", message_id, True)
        wait_until(lambda: steps.count(ended) == 2, 20, "the end, told twice")
    finally:
        services.close()
    sent = [step for step in steps if step[0] == "sent"]
    assert [name for _, name, _ in sent][-1] == "done" and len(sent) > 1
    expected: list[Step] = [("hold", None), ("begun", message_id, sent[0][2] - 1, True)]
    for _, name, seq in sent:
        expected.append(("relayed", name, seq))
        if name == "done":
            expected.append(ended)  # stored already, and the room has yet to hear of it
        expected.append(("sent", name, seq))
    assert steps == [*expected, ended]


def test_a_begin_that_fails_lets_go_of_the_hold_and_keeps_nothing(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    services = build_services(make_settings(fake_llm, tmp_path))
    steps: list[Step] = []
    try:
        terminal = WebTerminal(
            services,
            None,
            send=lambda event: steps.append(("sent", event.name, event.seq)),
            hooks=WrittenDown(steps, tmp_path / "data"),
        )
        with pytest.raises(Exception, match="no-such-skill") as refused:
            terminal.start(
                "hello",
                parent_id=LEAF,
                mode=None,
                approval=None,
                skill="no-such-skill",
                run_in_background=in_thread,
            )
        assert terminal.conversation is None and not terminal.running
        assert services.store.list() == []
    finally:
        services.close()
    assert steps == [("hold", None), ("let go", refused.type)]
    assert not fake_llm.chat_requests
