"""The `invoke manifests` option table, read from the JobSpec fields that declare an option
(jobspec.option), and the grammar of the counts typed on the command line. Pure.

tasks.py builds the task's flags from :func:`cli_options`; regenerate.py writes and parses the
Regenerate line with :func:`options`, :func:`required`, :func:`default` and
:func:`option_text`. Two of spec.check's steps are the table's own: :func:`check_counts`
(every count in its bounds) and :func:`check_taken` (an option the job's kind cannot carry
is refused, never dropped).
"""

from __future__ import annotations

from dataclasses import MISSING, fields, replace

from torchpod.errors import InputError

from .. import grammars
from . import jobs
from .jobspec import JobSpec, Option, flag


def options() -> list[tuple[str, Option]]:
    """(field name, Option) of every `invoke manifests` option, in declaration order."""
    return [(f.name, f.metadata["option"]) for f in fields(JobSpec) if "option" in f.metadata]


def required() -> tuple[str, ...]:
    """The options with no default: a Regenerate line must name them."""
    return tuple(f.name for f in fields(JobSpec) if "option" in f.metadata and f.default is MISSING)


def default(name: str):
    """The field's default (MISSING for a required one)."""
    return next(f.default for f in fields(JobSpec) if f.name == name)


def given_apart() -> tuple[str, ...]:
    """The options whose default is a value some kind has no place for (--walltime's
    01:00:00 on a PyTorchJob): the task defaults them to '' (not given), so that a user who
    types the default value is seen (JobSpec.explicit) and refused by such a kind."""
    return tuple(name for name, how in options()
                 if how.kinds is not None and not how.count and not how.repeat and isinstance(default(name), str)
                 and default(name) != "")


def cli_options() -> list[tuple[str, object, str]]:
    """(parameter name, the task's default, help) of each option, for tasks.py: counts and
    required values are typed as text, so their task default is text too."""
    out: list[tuple[str, object, str]] = []
    apart = given_apart()
    for name, how in options():
        value = default(name)
        task_default = how.cli_default if how.cli_default is not None else str(value) if how.count else value
        if how.repeat:  # invoke's iterable flag: None makes it a list, [] when never given
            task_default = None
        if name in apart:  # '' when not given; the help says the default
            task_default = ""
            out.append((name, task_default, f"{how.help} (default: {value})"))
            continue
        out.append((name, task_default, how.help))
    return out


def given_defaults(given: dict) -> tuple[dict, frozenset[str]]:
    """The task's option values with given_apart()'s '' (not given) dropped, so the
    JobSpec default applies, and the names of those that were typed (JobSpec.explicit)."""
    apart = set(given_apart())
    kept = {k: v for k, v in given.items() if not (k in apart and v == "")}
    return kept, frozenset(k for k in apart if k in kept)


def parse_counts(given: dict) -> dict:
    """``given`` with every count option present parsed (parse_count, its flag and bounds);
    a spanned option typed MIN:MAX (parse_span) also fills its span field with MIN."""
    out = dict(given)
    for name, how in options():
        if how.count and name in out and how.span:
            low, out[name] = parse_span(flag(name), out[name], minimum=how.count[0], maximum=how.count[1])
            if low != out[name]:
                out[how.span] = low
        elif how.count and name in out:
            out[name] = parse_count(flag(name), out[name], minimum=how.count[0], maximum=how.count[1])
    return out



def parse_span(flag: str, text, *, minimum: int, maximum: int) -> tuple[int, int]:
    """``N`` or ``MIN:MAX`` (torchrun's --nnodes form) typed on the command line: ASCII
    digits only, minimum <= MIN <= MAX <= maximum; N is N:N. Else one InputError naming
    the flag, the value and the form."""
    form = (f"expected a whole number from {minimum} to {maximum}, or MIN:MAX with {minimum} <= MIN <= MAX "
            f"<= {maximum}, e.g. 2:4 (ASCII digits only)")
    shown = f"{text[:40]!r}... ({len(text)} characters)" if isinstance(text, str) and len(text) > 40 else repr(text)
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise InputError(f"{flag}={shown}; {form}")
    if isinstance(text, int):
        low = high = text
    else:
        m = grammars.COUNT_SPAN.fullmatch(text)
        if m is None:
            raise InputError(f"{flag}={shown}; {form}")
        low, high = int(m.group(1)), int(m.group(2) or m.group(1))
    if not minimum <= low <= high <= maximum:
        raise InputError(f"{flag}={shown}; {form}")
    return low, high


def parse_count(flag: str, text, *, minimum: int, maximum: int) -> int:
    """A count typed on the command line: ASCII digits only (no '2.5', '1e11', '²'),
    within [minimum, maximum]; else one InputError naming the flag."""
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise InputError(f"{flag}={text!r}; expected a whole number from {minimum} to {maximum}")
    if isinstance(text, str) and (not grammars.DIGITS.fullmatch(text) or len(text) > 18):
        raise InputError(f"{flag}={text!r}; expected a whole number from {minimum} to {maximum} "
                         "(ASCII digits only)")
    value = int(text)
    if not minimum <= value <= maximum:
        raise InputError(f"{flag}={text!r}; expected a whole number from {minimum} to {maximum}")
    return value


def option_text(spec: JobSpec, name: str) -> str:
    """An option's value as `invoke manifests` takes it (``--nodes 2:4`` for an elastic job)."""
    how = dict(options())[name]
    if how.span and getattr(spec, how.span) is not None:
        return f"{getattr(spec, how.span)}:{getattr(spec, name)}"
    return str(getattr(spec, name))


def check_counts(spec: JobSpec) -> JobSpec:
    """Every count option parsed in its bounds (parse_counts), ``--nodes MIN:MAX`` filling
    min_nodes; a min_nodes given beside a MIN:MAX of another minimum is refused."""
    counts = parse_counts({name: getattr(spec, name) for name, how in options() if how.count})
    if spec.min_nodes is not None and counts.get("min_nodes", spec.min_nodes) != spec.min_nodes:
        raise InputError(f"--nodes={spec.nodes!r} with min_nodes={spec.min_nodes!r}: two minimums; expected one")
    return replace(spec, **counts)


def check_taken(spec: JobSpec) -> JobSpec:
    """An option the job's kind cannot express (Option.kinds) is refused, never dropped."""
    for name, how in options():
        if how.kinds is None or spec.scheduler in how.kinds:
            continue
        if getattr(spec, name) == default(name) and name not in spec.explicit:
            continue
        value = getattr(spec, name)
        if isinstance(value, bool):
            given = flag(name)
        elif isinstance(value, (tuple, list)):  # a repeated option: each value as it was given
            given = " ".join(f"{flag(name)}={one}" for one in value)
        else:
            given = f"{flag(name)}={value}"
        raise InputError(f"{given}: a {spec.scheduler} job has no place for it, and it is never dropped "
                         f"silently; expected it left out, or --scheduler {jobs.choices(how.kinds)}")
    return spec
