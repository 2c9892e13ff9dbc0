"""Explicit: the user's own torchrun flags on the command line describe the job.

Claims when no scheduler is detected but the command line names a multi-node rendezvous
(``torchpod run --nnodes 2 --rdzv-endpoint etcd:2379 ...``, ``--master-addr``). PET_*
variables alone are the Kubeflow operator's (kubeflow.py). Detection contributes nothing:
the resolver fills every field from the user's options. Without --nnodes torchrun plans
one node; the resolver refuses that where a platform's variables say this is one node of
several (JobSet's own PyTorch example passes --master-addr and --master-port from a pod of
an Indexed Job).
"""

from __future__ import annotations

from ..options import UserOptions
from .common import Detection, Env, Facts, NodeCount

NAME = "explicit"
STRONG = False
MARKERS: tuple[str, ...] = ()  # the command line, not the environment


def claims(env: Env, user: UserOptions) -> bool:
    def flag(given) -> bool:
        return given is not None and given.on_command_line

    multi = user.nnodes is not None and flag(user.nnodes) and user.nnodes.value.hi > 1
    return multi or flag(user.rdzv_endpoint) or flag(user.master_addr)


def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    given = [g.source for g in (user.rdzv_endpoint, user.master_addr, user.master_port) if g is not None]
    return Detection(
        scheduler=NAME,
        nnodes=NodeCount.exactly(1),
        node_rank=None,
        rdzv_endpoint=None,
        rdzv_id=None,
        notes=("rendezvous from explicit torchrun flags",),
        endpoint_hint="pass --rdzv-endpoint HOST:PORT (or set PET_RDZV_ENDPOINT)",
        count_from_user=True,
        count_source="/".join(given) or "the command line",
    )
