"""Standalone: one node, nothing else found. Says so, and refuses stray scheduler variables.

A WORLD_SIZE or MASTER_ADDR that no detector claims means a half-configured job; running a
world of one then hides the mistake until the other nodes time out, so it is an error
unless the user asked for standalone (TORCHPOD_SCHEDULER=standalone or --standalone).
"""

from __future__ import annotations

from ..contract import ENV_SCHEDULER, setting
from ..errors import InputError
from ..options import UserOptions
from . import markers
from .common import Detection, Env, Facts, NodeCount, get, stable_id
from .detectors import DETECTORS

NAME = "standalone"
STRONG = False
MARKERS: tuple[str, ...] = ()

# Variables that only make sense in a multi-node job torchpod would have recognised,
# with the one value that is harmless on a single node (None: never harmless).
_STRAY = {
    "WORLD_SIZE": "1",
    "RANK": "0",
    "NODE_RANK": "0",
    "PET_NODE_RANK": "0",
    "MASTER_ADDR": None,
    "PET_MASTER_ADDR": None,
}


def claims(env: Env, user: UserOptions) -> bool:
    return True


def _asked(env: Env, user: UserOptions) -> bool:
    return user.standalone is not None or setting(env, ENV_SCHEDULER).lower() == NAME


def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    asked = _asked(env, user)
    if not asked:
        stray = [
            (name, env[name])
            for name, harmless in _STRAY.items()
            if get(env, name) is not None and env[name].strip() != harmless
        ]
        if stray:
            known = ", ".join(d.NAME for d in DETECTORS if d.NAME != "explicit")
            shown = ", ".join(f"{n}={v!r}" for n, v in stray)
            raise InputError(
                f"{shown} {'is' if len(stray) == 1 else 'are'} set but no scheduler recognised "
                f"them; expected either a known scheduler ({known}) or an explicit rendezvous; "
                f"set {ENV_SCHEDULER.name}=<name>, pass --nnodes/--rdzv-endpoint, or unset them "
                "to run on one node"
            )
        _refuse_markers(env)
    return Detection(
        scheduler=NAME,
        nnodes=NodeCount.exactly(1),
        node_rank=0,
        rdzv_endpoint=None,  # the resolver's single-node default: loopback, a free port
        rdzv_id=stable_id("standalone", facts.hostname),
        notes=("standalone requested: single node, rendezvous on a free local port",)
        if asked
        else ("no scheduler detected: single node, rendezvous on a free local port",),
        single_node=True,
    )


def _refuse_markers(env: Env) -> None:
    """A multi-node marker that reached standalone (no detector claimed it, or no detector
    exists for its platform) is refused: a world of one would train alone, silently."""
    found = markers.set_markers(env, markers.catalogue(DETECTORS))
    if found:
        raise InputError(markers.refusal(found, env))
