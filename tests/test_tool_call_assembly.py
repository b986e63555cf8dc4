"""Tool calls rebuilt from every way providers fragment them in a stream."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall

from model.tool_calls import (
    ToolCall,
    ToolCallArgs,
    ToolCallAssembler,
    ToolCallStarted,
    assemble_tool_calls,
)

TRICKY_ARGS = json.dumps(
    {"path": "notes/é文件.md", "content": 'line "one"\nline\\two\t{not json}', "n": [1, 2.5]},
    ensure_ascii=False,
)


def head(index: int | None, call_id: str | None, name: str | None, args: str = "") -> dict:
    """A first fragment: id, type, name and maybe some arguments."""
    fragment: dict[str, Any] = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": args},
    }
    if index is not None:
        fragment["index"] = index
    return fragment


def more(index: int | None, args: str) -> dict:
    """A later fragment: only the index and argument text."""
    fragment: dict[str, Any] = {"function": {"arguments": args}}
    if index is not None:
        fragment["index"] = index
    return fragment


def pieces(text: str, sizes: list[int]) -> list[str]:
    out, position = [], 0
    for size in sizes:
        out.append(text[position : position + size])
        position += size
    out.append(text[position:])
    return [p for p in out if p]


def test_single_call_with_arguments_split_at_every_character() -> None:
    fragments = [head(0, "call_1", "create_file")]
    fragments += [more(0, char) for char in TRICKY_ARGS]
    assert assemble_tool_calls(fragments) == [ToolCall("call_1", "create_file", TRICKY_ARGS)]
    assert json.loads(assemble_tool_calls(fragments)[0].arguments)["path"] == "notes/é文件.md"


def test_arguments_split_inside_a_string_escape() -> None:
    text = '{"content": "say \\"hi\\"\\n"}'
    cut = text.index("\\") + 1  # between the backslash and the escaped quote
    fragments = [head(0, "c", "create_file", text[:cut]), more(0, text[cut:])]
    assert json.loads(assemble_tool_calls(fragments)[0].arguments) == {"content": 'say "hi"\n'}


def test_first_fragment_carries_part_of_the_arguments() -> None:
    fragments = [head(0, "c", "read_file", '{"pa'), more(0, 'th": "a.txt"}')]
    assert assemble_tool_calls(fragments)[0].arguments == '{"path": "a.txt"}'


def test_two_calls_interleaved_by_index() -> None:
    first, second = '{"path": "a.txt"}', '{"directory": "src"}'
    a, b = pieces(first, [3, 4, 5]), pieces(second, [2, 9])
    fragments = [head(0, "call_a", "read_file"), head(1, "call_b", "list_files")]
    for x, y in zip(a, b + [""] * (len(a) - len(b)), strict=True):
        fragments += [more(0, x), more(1, y)]
    calls = assemble_tool_calls(fragments)
    assert calls == [
        ToolCall("call_a", "read_file", first),
        ToolCall("call_b", "list_files", second),
    ]


def test_calls_come_out_in_index_order_even_when_index_1_starts_first() -> None:
    fragments = [head(1, "second", "b", "{}"), head(0, "first", "a", "{}")]
    assert [c.id for c in assemble_tool_calls(fragments)] == ["first", "second"]


def test_id_and_name_repeated_in_every_fragment() -> None:
    fragments = [
        head(0, "call_x", "create_file", '{"path":'),
        head(0, "call_x", "create_file", ' "a"'),
        head(0, "call_x", "create_file", "}"),
    ]
    assert assemble_tool_calls(fragments) == [ToolCall("call_x", "create_file", '{"path": "a"}')]


def test_name_split_across_fragments() -> None:
    fragments = [
        head(0, "c", "create_"),
        {"index": 0, "function": {"name": "file"}},
        more(0, '{"path": "x"}'),
    ]
    assembler = ToolCallAssembler()
    events = [e for f in fragments for e in assembler.feed(f)]
    assert events[0] == ToolCallStarted(0, "c", "create_file")
    assert assembler.calls()[0].name == "create_file"


def test_missing_index_is_treated_as_the_first_call() -> None:
    fragments = [head(None, "c", "read_file"), more(None, '{"path":'), more(None, ' "a"}')]
    assert assemble_tool_calls(fragments) == [ToolCall("c", "read_file", '{"path": "a"}')]


def test_missing_index_with_distinct_ids_makes_separate_calls() -> None:
    fragments = [
        head(None, "c1", "read_file", '{"path": "a"}'),
        head(None, "c2", "read_file", '{"path": "b"}'),
    ]
    assert [c.id for c in assemble_tool_calls(fragments)] == ["c1", "c2"]


def test_index_reused_with_a_new_id_is_a_new_call() -> None:
    fragments = [head(0, "c1", "read_file", '{"path": "a"}'), head(0, "c2", "list_files", "{}")]
    calls = assemble_tool_calls(fragments)
    assert [(c.id, c.name) for c in calls] == [("c1", "read_file"), ("c2", "list_files")]


def test_empty_arguments_become_an_empty_object() -> None:
    assert assemble_tool_calls([head(0, "c", "list_files")]) == [ToolCall("c", "list_files", "{}")]


def test_a_call_without_any_id_gets_one_of_its_own() -> None:
    calls = assemble_tool_calls([head(0, None, "list_files", "{}")])
    again = assemble_tool_calls([head(0, None, "list_files", "{}")])
    assert calls[0].id.startswith("call_0_") and calls[0].id != again[0].id


def test_sdk_fragment_objects_are_accepted() -> None:
    fragments = [
        ChoiceDeltaToolCall.model_validate(head(0, "c", "read_file")),
        ChoiceDeltaToolCall.model_validate(more(0, '{"path": "a"}')),
    ]
    assert assemble_tool_calls(fragments) == [ToolCall("c", "read_file", '{"path": "a"}')]


def test_feed_reports_start_once_then_each_argument_piece() -> None:
    assembler = ToolCallAssembler()
    assert assembler.feed(head(0, "c", "read_file")) == []  # the name might still grow
    assert assembler.feed(more(0, '{"pa')) == [
        ToolCallStarted(0, "c", "read_file"),
        ToolCallArgs(0, "c", '{"pa'),
    ]
    assert assembler.feed(more(0, "")) == []
    assert assembler.feed(more(0, 'th": 1}')) == [ToolCallArgs(0, "c", 'th": 1}')]
    assert assembler.finish() == []


def test_finish_reports_calls_that_never_got_arguments() -> None:
    assembler = ToolCallAssembler()
    assembler.feed(head(0, "c", "list_files"))
    assert assembler.finish() == [ToolCallStarted(0, "c", "list_files")]
    assert assembler.finish() == []


def test_invalid_json_arguments_are_kept_verbatim() -> None:
    raw = '{"path": "a.txt", "content": "unterminated'
    fragments = [head(0, "c", "create_file")] + [more(0, p) for p in pieces(raw, [5, 7, 11])]
    assert assemble_tool_calls(fragments)[0].arguments == raw


@pytest.mark.parametrize("seed", range(25))
def test_random_fragmentation_always_reassembles(seed: int) -> None:
    rng = random.Random(seed)
    originals = [
        (f"id{i}", f"tool_{i}", json.dumps({"i": i, "text": TRICKY_ARGS[: 10 * i]}))
        for i in range(rng.randint(1, 4))
    ]
    streams = []
    for index, (call_id, name, args) in enumerate(originals):
        cuts = sorted(rng.sample(range(1, len(args)), k=min(len(args) - 1, rng.randint(0, 8))))
        parts = [args[a:b] for a, b in zip([0, *cuts], [*cuts, len(args)], strict=True)]
        streams.append([head(index, call_id, name)] + [more(index, p) for p in parts])
    fragments = []
    while any(streams):  # interleave the calls at random, keeping each call's own order
        stream = rng.choice([s for s in streams if s])
        fragments.append(stream.pop(0))
    assert assemble_tool_calls(fragments) == [ToolCall(*call) for call in originals]
