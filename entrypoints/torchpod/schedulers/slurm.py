"""Slurm: one launcher per node, started by `srun --ntasks-per-node=1 torchpod run ...`.

Variables as slurmd/srun export them (Slurm `doc/man/man1/srun.1`, "OUTPUT ENVIRONMENT
VARIABLES", and `src/common/env.c`): SLURM_JOB_ID, SLURM_JOB_NODELIST (compressed,
``gpu[001-004,010]``), SLURM_JOB_NUM_NODES / SLURM_NNODES, inside a step SLURM_STEP_ID,
SLURM_STEP_NODELIST, SLURM_STEP_NUM_NODES, SLURM_STEP_TASKS_PER_NODE (``4(x2)``),
SLURM_NODEID (this node's index within the step), SLURM_LOCALID (the task's index on
its node), SLURM_GPUS_ON_NODE, SLURM_GPUS_PER_NODE (``--gpus-per-node`` verbatim: ``4``,
``a100:4``, ``a100:2,v100:2``). With the topology/tree plugin, SLURM_TOPOLOGY_ADDR names
the switches from the top one down to the leaf, then the node, joined by ``.``, and
SLURM_TOPOLOGY_ADDR_PATTERN names each component ``switch`` or ``node`` (srun.1; Slurm 22.05
src/plugins/topology/tree/topology_tree.c, topo_get_node_addr): the node's domains.
"""

from __future__ import annotations

import itertools
import math
import re

from ..contract import ENV_HOSTNAME, ENV_SCHEDULER, SCHEDULER_VARS
from ..errors import InputError
from ..options import UserOptions
from ..words import plural
from .common import (
    Detection,
    Endpoint,
    Env,
    Facts,
    NodeCount,
    find_host,
    get,
    parse_int,
    rdzv_port,
    stable_id,
)

NAME = "slurm"
READS = SCHEDULER_VARS[NAME]  # every variable detect() and claims() read (contract)
STRONG = True
MARKERS = ("SLURM_JOB_ID", "SLURM_JOBID")
# This step's hosts first: a step may run on part of the allocation.
NODELIST_VARS = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")


def claims(env: Env, user: UserOptions) -> bool:
    return get(env, *MARKERS) is not None


def nodelist(env: Env) -> tuple[str, str] | None:
    """(variable, compressed host list) this node's step runs on; main() expands it with
    `scontrol show hostnames` when it can, detect() with expand_hostlist otherwise."""
    return get(env, *NODELIST_VARS)


# Most hosts a node list may name. Each bracket is small but brackets multiply
# (``a[0-999]b[0-999]c[0-999]`` is 10^9 names), so the count is checked before anything
# is expanded; no Slurm job has this many nodes.
MAX_HOSTS = 100_000


def _split_items(name: str, value: str, text: str) -> list[str]:
    """The comma-separated entries of a host list, commas inside brackets kept."""
    items: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise _bad(name, value, "nested '['")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise _bad(name, value, "']' without '['")
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise _bad(name, value, "unclosed '['")
    items.append(text[start:])
    return items


Part = tuple[str, ...] | list[tuple[int, int, int]]  # a fixed text, or a bracket's ranges


def _parse(name: str, value: str) -> list[list[Part]]:
    """Each entry as its parts: ``r[1-2]-n[08-09]`` -> [("r",), [(1, 2, 1)], ("-n",), [(8, 9, 2)]]."""
    entries = []
    for item in _split_items(name, value, value.strip()):
        item = item.strip()
        if not item:
            raise _bad(name, value, "empty entry")
        parts: list[Part] = []
        for part in re.split(r"(\[[^\]]*\])", item):
            if part.startswith("["):
                parts.append(_ranges(name, value, part[1:-1]))
            elif part:
                if not re.fullmatch(r"[A-Za-z0-9_.-]+", part):
                    raise _bad(name, value, f"unexpected characters in {part!r}")
                parts.append((part,))
        entries.append(parts)
    return entries


