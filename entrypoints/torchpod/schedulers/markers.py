"""The catalogue of multi-node markers: every variable a known platform sets to say "this
process is one of several nodes of a job".

A launcher that misses such a variable plans a world of one, and each node then trains
alone: the worst failure a launcher can have, because nothing fails. So standalone is
chosen only when no marker of the catalogue is set (or the user asked for it), and a
marker no detector turns into a plan is refused in one line naming it and what torchpod
would need instead.

The catalogue is derived, not written twice: each detector module's MARKERS (a platform
torchpod plans), plus UNPLANNED below (platforms torchpod knows but cannot plan: no host
list, or a launcher of its own that starts one process per GPU). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..contract import ENV_SCHEDULER
from .common import Env, get


@dataclass(frozen=True)
class Marker:
    """A variable, the platform that sets it, and how torchpod answers it."""

    name: str
    platform: str
    detector: str | None  # the torchpod.schedulers NAME that plans it; None: refused
    source: str = ""  # where the platform documents it (UNPLANNED entries)


# Platforms with no detector. Each sets its variable only inside a job of several nodes
# (or processes), so its presence alone rules standalone out.
UNPLANNED: tuple[Marker, ...] = (
    Marker("PE_HOSTFILE", "Grid Engine", None,
           "Grid Engine qsub(1), ENVIRONMENTAL VARIABLES: the parallel environment's host file"),
    Marker("NHOSTS", "Grid Engine", None,
           "Grid Engine qsub(1), ENVIRONMENTAL VARIABLES: hosts of the parallel environment"),
    Marker("COBALT_JOBSIZE", "Cobalt (ALCF)", None,
           "ALCF user guide, 'Running Jobs on XC40': the job's node count in a script job"),
    Marker("ALPS_APP_PE", "Cray ALPS (aprun)", None,
           "Cray aprun(1): the processing element (rank) of an aprun-launched process"),
    Marker("HOROVOD_RANK", "Horovod (horovodrun)", None,
           "horovod/runner/gloo_run.py create_run_env_vars: one process per slot, ranked"),
    Marker("HOROVOD_SIZE", "Horovod (horovodrun)", None,
           "horovod/runner/gloo_run.py create_run_env_vars: the number of processes"),
    Marker("CLUSTER_SPEC", "Vertex AI custom training", None,
           "Vertex AI docs, 'Distributed training': the JSON description of every worker pool"),
    Marker("TF_CONFIG", "TensorFlow multi-worker (Vertex AI, TFJob)", None,
           "TensorFlow docs, 'Multi-worker training': the cluster and this task's index as JSON"),
)

NEEDS = ("expected a platform torchpod plans, or the job described explicitly: "
         f"{ENV_SCHEDULER.name}=env with MASTER_ADDR, WORLD_SIZE (nodes) and RANK (this node), "
         "or torchrun's --nnodes, --node-rank and --rdzv-endpoint")


def multi_node_markers(detector) -> tuple[str, ...]:
    """A detector's markers that say "one node of several": its MULTI_NODE_MARKERS where it
    declares them (Run:ai sets RUNAI_* in single-pod workloads too), else its MARKERS."""
    return tuple(getattr(detector, "MULTI_NODE_MARKERS", detector.MARKERS))


def catalogue(detectors: Iterable) -> tuple[Marker, ...]:
    """Every marker: each detector's multi-node markers, in the order detection tries them,
    then UNPLANNED."""
    planned = tuple(Marker(name, d.NAME, d.NAME) for d in detectors for name in multi_node_markers(d))
    return planned + UNPLANNED


def set_markers(env: Env, markers: Iterable[Marker]) -> list[Marker]:
    """The markers set to a non-empty value in ``env``, in catalogue order."""
    return [m for m in markers if get(env, m.name) is not None]


def refusal(found: list[Marker], env: Env) -> str:
    """One line: which markers say this is one node of several, and what torchpod needs."""
    shown = ", ".join(f"{m.name}={env[m.name].strip()!r} ({m.platform})" for m in found[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    planned = sorted({m.detector for m in found if m.detector})
    why = (f"the {'/'.join(planned)} detector did not claim the job" if planned
           else "torchpod has no detector for that platform")
    return (f"{shown}{more} {'is' if len(found) == 1 else 'are'} set: this is one node of a "
            f"multi-node job, but {why}, and a one-node plan would train alone; {NEEDS}")


__all__ = ["Marker", "UNPLANNED", "NEEDS", "catalogue", "multi_node_markers", "set_markers", "refusal"]
