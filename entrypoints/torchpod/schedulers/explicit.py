"""Explicit: the user's own torchrun flags or PET_* variables describe the job.

Chosen by TORCHPOD_SCHEDULER=explicit, or when no scheduler is detected but the command
line or PET_* name a multi-node rendezvous (``--nnodes 2 --rdzv-endpoint etcd:2379``).
Detection contributes nothing; the resolver fills every field from the user's options.
"""

from __future__ import annotations

from .common import Detection, Env, Facts

NAME = "explicit"
STRONG = False


def claims(env: Env) -> bool:
    return False  # never detected from the environment alone


def detect(env: Env, facts: Facts) -> Detection:
    return Detection(
        scheduler=NAME,
        nnodes="1",
        node_rank=None,
        rdzv_endpoint=None,
        rdzv_id=None,
        notes=("rendezvous from explicit torchrun flags / PET_* variables",),
        endpoint_hint="pass --rdzv-endpoint HOST:PORT (or set PET_RDZV_ENDPOINT)",
    )
