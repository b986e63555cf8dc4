"""The terminal's slash commands are one table (cli/slash_commands.py): the local and the remote
terminal offer exactly its commands, /help is made from it and says the same in both, and a
terminal that implements one command more or less than the table names is refused."""

from __future__ import annotations

import re
from typing import Any

import pytest

from cli import commands, remote_commands
from cli.slash_commands import HELP_COLUMN, QUIT, TABLE, commands_of, help_text

OFFERED = {command.name for command in TABLE} - set(QUIT)


def test_both_terminals_offer_the_tables_commands_and_say_the_same_help() -> None:
    assert set(commands.COMMANDS) == OFFERED == set(remote_commands.COMMANDS)
    unused: Any = None  # /help reads nothing of its terminal
    local = commands.COMMANDS["help"](unused, "")
    assert local == remote_commands.COMMANDS["help"](unused, "") == help_text("local")


def test_help_names_every_command_and_starts_its_texts_in_one_column() -> None:
    text = help_text("remote")
    named = set(re.findall(r"/([a-z]+)", text))
    assert named >= OFFERED | {"quit", "skill"}  # /skill NAME is a prompt, not a command
    for line in text.split("\n"):
        if line.startswith("/"):  # a command's usage, its text after it (or on the next line)
            usage = line.split("  ")[0]
            rest = line[len(usage) :]
            starts = len(line) - len(rest.lstrip())
            assert rest == "" or starts == max(HELP_COLUMN, len(usage) + 2), line
        else:
            assert line[:HELP_COLUMN] == " " * HELP_COLUMN and line[HELP_COLUMN] != " ", line
        assert len(line) <= 100, line


def test_a_terminal_that_does_not_fit_the_table_is_refused() -> None:
    own = {name: handler for name, handler in commands.COMMANDS.items() if name != "help"}
    shared = {command.name for command in TABLE if command.shared is not None}
    assert shared == {
        "mode",
        "model",
        "config",
        "approval",
        "continue",
        "focus",
        "unfocus",
        "attach",
        "detach",
    }
    mine = {name: handler for name, handler in own.items() if name not in shared}
    assert set(commands_of("local", mine)) == OFFERED
    with pytest.raises(ValueError, match="status"):
        commands_of("local", {k: v for k, v in mine.items() if k != "status"})
    with pytest.raises(ValueError, match="mode"):
        commands_of("local", {**mine, "mode": own["mode"]})  # one the table shares
