"""torchpod's sitecustomize for torchrun's workers: every thread's Python stack to a file on
a signal (SIGRTMIN+5), the hang watch's thread where a stall window is set, then the
sitecustomize this one shadows.

Armed only in a worker torchrun started for `torchpod run`: TORCHPOD_STACKS_DIR set, and the
RANK, LOCAL_RANK and ROLE_RANK torchrun gives each worker (a pod's own RANK, which Kubeflow
sets for the launcher too, comes without the other two). ``faulthandler.register`` writes
the stacks from the signal handler itself, in C, so a rank blocked in a collective (or a C
extension, or a data loader) answers as a rank running Python does (CPython,
Modules/faulthandler.c). The file is ``$TORCHPOD_STACKS_DIR/rank-<RANK>.pid-<PID>.stacks``
(a restarted worker has a file of its own), made by this process alone (O_EXCL, mode 600,
in the private folder `torchpod run` made), each dump appended; `torchpod stacks` signals
the workers and reads what each appended. Imports nothing but the standard library, and
never fails the worker: a folder that cannot be written leaves the dump unarmed.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _arm() -> bool:
    folder, rank = os.environ.get("TORCHPOD_STACKS_DIR"), os.environ.get("RANK", "")
    numbers = (rank, os.environ.get("LOCAL_RANK", ""), os.environ.get("ROLE_RANK", ""))
    if not folder or not all(n.isascii() and n.isdigit() for n in numbers):
        return False
    import faulthandler
    import signal

    try:
        fd = os.open(os.path.join(folder, f"rank-{int(rank)}.pid-{os.getpid()}.stacks"),
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError:
        return False
    # a descriptor, not a file object: nothing can close it under the handler (Python 3.5+ takes one).
    # A real-time signal: torchrun forwards none, and no training stack uses it, where SIGUSR1 and
    # SIGUSR2 are the schedulers' (Slurm --signal) and torchrun's --signals-to-handle
    faulthandler.register(signal.SIGRTMIN + 5, file=fd, all_threads=True, chain=False)
    # said only once armed: `torchpod stacks` signals no process whose file lacks this line, as
    # the signal's default action would end it
    os.write(fd, f"torchpod: rank {int(rank)} pid {os.getpid()} armed\n".encode())
    return True


def _watch() -> None:
    """The hang watch (torchpod.watch.worker), which starts its thread where `torchpod run`
    set a stall window: a daemon that waits for torch.distributed, so nothing of torch is
    imported here."""
    try:
        from torchpod.watch import worker
    except ImportError:  # a worker whose Python is not the launcher's
        return
    worker.start()


def _chain() -> None:
    """Run the sitecustomize the interpreter would have imported without this folder."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    found = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if found is None or found.loader is None:
        return
    module = importlib.util.module_from_spec(found)
    sys.modules["sitecustomize"] = module
    found.loader.exec_module(module)


if _arm():
    _watch()
_chain()
