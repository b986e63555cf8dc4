"""Conversation titles made from the first exchange, without asking a model."""

from __future__ import annotations

import re

TITLE_LIMIT = 60


def title_from(text: str, answer: str = "") -> str:
    """A one-line title made from the first exchange, without asking a model.

    The first sentence of the user's message, past greetings and "can you"; when that says
    too little ("hi", "help"), the first sentence of the answer instead.
    """
    line = _first_sentence(text) or " ".join(text.split())
    stripped = _LEADING_FILLER.sub("", line).strip()
    if len(stripped.split()) >= 2 or (stripped and not answer.strip()):
        line = stripped[:1].upper() + stripped[1:] if stripped != line else line
    elif answer.strip():
        line = _first_sentence(answer, min_words=3) or line
    if len(line) <= TITLE_LIMIT:
        return line
    return line[: TITLE_LIMIT - 1].rsplit(" ", 1)[0].rstrip(" ,;:-") + "…"


_LEADING_FILLER = re.compile(
    r"^(?:(?:hi|hello|hey|ok(?:ay)?|so|please|pls|thanks|thank you)\b[\s,.!:;-]*"
    r"|(?:can|could|would|will) you(?: please)?\s+|i (?:want|need|would like) you to\s+)+",
    re.IGNORECASE,
)
_CODE_BLOCK = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_MARKS = re.compile(r"[*`#>]+")
# Underscores mark emphasis only around words (`_this_`, `__this__`); inside a name
# (my_var_name, __init__.py) they are part of it.
_UNDERSCORE_EMPHASIS = re.compile(r"(?<!\w)(_{1,2})([^_\s](?:[^_]*[^_\s])?)\1(?!\w|\.\w)")


def _first_sentence(text: str, min_words: int = 1) -> str:
    """The first sentence of `text` with at least `min_words` words, without Markdown marks."""
    plain = _UNDERSCORE_EMPHASIS.sub(r"\2", _MARKS.sub("", _CODE_BLOCK.sub("\n", text)))
    for raw in plain.splitlines():
        for sentence in re.split(r"(?<=[.!?])\s", " ".join(raw.split())):
            if len([w for w in sentence.split() if any(c.isalnum() for c in w)]) >= min_words:
                return sentence.rstrip(".")
    return ""
