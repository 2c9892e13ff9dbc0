"""IBM Spectrum LSF: one launcher per host, started by `blaunch` or `jsrun`.

The job script runs on the first execution host only; torchpod must be started once on each
host (`blaunch -z "<hosts>" torchpod ...`, or `jsrun -r 1 torchpod ...`). LSF describes the
allocation per job, not per process (IBM LSF docs, "Environment variables set for job
execution"): LSB_JOBID, LSB_MCPU_HOSTS (``"host1 n1 host2 n2"``: each host and its slots),
LSB_DJOB_HOSTFILE (one line per slot, so a host repeats) and, on CSM/jsrun systems,
LSB_DJOB_RANKFILE (the same, one line per rank). None of them says which host this is: the
node index is this host's position among the distinct hosts, matched by name.

The launch node: on jsrun systems (`bsub -nnodes`) the first host listed is the batch
("launch") node that runs the job script and no GPU work, with one slot. Lightning drops the
first line of LSB_DJOB_RANKFILE for that reason (Lightning-AI/pytorch-lightning,
src/lightning/fabric/plugins/environments/lsf.py, ``_read_hosts``: "remove the launch node").
Dropping it always would lose a real node under plain `blaunch`, where the first host is an
execution host; so torchpod drops the first host only when it has exactly one slot while
every other host has more (the launch node's shape), and says so in a note. jsrun gives each
rank JSM_NAMESPACE_LOCAL_RANK (per process): above 0 is a second launcher on this host.

Slot shapes: LSF writes the host file one line per slot, so a host with N slots repeats N
times (IBM LSF 10.1, "Environment variables set for job execution": LSB_DJOB_HOSTFILE,
LSB_MCPU_HOSTS ``"hostA nA hostB nB"``), and `-R "span[ptile=N]"` puts N slots on every
host (IBM LSF 10.1, "Span string" of the resource requirement string). A job torchpod can
run is therefore one of two shapes: every host with the same slot count (`span[ptile=1]`, as
`invoke manifests --scheduler lsf` writes it, or any other ptile), or one one-slot launch
host first and then hosts with the same count. Anything else (a launch host *and* a login
host with one slot each before the compute hosts, compute hosts with different counts) would
make hosts that start no launcher into nodes of the plan, and every launcher would wait out
the rendezvous for them: it is refused in one line instead (``compute_hosts``).
"""

from __future__ import annotations

from .. import readers
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
    check_host,
    find_host,
    get,
    parse_int,
    rdzv_port,
    stable_id,
)

NAME = "lsf"
READS = SCHEDULER_VARS[NAME]  # every variable detect() and claims() read (contract)
STRONG = True  # LSB_* are set by LSF's sbatchd/res alone
MARKERS = ("LSB_JOBID", "LSB_DJOB_HOSTFILE", "LSB_DJOB_RANKFILE", "LSB_MCPU_HOSTS")
FILE_EXPECTED = "the file LSF writes for the job, one host name per line (a host once per slot)"


def claims(env: Env, user: UserOptions) -> bool:
    return get(env, *MARKERS) is not None


