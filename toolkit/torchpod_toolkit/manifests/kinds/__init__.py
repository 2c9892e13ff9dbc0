"""The job kinds `invoke manifests` renders: one module each in this folder, declaring one
record (``KIND``, a record.JobKind). Pure.

The modules are found here, not listed: adding a kind is its module and nothing else.
``KINDS`` is their order (each record's ``order``), the order every list of kinds follows
(the --scheduler choices, the help, the messages naming the kinds that take an option): the
Kubernetes kinds first, Volcano's before the operators', then the batch systems, SkyPilot
last. A module here without a ``KIND``, or two kinds of one name, is an error at import.
"""

from __future__ import annotations

import importlib
import pkgutil

from .record import JobKind

# the modules of this folder that are no kind
_NOT_KINDS = ("record",)


def _found() -> tuple[JobKind, ...]:
    """Every kind declared by a module of this folder, in their order (then by name)."""
    records = []
    for info in pkgutil.iter_modules(__path__):
        if info.name in _NOT_KINDS:
            continue
        record = getattr(importlib.import_module(f"{__name__}.{info.name}"), "KIND", None)
        if not isinstance(record, JobKind):
            raise TypeError(f"{__name__}.{info.name} declares no KIND (a record.JobKind); "
                            "expected one job kind per module")
        records.append(record)
    names = [r.name for r in records]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise TypeError(f"{__name__}: two modules declare the kind {twice[0]!r}; expected one module per kind")
    return tuple(sorted(records, key=lambda r: (r.order, r.name)))


KINDS: tuple[JobKind, ...] = _found()
