"""One bench result file's data, read through typed, named accessors (``Result``), and what a
cell of the measurements table may hold. Pure.

Every accessor checks the value it returns: a value that is missing, of the wrong type or
that would break the Markdown table is one InputError naming the file, the dotted key, the
value seen and the form expected. The rows of the table (measurement_builds,
measurement_runs) read their figures through it; measurements renders them.
"""

from __future__ import annotations

import math
import re
from typing import Any

from torchpod.errors import InputError

# Strings shown in a table cell: a newline or `|` would break the Markdown table.
CELL_TEXT = re.compile(r"[A-Za-z0-9 ._/+:,()-]{1,120}")


def _shown(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def full_key(key: str, where: str) -> str:
    """``key`` as a message names it: under ``where`` (``where.key``) when it has one."""
    return f"{where}.{key}" if where else key


class Result:
    """One result file's data with typed, named access: every bad value is one line."""

    def __init__(self, name: str, data: Any):
        self.name = name
        self.data = data

    def bad(self, key: str, value: Any, expected: str) -> InputError:
        return InputError(f"bench/results/{self.name}: {key}={_shown(value)}; expected {expected}")

    def get(self, key: str, base: Any = None, where: str = "") -> Any:
        """The value at dotted ``key`` (under ``base``, itself found at ``where``)."""
        node, path = (self.data, "") if base is None else (base, where)
        for part in key.split("."):
            path = f"{path}.{part}" if path else part
            if isinstance(node, list) and part.isdecimal() and int(part) < len(node):
                node = node[int(part)]
            elif isinstance(node, dict) and part in node:
                node = node[part]
            else:
                raise InputError(f"bench/results/{self.name}: {path} is missing; "
                                 "expected the key the bench writes (re-run it)")
        return node

    def number(self, key: str, base: Any = None, where: str = "") -> float:
        value = self.get(key, base, where)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value <= 0:
            raise self.bad(full_key(key, where), value, "a positive number")
        return float(value)

    def count(self, key: str, base: Any = None, where: str = "", limit: int = 10**6) -> int:
        value = self.get(key, base, where)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < limit:
            raise self.bad(full_key(key, where), value, "a positive integer")
        return value

    def text(self, key: str, base: Any = None, where: str = "") -> str:
        value = self.get(key, base, where)
        if not isinstance(value, str) or not CELL_TEXT.fullmatch(value):
            raise self.bad(full_key(key, where), value, "1-120 characters of letters, digits, spaces and ._/+:,()-")
        return value

    def flag(self, key: str, base: Any = None, where: str = "") -> bool:
        value = self.get(key, base, where)
        if not isinstance(value, bool):
            raise self.bad(full_key(key, where), value, "true or false")
        return value

    def items(self, key: str, kind: type[Any] = dict, base: Any = None, where: str = "") -> list:
        """A non-empty list (``kind=list``) or mapping's items (``kind=dict``) at ``key``."""
        value: Any = self.get(key, base, where)
        if not isinstance(value, kind) or not value:
            raise self.bad(full_key(key, where), value, "a non-empty list" if kind is list else "a non-empty mapping")
        return list(value.items()) if kind is dict else value

    def mapping(self, base: Any, where: str) -> dict:
        if not isinstance(base, dict):
            raise self.bad(where, base, "a mapping")
        return base

    def rows(self, key: str = "rows") -> list[tuple[str, dict]]:
        """The non-empty list of mappings at ``key``: each with its path (``rows.N``)."""
        return [(f"{key}.{i}", self.mapping(row, f"{key}.{i}")) for i, row in enumerate(self.items(key, list))]


Row = tuple[str, str, str]  # what, figure, command


def gb(n: float) -> str:
    """A byte count in GB (10^9 bytes), two decimals."""
    return f"{n / 1e9:.2f}"