def _count(names: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """(host, slots) pairs merged by host, in first-appearance order."""
    slots: dict[str, int] = {}
    for host, n in names:
        slots[host] = slots.get(host, 0) + n
    return list(slots.items())


def read_host_file(var: str, path: str) -> list[tuple[str, int]]:
    what = f"{var}={path!r}"
    text = readers.read_text(path, what=what, expected=FILE_EXPECTED, cap=readers.NODE_FILE_CAP)
    found = []
    for number, line in enumerate(text.split("\n"), 1):
        words = line.split()
        if words:
            found.append((check_host(f"{what} line {number}", words[0]), 1))
    return _count(found)


def parse_mcpu_hosts(value: str) -> list[tuple[str, int]]:
    words = value.split()
    if not words or len(words) % 2:
        raise InputError(
            f"LSB_MCPU_HOSTS={value!r} is not a list of host and slot pairs; "
            "expected 'host1 n1 host2 n2 ...' as LSF sets it"
        )
    pairs = [(check_host("LSB_MCPU_HOSTS", words[i]),
              parse_int("LSB_MCPU_HOSTS", words[i + 1], minimum=1, hint="'host1 n1 host2 n2 ...'"))
             for i in range(0, len(words), 2)]
    return _count(pairs)


def allocation(env: Env) -> tuple[list[tuple[str, int]], str]:
    """The job's (host, slots) pairs and which variable they came from."""
    for var in ("LSB_DJOB_RANKFILE", "LSB_DJOB_HOSTFILE"):
        found = get(env, var)
        if found is not None:
            return read_host_file(var, found[1]), var
    mcpu = get(env, "LSB_MCPU_HOSTS")
    if mcpu is not None:
        return parse_mcpu_hosts(mcpu[1]), "LSB_MCPU_HOSTS"
    job = get(env, "LSB_JOBID")
    raise InputError(
        (f"LSB_JOBID={job[1]!r} is set but" if job else f"{ENV_SCHEDULER.name}={NAME!r}, and")
        + " no host list is; expected LSB_DJOB_HOSTFILE, LSB_DJOB_RANKFILE or LSB_MCPU_HOSTS; "
        "start torchpod inside the LSF job with blaunch or jsrun"
    )


SHAPE_SHOWN = 6  # (host, slots) pairs a refusal prints before it shortens the list


def slot_shape(pairs: list[tuple[str, int]]) -> str:
    """``host N, host N, ...`` for a message, shortened after SHAPE_SHOWN hosts."""
    shown = ", ".join(f"{host} {n}" for host, n in pairs[:SHAPE_SHOWN])
    more = len(pairs) - SHAPE_SHOWN
    return shown + (f", ... ({plural(len(pairs), 'host')} in all)" if more > 0 else "")


def compute_hosts(pairs: list[tuple[str, int]], where: str) -> tuple[tuple[str, ...], str | None]:
    """The hosts that run GPU work, and the launch node dropped (module docstring), if any;
    a slot shape that is neither even nor one launch host before even ones is refused."""
    hosts = tuple(h for h, _ in pairs)
    counts = {n for _, n in pairs[1:]}
    if len(counts) <= 1 and (pairs[0][1] in counts or not counts):
        return hosts, None
    if len(counts) == 1 and pairs[0][1] == 1:
        return hosts[1:], hosts[0]
    raise InputError(
        f"{where} gives hosts and slots {slot_shape(pairs)}; expected every compute host with the "
        "same slot count, after at most one one-slot launch host, since hosts that start no "
        "launcher would hold up the rendezvous; submit with -R \"span[ptile=1]\" (one slot on "
        "each host, as `invoke manifests --scheduler lsf` writes it) and start torchpod with blaunch"
    )


def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    pairs, source = allocation(env)
    if not pairs:
        raise InputError(f"{source} lists no hosts; expected {FILE_EXPECTED}")
    where = f"{source}={env[source]!r}"
    hosts, launch = compute_hosts(pairs, where)
    index = find_host(hosts, facts.hostname)
    if index is None:
        raise InputError(
            f"this host {facts.hostname!r} is not among the compute hosts of {where} "
            f"({', '.join(hosts[:8])}); expected this node's short or full name"
            + (f" ({launch!r} is the launch node and runs no GPU work)" if launch else "")
            + f"; start torchpod on each host with blaunch or `jsrun -r 1`, or set {ENV_HOSTNAME.name}"
        )
    local = get(env, "JSM_NAMESPACE_LOCAL_RANK")
    if local is not None and parse_int(*local) > 0:
        raise InputError(
            f"JSM_NAMESPACE_LOCAL_RANK={local[1]!r}: jsrun started more than one launcher on this "
            "host; expected 0 (torchrun starts one process per GPU itself); use `jsrun -r 1`"
        )
    notes = [f"{plural(len(hosts), 'distinct host')} in {source}; this is {hosts[index]!r}, node {index} "
             f"(hostname {facts.hostname!r})"]
    if launch:
        notes.append(f"{launch!r}, listed first with one slot, is the launch node: left out")
    port, port_notes = rdzv_port(env)
    job = get(env, "LSB_JOBID")
    return Detection(
        scheduler=NAME,
        nnodes=NodeCount.exactly(len(hosts)),
        node_rank=index,
        rdzv_endpoint=Endpoint(hosts[0], port),
        rdzv_id=stable_id("lsf", job[1] if job else ",".join(hosts)),
        hosts=hosts,
        local_addr=hosts[index],
        notes=tuple(notes) + port_notes,
    )
