"""`python -m torchpod.torchrun ARGS` is `python -m torch.distributed.run ARGS` with the
nodes ranked in torchpod's order and a rendezvous failure explained in one line: how many
nodes were expected, how many came.

The order: when the rendezvous config holds ``torchpod_order`` (torchpod.order) on a
c10d or etcd-v2 rendezvous, this node's descriptor sorts by it (torchpod.ranked), so torch's
group rank follows it. A torch whose private names moved gets one warning line and
torch's own order.

torchrun ends a join timeout with a bare ``RendezvousTimeoutError`` traceback and no
message (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py,
``_RendezvousOpExecutor.run`` raises it without arguments).
The arrival count is in the last rendezvous state this node synced
(``_RendezvousState.participants`` and ``wait_list``), so this module wraps
``DynamicRendezvousHandler.next_rendezvous`` to read it when the timeout fires. Those
are private attributes: when a torch release renames them, the message only loses the
count. Arguments are passed to torchrun unchanged; ``torchpod plan`` still prints the plain
`python -m torch.distributed.run` command, which is what this runs.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Sequence

from .contract import ENV_RDZV_TIMEOUT
from .errors import InputError
from .options import parse_conf
from .order import ORDER_KEY, ORDERED_BACKENDS, parse_order
from .torchrun_flags import split_command_line
from .words import plural

PREFIX = "torchpod: error: "


def describe_timeout(settings, state, node, closed: bool = False) -> str:
    """The one line for a c10d/dynamic rendezvous join timeout (or a close by the node that
    timed out first: the others then see RendezvousClosedError, not the timeout)."""
    lo, hi = settings.min_nodes, settings.max_nodes
    expected = plural(lo, "node") if lo == hi else f"{lo} to {plural(hi, 'node')}"
    came = None
    if state is not None:
        try:
            # torch drops this node from the participants before raising: add it back.
            came = len(set(state.participants) | set(state.wait_list) | ({node} if node else set()))
        except (AttributeError, TypeError):
            came = None
    seconds = int(settings.timeout.join.total_seconds())
    arrived = f"{came} arrived" if came is not None else "the number that arrived is unknown"
    what = (f"was closed or lost by its store's host (node 0; it waits up to {seconds} s)"
            if closed else f"timed out after {seconds} s")
    return (
        f"rendezvous {settings.run_id!r} {what}: expected {expected}, "
        f"{arrived} (this node: {getattr(node, 'addr', '?')}); every node must run torchpod with "
        "the same job; check that the missing nodes started, can resolve and reach the "
        f"rendezvous endpoint, or raise {ENV_RDZV_TIMEOUT.name}"
    )


def _install_hook() -> None:
    from torch.distributed.elastic.rendezvous import dynamic_rendezvous as dr
    from torch.distributed.elastic.rendezvous.api import (
        RendezvousClosedError,
        RendezvousConnectionError,
        RendezvousTimeoutError,
    )

    handler = dr.DynamicRendezvousHandler
    if getattr(handler.next_rendezvous, "_torchpod", False):
        return
    original = handler.next_rendezvous

    def next_rendezvous(self, *args, **kwargs):
        try:
            return original(self, *args, **kwargs)
        except (RendezvousTimeoutError, RendezvousClosedError, RendezvousConnectionError) as exc:
            holder = getattr(self, "_state_holder", None)
            state = getattr(holder, "state", None)
            timeout = isinstance(exc, RendezvousTimeoutError)
            if (timeout and str(exc)) or (not timeout and (state is None or getattr(state, "complete", True)
                                                           or getattr(state, "round", 0) > 0)):
                raise  # a message of its own, or not a first round left waiting for nodes
            raise RendezvousTimeoutError(
                describe_timeout(self._settings, state, getattr(self, "_this_node", None),
                                 closed=not timeout)
            ) from None

    next_rendezvous._torchpod = True  # type: ignore[attr-defined]  # a marker read back by getattr above
    handler.next_rendezvous = next_rendezvous


def _install_signal_guard() -> None:
    """torchrun acts on the first signal it handles and drops repeats while it stops.

    torchrun's handler raises SignalException at every handled signal; the agent catches the
    first and stops its workers with that signal, waiting up to its shutdown timeout, and a
    second one raised inside that wait makes its ``finally`` stop them with SIGTERM instead
    (torch/distributed/elastic/agent/server/api.py, SimpleElasticAgent.run): a worker saving
    on USR1 is cut short. Copies are the rule under Slurm, which signals every process of a
    step (SchedMD/slurm slurm-22-05-9-1 src/slurmd/slurmstepd/req.c: proctrack_g_signal), so
    torchrun gets the signal itself and again from torchpod. A private name: when a torch
    release renames it, repeats act as they did."""
    from torch.distributed.elastic.multiprocessing import api

    original = getattr(api, "_terminate_process_handler", None)
    if original is None or getattr(original, "_torchpod", False):
        return
    first: list[int] = []

    def once(signum, frame):
        if first:  # os.write: print() could re-enter a write the signal interrupted
            os.write(2, (f"torchpod: torchrun got {signal.Signals(signum).name} again while stopping its workers "
                         f"on {signal.Signals(first[0]).name}; ignored\n").encode())
            return
        first.append(signum)
        original(signum, frame)

    once._torchpod = True  # type: ignore[attr-defined]  # a marker read back by getattr above
    api._terminate_process_handler = once


def node_order(argv: Sequence[str]) -> tuple[int, ...] | None:
    """The ``torchpod_order`` of torchrun's command line, when its rendezvous is one torch's
    dynamic handler ranks; None otherwise. InputError for a key that is not an order."""
    options = split_command_line(argv).options
    backend = options.get("rdzv_backend", "static")  # torchrun's default backend
    if backend not in ORDERED_BACKENDS or "rdzv_conf" not in options:
        return None
    given = dict(parse_conf("--rdzv-conf", options["rdzv_conf"])).get(ORDER_KEY)
    return None if given is None else parse_order(f"--rdzv-conf {ORDER_KEY}", given)


def _install_order(argv: Sequence[str]) -> None:
    order = node_order(argv)
    if order is None:
        return
    from . import ranked

    why_not = ranked.install(order)
    if why_not:
        print(f"torchpod: warning: group ranks follow torch's address order, not {ORDER_KEY}: {why_not}",
              file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    from torch.distributed.elastic.rendezvous.api import (
        RendezvousConnectionError,
        RendezvousTimeoutError,
    )
    from torch.distributed.run import main as torchrun_main

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        _install_order(args)
    except InputError as exc:
        print(PREFIX + str(exc), file=sys.stderr, flush=True)
        return 2
    _install_hook()
    _install_signal_guard()
    try:
        torchrun_main(args)
    except RendezvousTimeoutError as exc:
        print(PREFIX + (str(exc) or "rendezvous timed out; not every node arrived"),
              file=sys.stderr, flush=True)
        return 1
    except RendezvousConnectionError as exc:
        cause = f" ({exc.__cause__})" if exc.__cause__ else ""
        print(PREFIX + f"cannot reach the rendezvous store{cause}; the node that hosts it "
              "(node 0) has not started or is unreachable; check that it runs and that this "
              "node resolves the rendezvous endpoint", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
