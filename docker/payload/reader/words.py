"""Words for people: a count with the noun that agrees with it, and the known word a
misspelt one most likely meant. Pure, standard library only."""

from __future__ import annotations

import difflib
from typing import Iterable


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 host``, ``2 hosts``, ``0 hosts``: the count and the noun that agrees with it
    (``nouns`` for a plural that is not the noun plus "s": ``address``, ``addresses``)."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known word closest to ``word`` (difflib's ratio of at least 0.6, its default), or None."""
    close = difflib.get_close_matches(word, sorted(set(known)), n=1)
    return close[0] if close else None


def did_you_mean(word: str, known: Iterable[str], shown: str = "{}") -> str:
    """``did you mean --nnodes?`` for the known word closest to ``word``, written through
    ``shown`` (``"`torchpod {}`"``), or "" when none is close; the caller places it in its line."""
    near = closest(word, known)
    return f"did you mean {shown.format(near)}?" if near is not None else ""
