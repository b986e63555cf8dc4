"""A reply that loops, caught while it streams: fed each delta as it arrives, the watch says
when the text has been saying over again what it already said several times.

A model that loops repeats a passage back to back until its output cap. A long structured
answer repeats too (the same headings, table headers and list labels in every section), but
with new text between the repeats. So the rule is a run, not a count: LOOP_RUN_CHARS of text
in a row in which every run of LOOP_NGRAM_WORDS words is at least its LOOP_REPEATS-th showing.
Each delta costs its own words and no more: nothing already read is read again.
"""

from __future__ import annotations

from collections import Counter, deque

LOOP_NGRAM_WORDS = 16  # long enough that prose, lists and code rarely repeat one
LOOP_REPEATS = 4  # a passage said a fourth time, back to back
LOOP_RUN_CHARS = 1500  # ... for this much text in a row
# A "word" longer than this is cut into pieces of this length from its start, so a stream
# without spaces (a language written without them, a blob) costs no more per delta.
MAX_WORD_CHARS = 100
QUOTE_CHARS = 80  # how much of a repeated passage a message quotes


class LoopWatch:
    """One streamed text's watch for a loop, fed delta by delta."""

    def __init__(self) -> None:
        self._tail = ""  # the word the last delta ended in, perhaps not whole yet
        self._window: deque[str] = deque(maxlen=LOOP_NGRAM_WORDS)
        self._seen: Counter[int] = Counter()
        self._run_chars = 0
        self._run_start: tuple[int, str] = (0, "")  # the run's first word run, and its text

    def feed(self, delta: str) -> str:
        """Read one delta; returns what loops (quoted, with how often it was said) as soon as
        the text loops, "" until then."""
        text = self._tail + delta
        cut = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t"), text.rfind("\r"))
        words, self._tail = text[: cut + 1].split(), text[cut + 1 :]
        while len(self._tail) > MAX_WORD_CHARS:
            words.append(self._tail[:MAX_WORD_CHARS])
            self._tail = self._tail[MAX_WORD_CHARS:]
        for word in words:
            found = self._word(word)
            if found:
                return found
        return ""

    def _word(self, word: str) -> str:
        self._window.append(word)
        if len(self._window) < LOOP_NGRAM_WORDS:
            return ""
        key = hash(tuple(self._window))
        self._seen[key] += 1
        if self._seen[key] < LOOP_REPEATS:
            self._run_chars = 0
            return ""
        if not self._run_chars:
            self._run_start = (key, " ".join(self._window))
        self._run_chars += len(word) + 1
        if self._run_chars < LOOP_RUN_CHARS:
            return ""
        key, passage = self._run_start
        return f"{_quote(passage)} said over and over ({self._seen[key]} times so far)"


def _quote(text: str) -> str:
    return f'"{text[:QUOTE_CHARS]}…"' if len(text) > QUOTE_CHARS else f'"{text}"'
