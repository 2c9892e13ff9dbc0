"""Templates of one recorded value: what a value the operator wrote is made of, found from
every recorded pod of a role (derive.py), and the value a template gives another pod. Pure.

A template is text in which the job's name, namespace and role (and what else the shape
names, shapes.py) stand for themselves, and numbers each of which is a literal or a quantity
of the pod's vocabulary: an entry (``index``, ``count``...), one more than it, or it times
``nproc``. A list whose length follows a count (Volcano's ``VC_WORKER_HOSTS``, its host
files) is a join of one item template over ``item``. Where several templates fit every
recording, all are kept, and a value is given only where they agree.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from torchpod.errors import InputError

SEPARATORS = (",", "\n")
_DIGITS = re.compile(r"(\d+)")

Part = tuple[str, Any]  # ("t", text) | ("s", string name) | ("n", frozenset of number expressions)


class DeriveError(InputError):
    """A recording no template fits: the operator did something the derivation cannot say."""


@dataclass(frozen=True)
class Scalar:
    alternatives: frozenset[tuple[Part, ...]]


@dataclass(frozen=True)
class Joined:
    sep: str
    length: frozenset[str]
    item: Scalar


Template = Scalar | Joined
Observation = tuple[Mapping[str, str], Mapping[str, int], str]


# --- numbers -----------------------------------------------------------------------------------

def expressions(numbers: Mapping[str, int]) -> dict[str, int]:
    """Every quantity a recorded number may be: a vocabulary entry, one more, or times nproc."""
    out = {}
    for name, value in numbers.items():
        out[name] = value
        out[f"{name}+1"] = value + 1
        if "nproc" in numbers and name != "nproc":
            out[f"{name}*nproc"] = value * numbers["nproc"]
    return out


def _value(expr: str, numbers: Mapping[str, int]) -> int | None:
    return int(expr[1:]) if expr.startswith("=") else expressions(numbers).get(expr)


def _candidates(token: str, numbers: Mapping[str, int]) -> frozenset[str]:
    fits = {e for e, v in expressions(numbers).items() if str(v) == token}
    return frozenset(fits | {f"={token}"} if str(int(token)) == token else {f"=#{token}"})


# --- one value ---------------------------------------------------------------------------------

def _skeletons(value: str, strings: Mapping[str, str]) -> set[tuple[tuple[str, str], ...]]:
    """``value`` split into text and string names, each name standing for all or none of its
    occurrences, longest first."""
    present = sorted((k for k, v in strings.items() if v and v in value), key=lambda k: (-len(strings[k]), k))
    out = set()
    for chosen in itertools.product((False, True), repeat=len(present)):
        parts: list[tuple[str, str]] = [("t", value)]
        for use, key in zip(chosen, present):
            if not use:
                continue
            split: list[tuple[str, str]] = []
            for kind, text in parts:
                if kind != "t":
                    split.append((kind, text))
                    continue
                pieces = text.split(strings[key])
                for n, piece in enumerate(pieces):
                    split += [("s", key)] * (n > 0) + [("t", piece)] * bool(piece)
            parts = split
        out.add(tuple(parts))
    return out


def _fits(value: str, strings: Mapping[str, str], numbers: Mapping[str, int]) -> dict[tuple, list[frozenset[str]]]:
    """Each structure ``value`` may have (text, string names, number slots) with each slot's
    fitting expressions."""
    out = {}
    for skeleton in _skeletons(value, strings):
        structure: list[Part] = []
        slots: list[frozenset[str]] = []
        for kind, text in skeleton:
            if kind == "s":
                structure.append(("s", text))
                continue
            for n, piece in enumerate(_DIGITS.split(text)):
                if n % 2:
                    structure.append(("n", len(slots)))
                    slots.append(_candidates(piece, numbers))
                elif piece:
                    structure.append(("t", piece))
        out[tuple(structure)] = slots
    return out


def scalar(observations: Sequence[Observation], what: str) -> Scalar:
    """The templates that give every observed value of one field."""
    found: dict[tuple, list[frozenset[str]]] | None = None
    for strings, numbers, value in observations:
        fits = _fits(value, strings, numbers)
        if found is None:
            found = fits
            continue
        found = {s: [a & b for a, b in zip(found[s], fits[s])] for s in found.keys() & fits.keys()}
    alternatives = frozenset(tuple(("n", slots[p]) if k == "n" else (k, p) for k, p in s)
                             for s, slots in (found or {}).items() if all(slots))
    if not alternatives:
        seen = sorted({v for _, _, v in observations})[:4]
        raise DeriveError(f"{what}: no template gives every recorded value {seen}; expected a value made of "
                          "the job's name, namespace, role and counted quantities")
    return Scalar(alternatives)


def template(observations: Sequence[Observation], what: str) -> Template:
    """A list joined over ``item`` where a separator shows and one item template fits, else a scalar."""
    for sep in SEPARATORS:
        if not any(sep in v for _, _, v in observations):
            continue
        items, lengths = [], None
        for strings, numbers, value in observations:
            parts = value.split(sep)
            items += [(strings, {**numbers, "item": n}, p) for n, p in enumerate(parts)]
            fit = {e for e, v in expressions(numbers).items() if v == len(parts)}
            lengths = fit if lengths is None else lengths & fit
        try:
            item = scalar(items, f"{what} (an item)")
        except DeriveError:
            continue
        if lengths:
            return Joined(sep, frozenset(lengths), item)
    return scalar(observations, what)


def agreed(values: Iterable[Any], what: str, strings: Mapping[str, str]) -> Any:
    found = set(values)
    if len(found) != 1:
        raise InputError(f"{strings['name']}: {what} is {' or '.join(sorted(map(str, found)))} by the recordings, "
                         "which never saw a job where these differ; expected a job shaped like a recorded one")
    return found.pop()


def _missing(what: str, names: Iterable[str], strings: Mapping[str, str]) -> InputError:
    return InputError(f"{strings['name']}: {what} is made of {' or '.join(sorted(names))}, which this job does not "
                      "state; expected a job shaped like a recorded one")


def _number(part: frozenset[str], numbers: Mapping[str, int], what: str, strings: Mapping[str, str]) -> Any:
    values = {e: e[2:] if e.startswith("=#") else _value(e, numbers) for e in part}
    if None in values.values():
        raise _missing(what, [e for e, v in values.items() if v is None], strings)
    return agreed(values.values(), what, strings)


def render(t: Template, strings: Mapping[str, str], numbers: Mapping[str, int], what: str) -> str:
    """The value ``t`` gives the pod whose vocabulary is ``strings`` and ``numbers``; refused
    where a quantity it is made of is not the job's, or where templates that fit alike differ."""
    if isinstance(t, Joined):
        n = _number(t.length, numbers, f"{what}'s length", strings)
        return t.sep.join(render(t.item, strings, {**numbers, "item": i}, what) for i in range(n))
    out = set()
    for alternative in t.alternatives:
        text = ""
        for kind, part in alternative:
            if kind == "n":
                text += str(_number(part, numbers, what, strings))
            elif kind == "s":
                if part not in strings:
                    raise _missing(what, [part], strings)
                text += strings[part]
            else:
                text += part
        out.add(text)
    return agreed(out, what, strings)
