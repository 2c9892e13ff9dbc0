"""The committed bench results the measurements tests render (tests/unit/torchpod_toolkit/
test_measurement*.py), and the helpers that spoil one value of them: a result that is not
what a bench writes must fail in one line naming the file, never with a traceback."""

from __future__ import annotations

import copy
from typing import Any

from torchpod.errors import InputError
from torchpod_toolkit import measurements

from paths import ROOT

RESULTS = ROOT / "bench" / "results"
PAGE = ROOT / "docs" / "measurements.md"
REAL = measurements.load(RESULTS)
DELETE = object()  # set_at's value that removes the key


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert len(text.splitlines()) == 1 and text.isprintable(), repr(text)
    return text


def set_at(data: Any, dotted: str, value: Any) -> None:
    """Set (or, with DELETE, remove) the value at ``dotted`` in one parsed result."""
    *parents, last = dotted.split(".")
    for part in parents:
        data = data[int(part)] if isinstance(data, list) else data[part]
    if value is DELETE:
        del data[int(last) if isinstance(data, list) else last]
    elif isinstance(data, list):
        data[int(last)] = value
    else:
        data[last] = value


def row(table: str, start: str) -> str:
    """The one line of ``table`` whose first cell begins with ``start``."""
    (line,) = [line for line in table.splitlines() if line.startswith(f"| {start}")]
    return line


def spoiled_message(name: str, key: str, value: Any) -> str:
    """The one-line error rendering the committed results gives with ``name``'s ``key`` set to ``value``."""
    results = copy.deepcopy(REAL)
    set_at(results[name], key, value)
    try:
        measurements.render(results)
    except InputError as exc:
        text = one_line(exc)
        assert text.startswith(f"bench/results/{name}: ") and len(text) < 400, text
        return text
    raise AssertionError(f"{name}: {key}={value!r} rendered a table; expected one InputError")
