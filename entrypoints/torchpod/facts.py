"""What the machine says, asked once per command: the hostname, the GPUs `nvidia-smi`
lists and the NVLink domain it reports, the hosts `scontrol` expands, the sysfs root, where this user can write, and
which options the installed torchrun takes (--signals-to-handle, the ones passed through).

The one impure step before the pure resolver (resolve.py): the launcher's commands and
the preflight workload both take their facts from here, through the one bounded runner
for helper tools (readers.run_helpers), so neither imports the other's module.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import stat
from pathlib import Path
from typing import Mapping, Sequence

from . import home, readers
from .contract import ENV_HOSTNAME, ENV_SYSFS_ROOT, SYSFS_ROOT_DEFAULT, setting
from .errors import InputError, TorchpodError
from .fabric import nvlink
from .gpus import needs_probe
from .schedulers import multi_node_markers_set, slurm
from .schedulers.common import Facts

# The one bound on a helper tool, for the plan's reading and the doctor's (readers.py says why).
HELPER_TIMEOUT_S = readers.HELPER_TIMEOUT_S


def gather_facts(env: Mapping[str, str]) -> Facts:
    """Ask the machine what the pure resolver needs: hostname, GPUs, NVLink domain, Slurm
    hosts. The
    doctor takes these from here too, and reads only what it checks beyond them itself
    (doctor.gather), through the same runner and bound (readers.run_helpers).

    The helper tools run side by side under one deadline (HELPER_TIMEOUT_S), so a launch
    waits that long at most, however many of them hang."""
    hostname = setting(env, ENV_HOSTNAME) or socket.gethostname()
    nodelist = slurm.nodelist(env)
    answers = readers.run_helpers(_helpers(env, nodelist, fabric=bool(multi_node_markers_set(env))))
    gpu_count, slurm_hosts, notes = _answers(answers, nodelist)
    domain, fabric_notes = _nvlink(answers)
    home_ok, tmp_ok, writable = home.probe(env)
    return Facts(hostname=hostname, gpu_count=gpu_count, slurm_hosts=slurm_hosts, nvlink_domain=domain,
                 notes=notes + fabric_notes, sysfs_root=configured_sysfs(env),
                 uid=os.getuid(), home_writable=home_ok, tmp_writable=tmp_ok, writable_tmp=writable,
                 torchrun_signals=torchrun_accepts("--signals-to-handle"))


def gpu_count(env: Mapping[str, str]) -> int | None:
    """The GPUs `nvidia-smi -L` lists, when the environment leaves the count to it (the
    doctor's one helper of gather_facts'); None when not asked or it did not answer."""
    return _answers(readers.run_helpers(_helpers(env, None)), None)[0]


def _helpers(env: Mapping[str, str], nodelist: tuple[str, str] | None, fabric: bool = False
             ) -> dict[str, list[str]]:
    """The helper tools to run: ``fabric`` asks for the GPUs' NVLink domain too (a node of a
    multi-node job, where it orders the ranks: torchpod.order)."""
    helpers: dict[str, list[str]] = {}
    if needs_probe(env) and shutil.which("nvidia-smi"):
        helpers["gpus"] = ["nvidia-smi", "-L"]
    if fabric and shutil.which("nvidia-smi"):
        helpers["fabric"] = ["nvidia-smi", "-q"]
    if nodelist and _expandable(*nodelist) and shutil.which("scontrol"):
        helpers["slurm"] = ["scontrol", "show", "hostnames", nodelist[1]]
    return helpers


def _nvlink(answers: Mapping[str, tuple[str | None, str]]) -> tuple[str | None, tuple[str, ...]]:
    """The NVLink domain `nvidia-smi -q` reports for every GPU (fabric.nvlink), and a note
    when it did not answer or its GPUs say the fabric is not ready."""
    if "fabric" not in answers:
        return None, ()
    out, why = answers["fabric"]
    if out is None or why:
        return None, (f"nvidia-smi -q {why or 'printed nothing'}: no NVLink domain orders the ranks",)
    return nvlink.domain(nvlink.parse(out))


def _answers(answers: Mapping[str, tuple[str | None, str]], nodelist: tuple[str, str] | None
             ) -> tuple[int | None, tuple[str, ...] | None, tuple[str, ...]]:
    """(GPUs listed, Slurm hosts expanded, notes on the helpers that did not answer)."""
    notes: list[str] = []
    count = hosts = None
    if "gpus" in answers:
        out, why = answers["gpus"]
        if out is not None and not why:
            count = sum(1 for line in out.splitlines() if line.startswith("GPU "))
        else:
            notes.append(f"nvidia-smi -L {why}: GPUs not counted")
    if "slurm" in answers and nodelist is not None:
        out, why = answers["slurm"]
        if out is not None and not why and out.split():
            hosts = tuple(out.split())
        else:
            notes.append(f"scontrol show hostnames {why or 'printed nothing'}: "
                         f"{nodelist[0]} expanded by torchpod's parser")
    return count, hosts, tuple(notes)


def configured_sysfs(env: Mapping[str, str]) -> Path:
    """TORCHPOD_SYSFS_ROOT (checked by sysfs_root; nothing there reads as no RDMA), else /sys."""
    given = setting(env, ENV_SYSFS_ROOT)
    return sysfs_root(ENV_SYSFS_ROOT.name, given, missing_ok=True) if given else Path(SYSFS_ROOT_DEFAULT)


def sysfs_root(source: str, value: str, *, missing_ok: bool = False) -> Path:
    """A sysfs root the user named: a directory; a FIFO, file or device there is refused,
    never read as an empty sysfs. Nothing there is refused too (``doctor --sysfs-root``: a
    typo must not read as a node without RDMA devices), unless ``missing_ok``:
    TORCHPOD_SYSFS_ROOT, which a job script hands every node alike, reads a node without it
    as one without RDMA devices, and the doctor names the path it looked under."""
    path = Path(value)
    expected = "expected an existing directory holding sysfs, e.g. /sys"
    try:
        st = path.lstat()
    except FileNotFoundError:
        if missing_ok:
            return path
        raise InputError(f"{source}={value!r} does not exist; {expected}") from None
    except (OSError, ValueError) as exc:  # a name too long, a component that is a file, a NUL
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(f"{source}={value!r} cannot be read ({why}); {expected}") from None
    if not stat.S_ISDIR(st.st_mode) and not path.is_dir():  # a link to a directory is one
        raise InputError(f"{source}={value!r} is not a directory; {expected}")
    return path


def _expandable(name: str, value: str) -> bool:
    """Whether `scontrol show hostnames` may expand the list: not when it names more hosts
    than torchpod would take (gigabytes of output before the deadline); a list torchpod's
    parser rejects goes to scontrol, whose grammar is the reference."""
    try:
        return slurm.hostlist_size(name, value) <= slurm.MAX_HOSTS
    except InputError:
        return True


def _torchrun_source() -> tuple[Path, str] | None:
    """The installed torch's torch/distributed/run.py and its text, located without
    importing torch; None when there is no torch or its run.py cannot be read."""
    spec = importlib.util.find_spec("torch")  # locates without importing
    if spec is None or not spec.submodule_search_locations:
        return None
    run_py = Path(next(iter(spec.submodule_search_locations))) / "distributed" / "run.py"
    try:
        return run_py, readers.read_text(run_py, what=f"torch's {str(run_py)!r}", expected="torch's own run.py",
                                         cap=readers.DATA_CAP)
    except TorchpodError:
        return None


def torchrun_accepts(option: str) -> bool:
    """Whether the installed torch's torchrun defines ``option``, read from its source.

    Importing torch.distributed.run to ask its parser costs a second or more per launch;
    the option's spelling in run.py answers the same question. No torch: True (the
    launch then fails on the missing torch, which is the real problem).
    """
    found = _torchrun_source()
    return found is None or f'"{option}"' in found[1]


def torchrun_lacks(passthrough: Sequence[str]) -> str | None:
    """One line naming the first of ``passthrough`` (torchrun options as torchpod passes
    them, ``--name`` or ``--name=value``) that the installed torch's torchrun does not
    define, or None. torchpod's table of torchrun's options follows the image's torch; an
    older torch lacks some (torch 2.11 has no --shutdown-timeout), and its torchrun would
    refuse it only after the launch began, in a usage message of its own."""
    found = _torchrun_source()
    if found is None:
        return None
    run_py, text = found
    for token in passthrough:
        name = token.partition("=")[0]
        if f'"{name}"' not in text:
            return (f"{name}: the installed torch's torchrun has no such option ({run_py} does not define it); "
                    "expected an option of that torchrun: leave it out, or use a torch that has it")
    return None
