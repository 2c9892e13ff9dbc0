"""Scheduler detection: one module per scheduler, tried in the order of SCHEDULERS.

Each module is a ``protocol.Detector`` (mypy checks SCHEDULERS against it): it has
``NAME``, ``STRONG``, ``MARKERS`` (the variables whose presence claims the environment),
``claims(env, user) -> bool`` (a cheap check) and
``detect(env, facts, user) -> Detection`` (raises InputError when the markers are there but
the variables are broken; never falls back to a world of one). Adding a scheduler is one
module plus one line in detectors.DETECTORS.
"""

from __future__ import annotations

from ..contract import ENV_SCHEDULER, setting
from ..errors import InputError
from ..options import UserOptions
from ..words import did_you_mean
from . import markers, standalone
from .common import Env, get
from .detectors import DETECTORS
from .protocol import Detector

# Every scheduler in the order detection tries them (detectors.py says why), then
# standalone: nothing found, one node; it refuses stray WORLD_SIZE/MASTER_ADDR and the
# markers of a multi-node job instead of guessing.
SCHEDULERS: tuple[Detector, ...] = (*DETECTORS, standalone)

BY_NAME: dict[str, Detector] = {m.NAME: m for m in SCHEDULERS}
NAMES: tuple[str, ...] = tuple(BY_NAME)


# What torchrun's agent sets in every worker it starts and a launcher never sees
# (torch/distributed/elastic/agent/server/local_elastic_agent.py, _start_workers:
# worker_env), most specific first. A launcher started there would read WORLD_SIZE/RANK
# as processes and plan a torchrun inside torchrun. LOCAL_RANK and LOCAL_WORLD_SIZE are
# set there too but are no marker: other per-process launchers (DeepSpeed, Accelerate,
# AzureML's PyTorch distribution) set them as well, and say nothing of torchrun.
TORCHRUN_WORKER_VARS = (
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_USE_AGENT_STORE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
    "ROLE_WORLD_SIZE",
)


def refuse_torchrun_worker(env: Env) -> None:
    """Refuse to plan inside a process torchrun started; checked before any detection,
    forced scheduler included, since every detector would misread the worker's variables."""
    found = get(env, *TORCHRUN_WORKER_VARS)
    if found is not None:
        raise InputError(
            f"{found[0]}={found[1]!r} is set: this is a process torchrun started, not a node; "
            "expected torchpod to be started once per node, outside torchrun (by the "
            "scheduler: srun, mpirun, the pod's command), and torchrun by torchpod"
        )


def markers_set(module: Detector, env: Env) -> list[str]:
    """The module's marker variables that are set in ``env``, in the module's order."""
    return [name for name in module.MARKERS if get(env, name) is not None]


def multi_node_markers_set(env: Env) -> list[markers.Marker]:
    """The catalogue's markers set in ``env``: variables that say this is one node of several."""
    return markers.set_markers(env, markers.catalogue(DETECTORS))


def requested(env: Env, user: UserOptions) -> Detector | None:
    """What the user chose outright: TORCHPOD_SCHEDULER, or torchrun's --standalone."""
    var = ENV_SCHEDULER.name
    value = setting(env, ENV_SCHEDULER).lower()
    forced = None
    if value and value != "auto":
        if value not in BY_NAME:
            hint = did_you_mean(value, BY_NAME)
            raise InputError(
                f"{var}={env[var]!r} is not a known scheduler{'; ' + hint if hint else ''}; "
                f"expected one of {', '.join(sorted(BY_NAME))} or auto; unset it to detect"
            )
        forced = BY_NAME[value]
    if user.standalone is not None:
        if forced not in (None, standalone):
            raise InputError(
                f"{user.standalone.source} conflicts with {var}={env[var]!r}; "
                f"expected one of them; drop --standalone or unset {var}"
            )
        return standalone
    return forced


def choose(env: Env, user: UserOptions) -> tuple[Detector, str]:
    """The scheduler module for ``env`` and why it was chosen."""
    module = requested(env, user)
    if module is not None:
        how = ENV_SCHEDULER.name if setting(env, ENV_SCHEDULER) or user.standalone is None else user.standalone.source
        return module, f"scheduler {module.NAME} ({how})"
    strong = [m for m in SCHEDULERS if m.STRONG and m.claims(env, user)]
    if len(strong) > 1:
        a, b = strong[0], strong[1]
        raise InputError(
            f"conflicting schedulers: {'/'.join(markers_set(a, env))} ({a.NAME}) and "
            f"{'/'.join(markers_set(b, env))} ({b.NAME}) are both set; expected one; set "
            f"{ENV_SCHEDULER.name}={a.NAME} or {b.NAME} to choose"
        )
    for module in SCHEDULERS:
        if module.claims(env, user):
            found = markers_set(module, env)
            return module, f"scheduler {module.NAME}" + (f" ({', '.join(found)})" if found else "")
    raise AssertionError("standalone claims every environment")  # unreachable: last in SCHEDULERS


__all__ = ["Detector", "SCHEDULERS", "BY_NAME", "NAMES", "choose", "requested", "markers_set", "multi_node_markers_set",
           "refuse_torchrun_worker"]