def _ranges(name: str, value: str, body: str) -> list[tuple[int, int, int]]:
    """``01-03,7`` -> [(1, 3, 2), (7, 7, 1)]: (lo, hi, zero-padded width)."""
    out = []
    for piece in body.split(","):
        piece = piece.strip()
        # ASCII digits only, and no longer than Slurm's unsigned long (hostlist.c) allows
        m = re.fullmatch(r"([0-9]{1,18})(?:-([0-9]{1,18}))?", piece)
        if not m:
            raise _bad(name, value, f"range {piece!r} is not N or N-M")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise _bad(name, value, f"range {piece!r} runs backwards")
        out.append((lo, hi, len(m.group(1))))
    return out


def _count(part: Part) -> int:
    return 1 if isinstance(part, tuple) else sum(hi - lo + 1 for lo, hi, _w in part)


def hostlist_size(name: str, value: str) -> int:
    """How many hosts ``value`` names, counted without expanding anything."""
    return sum(math.prod(_count(p) for p in parts) for parts in _parse(name, value))


def expand_hostlist(name: str, value: str) -> tuple[str, ...]:
    """Expand Slurm's compressed host list (``a[01-03,7],b-[1-2]x[3-4]``) in order, as
    src/common/hostlist.c does; refused when it names more than MAX_HOSTS hosts."""
    entries = _parse(name, value)
    total = sum(math.prod(_count(p) for p in parts) for parts in entries)
    if total > MAX_HOSTS:
        raise _bad(name, value, f"it names {plural(total, 'host')}, more than the {MAX_HOSTS} torchpod expands")
    hosts: list[str] = []
    for parts in entries:
        choices = [
            list(part) if isinstance(part, tuple)
            else [str(n).zfill(w) for lo, hi, w in part for n in range(lo, hi + 1)]
            for part in parts
        ]
        hosts.extend("".join(combo) for combo in itertools.product(*choices))
    return tuple(hosts)


def _bad(name: str, value: str, why: str) -> InputError:
    return InputError(
        f"{name}={value!r} is not a Slurm host list ({why}); expected a form like "
        "'gpu[001-004,010],login1'; check `scontrol show hostnames $SLURM_JOB_NODELIST`"
    )


def expand_tasks_per_node(name: str, value: str) -> tuple[int, ...]:
    """``2(x3),1`` -> (2, 2, 2, 1), as in SLURM_TASKS_PER_NODE (at most MAX_HOSTS nodes)."""
    runs = []
    for piece in value.split(","):
        m = re.fullmatch(r"\s*([0-9]{1,9})(?:\(x([0-9]{1,9})\))?\s*", piece)
        if not m:
            raise InputError(
                f"{name}={value!r} is not a Slurm task count list; expected a form like '4(x2),1'"
            )
        runs.append((int(m.group(1)), int(m.group(2) or 1)))
    if sum(times for _n, times in runs) > MAX_HOSTS:
        raise InputError(f"{name}={value!r} counts more than {MAX_HOSTS} nodes; expected one count per node")
    return tuple(n for n, times in runs for _ in range(times))


# One entry of --gpus-per-node=[type:]<number>[,...] (sbatch.1), which salloc/sbatch/srun
# export verbatim as SLURM_GPUS_PER_NODE (src/common/env.c, set_env_from_opts). The count
# may follow a GRES name ("gpu:a100:4", the --gres spelling), and a GRES bound to sockets
# reads "a100:4(S:0-1)" (scontrol.1, Gres). Slurm's k/m/g count suffixes
# (slurm_protocol_defs.c, suffix_mult) mean nothing for GPUs on one node: refused.
_GPU_ENTRY = re.compile(
    r"(?:(?:gres/)?gpu:)?(?:[A-Za-z0-9_.-]+:)?([0-9]{1,6})(?:\(S:[0-9]{1,6}(?:[-,][0-9]{1,6})*\))?"
)


def parse_gpus_per_node(name: str, value: str) -> int:
    """The GPU count of SLURM_GPUS_PER_NODE: each comma-separated entry's count, summed."""
    total = 0
    for entry in re.split(r",(?![^(]*\))", value.strip()):  # commas outside "(S:0,2)"
        m = _GPU_ENTRY.fullmatch(entry.strip())
        if not m:
            raise InputError(
                f"{name}={value!r} is not a GPU count per node; expected [type:]number[,...] as "
                "sbatch --gpus-per-node takes it, e.g. '4', 'a100:4', 'a100:4(S:0-1)' or 'a100:2,v100:2'"
            )
        total += int(m.group(1))
    return total


def gpus_from_env(env: Env) -> tuple[str | None, str]:
    """GPUs Slurm allocated on this node, and which variable said so; (None, variable)
    when it says none (a CPU step), so the default rule counts them."""
    found = get(env, "SLURM_GPUS_ON_NODE")
    if found:
        count = parse_int(found[0], found[1], hint="the GPUs Slurm allocated on this node")
        return (str(count) if count else None), found[0]
    found = get(env, "SLURM_GPUS_PER_NODE")
    if found:
        count = parse_gpus_per_node(*found)
        return (str(count) if count else None), found[0]
    return None, ""


def refuse_second_task(env: Env, index: int) -> None:
    """One launcher per node. srun sets SLURM_LOCALID, the task's index on its node
    (srun.1, "OUTPUT ENVIRONMENT VARIABLES"): 1 or more is a second launcher here, whether
    or not SLURM_STEP_TASKS_PER_NODE says how many tasks this node (``index``) runs."""
    local = get(env, "SLURM_LOCALID")
    if local is not None and parse_int(*local, hint="srun sets it to the task's index on this node") >= 1:
        raise InputError(
            f"SLURM_LOCALID={local[1]!r}: this is task {local[1]} on this node, a second "
            "launcher; expected one launcher per node (torchrun starts the per-GPU processes "
            "itself); use `srun --ntasks-per-node=1 torchpod run ...`"
        )
    tasks = get(env, "SLURM_STEP_TASKS_PER_NODE")
    if tasks is not None:
        counts = expand_tasks_per_node(*tasks)
        if index < len(counts) and counts[index] > 1:
            raise InputError(
                f"SLURM_STEP_TASKS_PER_NODE={tasks[1]!r} starts {plural(counts[index], 'launcher')} on "
                "this node; expected 1 (torchrun starts the per-GPU processes itself); use "
                "`srun --ntasks-per-node=1 torchpod run ...`"
            )


def _node_index(env: Env, facts: Facts, hosts: tuple[str, ...], list_var: tuple[str, str]
                ) -> tuple[int, tuple[str, ...]]:
    """This node's index in the step: SLURM_NODEID, else this hostname's place in the list."""
    node_var = get(env, "SLURM_NODEID")
    if node_var is not None:
        index = parse_int(*node_var, hint="Slurm sets it to this node's index in the step")
        if index >= len(hosts):
            raise InputError(
                f"SLURM_NODEID={node_var[1]!r} is outside the {plural(len(hosts), 'host')} of "
                f"{list_var[0]}; expected 0-{len(hosts) - 1}"
            )
        return index, ()
    found = find_host(hosts, facts.hostname)
    if found is None:
        raise InputError(
            f"SLURM_NODEID is not set and this host {facts.hostname!r} is not in "
            f"{list_var[0]}={list_var[1]!r}; expected one of {', '.join(hosts[:8])}; "
            f"start torchpod with srun, or set {ENV_HOSTNAME.name} to this node's listed name"
        )
    return found, (f"node index {found} from matching hostname {facts.hostname!r}",)


# a switch name as topology.conf may spell it: printable ASCII without the separators
_SWITCH = re.compile(r"[!-~]{1,128}", re.ASCII)
_TOPOLOGY_FORM = ("expected SLURM_TOPOLOGY_ADDR as switch names then the node name, joined by '.', "
                  "and SLURM_TOPOLOGY_ADDR_PATTERN as that many of switch then node (e.g. "
                  "'top.leaf1.c3' and 'switch.switch.node'), as Slurm's topology/tree plugin sets them")


def topology(env: Env) -> tuple[str, ...]:
    """This node's switches, top first, from the topology/tree plugin's variables; () when
    Slurm sets none (no topology plugin). A pattern that does not describe the address is
    one line: a wrong grouping would cost every collective silently."""
    addr = get(env, "SLURM_TOPOLOGY_ADDR")
    pattern = get(env, "SLURM_TOPOLOGY_ADDR_PATTERN")
    if addr is None and pattern is None:
        return ()
    if addr is None or pattern is None:
        name, value = addr or pattern or ("", "")
        raise InputError(f"{name}={value!r} is set without its pair; {_TOPOLOGY_FORM}")
    kinds = pattern[1].strip().split(".")
    switches = len(kinds) - 1
    parts = addr[1].strip().split(".", switches)  # a node name may hold '.' itself
    if kinds[-1] != "node" or any(k != "switch" for k in kinds[:-1]) or len(parts) != switches + 1 \
            or not all(_SWITCH.fullmatch(p) and "," not in p for p in parts[:-1]) or not parts[-1]:
        shown = addr[1] if len(addr[1]) <= 80 else addr[1][:80] + "..."
        raise InputError(f"SLURM_TOPOLOGY_ADDR={shown!r} with SLURM_TOPOLOGY_ADDR_PATTERN="
                         f"{pattern[1][:80]!r} is not a switch path; {_TOPOLOGY_FORM}")
    return tuple(parts[:-1])


def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    job = get(env, *MARKERS)
    job_id = job[1] if job else ""
    list_var = nodelist(env)
    if list_var is None:
        why = "SLURM_JOB_ID is set but" if job else f"{ENV_SCHEDULER.name}={NAME}, and"
        raise InputError(
            f"{why} SLURM_JOB_NODELIST is empty or missing; expected the "
            "allocation's host list, e.g. 'gpu[001-004]'; run inside an sbatch/salloc "
            "allocation, or unset " + ("SLURM_JOB_ID" if job else ENV_SCHEDULER.name)
        )
    hosts = facts.slurm_hosts or expand_hostlist(*list_var)
    notes = [f"hosts from {list_var[0]}={list_var[1]}"]
    count_var = get(env, "SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES")
    if count_var is not None:
        count = parse_int(*count_var, minimum=1)
        if count != len(hosts):
            raise InputError(
                f"{count_var[0]}={count_var[1]!r} does not match the {plural(len(hosts), 'host')} in "
                f"{list_var[0]}={list_var[1]!r}; expected equal counts; are the variables "
                "from different steps?"
            )
    index, index_notes = _node_index(env, facts, hosts, list_var)
    notes += index_notes
    refuse_second_task(env, index)
    step = get(env, "SLURM_STEP_ID", "SLURM_STEPID")
    if step is None and len(hosts) > 1:
        notes.append(
            "SLURM_STEP_ID unset: if this is the batch script, only this node runs; start "
            "one launcher per node with `srun --ntasks-per-node=1 torchpod run ...`"
        )
    switches = topology(env)
    if switches:
        notes.append(f"topology: switches {'.'.join(switches)} from SLURM_TOPOLOGY_ADDR")
    port, port_notes = rdzv_port(env)
    nproc, nproc_var = gpus_from_env(env)
    if nproc is not None:
        notes.append(f"nproc_per_node {nproc} from {nproc_var}")
    elif nproc_var:
        notes.append(f"{nproc_var}={env[nproc_var].strip()}: no GPUs allocated on this node")
    return Detection(
        scheduler=NAME,
        nnodes=NodeCount.exactly(len(hosts)),
        node_rank=index,
        rdzv_endpoint=Endpoint(hosts[0], port),
        rdzv_id=stable_id("slurm", job_id, step[1] if step else ""),
        hosts=hosts,
        local_addr=hosts[index],
        nproc_per_node=nproc,
        notes=tuple(notes) + port_notes,
        domains=switches,
        domain_source="SLURM_TOPOLOGY_ADDR" if switches else "",
    )
