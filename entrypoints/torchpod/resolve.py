"""Turn (environment, facts, command line) into a LaunchPlan, as a chain of small decisions.

Each ``decide_*`` function makes one decision (node count, node index, backend, endpoint,
rendezvous id, rendezvous config, local address, restarts, processes, signals,
environment) and returns a :class:`Step`: the value and the notes that explain it.
``resolve`` runs them in order and collects the notes. Pure: no I/O besides the files the
environment names (PBS_NODEFILE, /etc/volcano under ``facts.root``, sysfs under
``facts.sysfs_root``); never reads ``os.environ``.

Precedence for every field: torchrun flag on the command line > PET_<FIELD> variable
(torchrun's own environment spelling) > the scheduler's answer > default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Mapping, TypeVar

from . import home, rendezvous, schedulers
from .contract import (
    ENV_NODE_RANK,
    ENV_RDZV_TIMEOUT,
    ENV_SCHEDULER,
    ENV_STALL_WINDOW,
    TORCHRUN_MASTER_PORT,
    number,
    setting,
)
from .errors import InputError
from .fabric import detect_fabric
from .gpus import default_nproc
from .options import Given, UserOptions, read_user_options
from .order import ORDER_KEY, ORDERED_BACKENDS, domain_order, order_text, parse_order
from .plan import PREPENDS, REPLACES, LaunchPlan
from .schedulers.common import LOOPBACK, Detection, Facts, stable_id
from .stacks import SHIM_DIR
from .supervise import FORWARDED_NAMES, TERMINATING_NAMES
from .torchrun_flags import Invocation
from .values import Endpoint, NodeCount, check_host
from .watch import EXIT_HANG, FR_BUFFER_SIZE
from .words import plural

T = TypeVar("T")


@dataclass(frozen=True)
class Step(Generic[T]):
    """One decision: its value and why."""

    value: T
    notes: tuple[str, ...] = ()


def _override(given: Given, det: Detection, field: str, detected: object) -> tuple[str, ...]:
    """The note when the user's option replaces a different value the scheduler gave."""
    if detected is None or str(detected) == str(given.value):
        return ()
    return (f"{given.source}={given.value} overrides {det.scheduler}'s {field}={detected}",)


def detect(env: Mapping[str, str], facts: Facts, user: UserOptions) -> Step[Detection]:
    module, why = schedulers.choose(env, user)
    det = module.detect(env, facts, user)
    return Step(det, (why, *det.notes))


def decide_nnodes(env: Mapping[str, str], det: Detection, user: UserOptions) -> Step[NodeCount]:
    if user.nnodes is None:
        if det.count_from_user:
            _refuse_open_count(env, det)
        return Step(det.nnodes)
    nnodes, source = user.nnodes.value, user.nnodes.source
    if det.single_node and nnodes.hi > 1:
        raise InputError(
            f"{source}={str(nnodes)!r} contradicts standalone (one node); expected 1; drop "
            f"--standalone / {ENV_SCHEDULER.name}=standalone, or give a rendezvous endpoint"
        )
    if det.hosts is not None and not nnodes.lo <= len(det.hosts) <= nnodes.hi:
        raise InputError(
            f"{source}={str(nnodes)!r} does not fit the {plural(len(det.hosts), 'host')} {det.scheduler} "
            f"lists; expected {len(det.hosts)} (or MIN:MAX around it); drop the override or "
            "fix the allocation"
        )
    detected = None if det.scheduler == "explicit" else det.nnodes
    return Step(nnodes, _override(user.nnodes, det, "nnodes", detected))


def _refuse_open_count(env: Mapping[str, str], det: Detection) -> None:
    """Flags that name a rendezvous but no node count mean one node to torchrun; in a pod or
    allocation that a platform's variables mark as one node of several, that node would
    train alone. Refused, naming the marker and the flag that fixes it."""
    found = schedulers.multi_node_markers_set(env)
    if found:
        first = found[0]
        raise InputError(
            f"{det.count_source} names the rendezvous but not the node count, and "
            f"{first.name}={env[first.name].strip()!r} ({first.platform}) says this is one node of several: "
            "one node would train alone; "
            "expected --nnodes N (the job's node count) beside it, or no rendezvous flags so "
            "that torchpod reads the job from the scheduler"
        )


@dataclass(frozen=True)
class Place:
    """This node's index (None: c10d assigns one) and the address it advertises."""

    node_rank: int | None
    local_addr: str | None


def decide_node(det: Detection, user: UserOptions, nnodes: NodeCount) -> Step[Place]:
    node, local_addr = det.node_rank, det.local_addr
    notes: tuple[str, ...] = ()
    if user.node_rank is not None:
        node, source = user.node_rank.value, user.node_rank.source
        notes = _override(user.node_rank, det, "node_rank", det.node_rank)
        if det.hosts is not None and node != det.node_rank:
            if node >= len(det.hosts):
                raise InputError(
                    f"{source}={node} is outside the {plural(len(det.hosts), 'host')} {det.scheduler} "
                    f"lists; expected 0-{len(det.hosts) - 1}"
                )
            local_addr = det.hosts[node]
    if node is not None and node >= nnodes.hi:
        raise InputError(
            f"node index {node} is outside nnodes={nnodes}; expected 0-{nnodes.hi - 1}; check "
            "the rank variables and --nnodes"
        )
    return Step(Place(node, local_addr), notes)


def decide_backend(det: Detection, user: UserOptions) -> Step[str]:
    if user.rdzv_backend is not None:
        return Step(user.rdzv_backend.value)
    return Step(det.rdzv_backend or "c10d")


@dataclass(frozen=True)
class Rendezvous:
    endpoint: Endpoint
    single_node: bool  # no endpoint anywhere and one node: loopback, a free port


def decide_endpoint(det: Detection, user: UserOptions, nnodes: NodeCount, backend: str) -> Step[Rendezvous]:
    """The user's endpoint, else --master-addr/--master-port over the scheduler's, else the
    scheduler's, else loopback for one node; an error for several nodes and none."""
    ep = det.rdzv_endpoint
    notes: tuple[str, ...] = ()
    if user.rdzv_endpoint is not None:
        notes = _override(user.rdzv_endpoint, det, "rdzv_endpoint", det.rdzv_endpoint)
        ep = user.rdzv_endpoint.value
    elif user.master_addr is not None or user.master_port is not None:
        ep, notes = _master_flags(user, ep)
    if ep is None:
        if nnodes.hi > 1:
            raise InputError(
                f"nnodes={nnodes} needs a rendezvous endpoint and none was found; expected "
                "HOST:PORT of the first node; " + (det.endpoint_hint or "pass --rdzv-endpoint HOST:PORT")
            )
        return Step(Rendezvous(Endpoint(LOOPBACK, 0), single_node=True), notes)
    source = user.rdzv_endpoint.source if user.rdzv_endpoint else f"{det.scheduler} rendezvous endpoint"
    check_host(source, ep.host)  # a scheduler's host list may hold anything
    if backend == "static" and ep.port is None:
        raise InputError(
            f"{source}={str(ep)!r} has no port; the static backend needs HOST:PORT; "
            "pass --rdzv-endpoint HOST:PORT or --master-port"
        )
    return Step(Rendezvous(ep, single_node=False), notes)


def _master_flags(user: UserOptions, detected: Endpoint | None) -> tuple[Endpoint, tuple[str, ...]]:
    """--master-addr/--master-port over the scheduler's endpoint; a port inside the
    address (``node0:1234``) counts as --master-port, and a different --master-port is an error."""
    addr, port_opt = user.master_addr, user.master_port
    host = addr.value.host if addr else (detected.host if detected else None)
    if host is None:
        raise InputError(
            f"{port_opt.source if port_opt else '--master-port'} given without a master address; expected "
            "--master-addr HOST too (or --rdzv-endpoint HOST:PORT)"
        )
    notes: tuple[str, ...] = ()
    inner = addr.value.port if addr else None
    if addr is not None and inner is not None:
        if port_opt is not None and port_opt.value != inner:
            raise InputError(
                f"{addr.source} names port {inner} and {port_opt.source}={port_opt.value} names "
                f"another; expected one port; drop the port from {addr.source} or make them agree"
            )
        notes = (f"{addr.source} holds a port: host {host}, port {inner}",)
    if port_opt is not None:
        port = port_opt.value
    elif inner is not None:
        port = inner
    else:  # torchrun's own --master-port default
        port = detected.port if detected and detected.port is not None else TORCHRUN_MASTER_PORT
    ep = Endpoint(host, port)
    sources = [given.source for given in (addr, port_opt) if given is not None]
    if ep == detected and all(source.startswith("PET_") for source in sources):
        return ep, notes  # torchrun's own variables, set by the operator: the scheduler's note says it
    return ep, (f"rendezvous endpoint {ep} from {' and '.join(sources)}", *notes)


def decide_local_addr(det: Detection, user: UserOptions, place: Place, rdzv: Rendezvous) -> Step[str | None]:
    if user.local_addr is not None:
        return Step(user.local_addr.value, _override(user.local_addr, det, "local_addr", place.local_addr))
    if place.local_addr is None and rdzv.single_node:
        return Step(LOOPBACK)  # the store's host is this node, which may have no name
    if place.local_addr is not None:
        check_host(f"{det.scheduler} local_addr", place.local_addr)
    return Step(place.local_addr)


def decide_rdzv_id(det: Detection, user: UserOptions, endpoint: Endpoint) -> Step[str]:
    derived = det.rdzv_id or stable_id("torchpod", str(endpoint))
    if user.rdzv_id is not None:
        return Step(user.rdzv_id.value, _override(user.rdzv_id, det, "rdzv_id", det.rdzv_id))
    if user.rdzv_id_none is not None:
        return Step(derived, (f"{user.rdzv_id_none}=none ignored: using {derived}, stable per job",))
    return Step(derived)


@dataclass(frozen=True)
class Ranks:
    """How torch will number the nodes: the order key torchpod.torchrun hands the rendezvous
    (None: torch's own order), the group rank this node gets when that is known before the
    rendezvous, and how ranks are assigned, in words (the plan's ``rank_order``)."""

    order: tuple[int, ...] | None
    group_rank: int | None
    how: str


@dataclass(frozen=True)
class Topology:
    """This node's topology domains, top first, and where they came from in words: the
    scheduler's (a Slurm switch path), then the NVLink domain of its GPUs."""

    domains: tuple[str, ...] = ()
    source: str = ""


# how an NVLink domain is named among a node's domains (its GPU feature discovery label value after it)
NVLINK_PREFIX = "nvlink:"


def decide_topology(det: Detection, facts: Facts) -> Step[Topology]:
    """The scheduler's domains, then the NVLink domain innermost: the nodes of one NVLink
    domain (a GB200 NVL72 rack) share its switches on every fabric built around racks, and
    their ring stays on NVLink where the domain holds several of the job's nodes."""
    domains, sources = det.domains, [det.domain_source] if det.domains else []
    if facts.nvlink_domain:
        domains += (NVLINK_PREFIX + facts.nvlink_domain,)
        sources.append("the GPUs' NVLink domain (nvidia-smi -q)")
    return Step(Topology(domains, " and ".join(sources)))


def decide_ranks(user: UserOptions, backend: str, nnodes: NodeCount, node: int | None,
                 topology: Topology = Topology()) -> Step[Ranks]:
    """The node index as c10d's order (torchpod.order), so that torch's group rank is the
    node torchpod names; the topology's domains before it, so that the nodes of one domain
    take contiguous ranks; the user's own ``torchpod_order`` over both."""
    given = dict(user.rdzv_conf.value).get(ORDER_KEY) if user.rdzv_conf is not None else None
    if given is not None and user.rdzv_conf is not None:
        source = f"{user.rdzv_conf.source} {ORDER_KEY}"
        order = parse_order(source, given)
        if backend not in ORDERED_BACKENDS:
            raise InputError(
                f"{source}={given!r} orders the nodes of a {' or '.join(ORDERED_BACKENDS)} rendezvous, and this "
                f"one is {backend}; expected it only with --rdzv-backend {' or '.join(ORDERED_BACKENDS)}"
            )
        return Step(Ranks(order, None, f"{ORDER_KEY} from {user.rdzv_conf.source}, then torch's address order"))
    if backend == "static":
        return Step(Ranks(None, node, "static rendezvous: the node rank"))
    if backend not in ORDERED_BACKENDS:
        return Step(Ranks(None, None, f"{backend} rendezvous: the order in which nodes join"))
    if node is None:
        return Step(Ranks(None, None, "torch's c10d order: the nodes' addresses, sorted as text"),
                    ("group ranks follow the nodes' addresses sorted as text (torch's c10d order): "
                     "no scheduler index is known here",))
    if topology.domains:
        path = ".".join(topology.domains)
        return Step(Ranks(domain_order(topology.domains, node), None,
                          f"topology first (domain {path} from {topology.source}), then node index: "
                          "the nodes of one domain take contiguous ranks"))
    if nnodes.lo != nnodes.hi:
        return Step(Ranks((node,), None, "node index order among the nodes of each round"))
    return Step(Ranks((node,), node, "node index (torchpod.torchrun orders c10d by it)"))


def decide_conf(env: Mapping[str, str], det: Detection, user: UserOptions, backend: str,
                node: int | None, order: tuple[int, ...] | None = None,
                nodes: int = 1) -> Step[tuple[tuple[str, str], ...]]:
    """Detection's config, is_host from the node index, the node order, the join timeout of a
    rendezvous of up to ``nodes`` nodes (torchpod.rendezvous), TORCHPOD_RDZV_TIMEOUT, then
    the user's."""
    conf = dict(det.rdzv_conf)
    notes: list[str] = []
    if backend == "c10d" and node is not None:
        conf["is_host"] = "true" if node == 0 else "false"
    if order is not None:
        conf[ORDER_KEY] = order_text(order)
    timeouts = rendezvous.settings(nodes) if backend in rendezvous.DYNAMIC_BACKENDS else None
    for key, value in timeouts.conf.items() if timeouts is not None else ():
        conf.setdefault(key, value)
    seconds = number(env, ENV_RDZV_TIMEOUT)
    if seconds is not None:
        conf["timeout" if backend in ("static", "etcd") else "join_timeout"] = str(seconds)
    if user.rdzv_conf is not None:
        given = dict(user.rdzv_conf.value)
        if "is_host" in given and conf.get("is_host") not in (None, given["is_host"]):
            notes.append(f"{user.rdzv_conf.source} sets is_host={given['is_host']} over the node index")
        conf.update(given)
    if timeouts is not None and timeouts.conf and timeouts.in_effect(conf):
        notes.append(f"rendezvous timeout for up to {plural(timeouts.nodes, 'node')}: {timeouts.why}")
    if backend == "c10d" and "is_host" not in conf:
        notes.append("c10d store host unknown: torch decides by matching the endpoint to this hostname")
    return Step(tuple(conf.items()), tuple(notes))


def decide_restarts(det: Detection, user: UserOptions) -> Step[int]:
    if user.max_restarts is not None:
        return Step(user.max_restarts.value, _override(user.max_restarts, det, "max_restarts", det.max_restarts))
    return Step(det.max_restarts or 0)


def decide_nproc(env: Mapping[str, str], det: Detection, user: UserOptions, facts: Facts) -> Step[str]:
    if user.nproc_per_node is not None:
        return Step(user.nproc_per_node.value,
                    (f"nproc_per_node {user.nproc_per_node.value} from {user.nproc_per_node.source}",))
    if det.nproc_per_node is not None:
        return Step(det.nproc_per_node)
    nproc, why = default_nproc(env, facts.gpu_count)
    return Step(nproc, (f"nproc_per_node {nproc}: {why}",))


def decide_signals(user: UserOptions, facts: Facts) -> Step[tuple[str, ...] | None]:
    """What torchrun's --signals-to-handle gets; None when this torch's torchrun lacks it."""
    if user.signals_to_handle is not None:
        return Step(user.signals_to_handle.value)  # the user's own, old torch or not
    if facts.torchrun_signals:
        return Step(FORWARDED_NAMES)
    return Step(None, (
        "this torch's torchrun has no --signals-to-handle (torch < 2.10): it passes only "
        f"{','.join(TERMINATING_NAMES)} to workers; torchpod ignores SIGUSR1/SIGUSR2 rather "
        "than let them kill torchrun",
    ))


def decide_env(env: Mapping[str, str], facts: Facts, backend: str, max_restarts: int
               ) -> Step[tuple[tuple[str, str], ...]]:
    """Variables added to torchrun's environment; a variable the user set is never changed."""
    fabric = detect_fabric(env, facts.sysfs_root, facts.root / "proc", facts.root)
    suggested = list(fabric.env)
    notes = list(fabric.notes)
    if max_restarts > 0 and backend == "c10d":
        # torch >= 2.4 shares the rendezvous TCPStore with the workers and publishes rank 0's
        # MASTER_ADDR only in the first round (dynamic_rendezvous.py, next_rendezvous caches
        # _bootstrap_store_info). A node whose agent restarts fresh (its pod/container was
        # replaced) then waits for that key in the new round until read_timeout, and the
        # group never re-forms. The opt-out republishes it every round.
        suggested.append(("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1"))
        notes.append("max_restarts > 0: TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 so a replaced node can rejoin")
    # every worker's stacks on demand (torchpod.stacks): the shim's sitecustomize first on its path
    shim = str(SHIM_DIR)
    if (env.get("PYTHONPATH") or "").split(":")[0] != shim:
        suggested.append(("PYTHONPATH", shim + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")))
        notes.append("workers dump their Python stacks when `torchpod stacks` asks: torchpod's "
                     "sitecustomize first on PYTHONPATH, then the image's own")

    # the hang watch (torchpod.watch): its window for the workers' watch threads, and torch's
    # flight recorder armed, where the job set neither
    stall = setting(env, ENV_STALL_WINDOW) or ENV_STALL_WINDOW.default or "off"
    if stall != "off":
        suggested += [(ENV_STALL_WINDOW.name, stall), ("TORCH_FR_BUFFER_SIZE", FR_BUFFER_SIZE)]
        notes.append(f"hang watch: a rank that keeps the others waiting {stall} s is named and the job ends "
                     f"(exit {EXIT_HANG}); torch's flight recorder keeps the last {FR_BUFFER_SIZE} collectives")

    def extends(k: str, v: str) -> bool:  # a prepend to the user's search path keeps their value
        return (k in PREPENDS and (not env.get(k) or v.endswith(":" + env[k]))) or k in REPLACES

    kept = [k for k, v in suggested if k in env and not extends(k, v)]
    if kept:
        notes.append(f"kept user-set {', '.join(kept)} over the fabric's suggestion")
    # HOME and TMPDIR only when the current ones cannot be written: they replace them (plan.REPLACES)
    places, place_notes = home.decide(env, facts.home_writable, facts.tmp_writable, facts.writable_tmp, facts.uid)
    added = tuple((k, v) for k, v in suggested if k not in env or extends(k, v))
    return Step(added + places, tuple(notes) + place_notes)


def resolve(env: Mapping[str, str], facts: Facts, inv: Invocation) -> LaunchPlan:
    schedulers.refuse_torchrun_worker(env)  # before any option or variable is read
    user = read_user_options(env, inv)
    steps: list[Step] = []

    def take(step: Step[T]) -> T:
        steps.append(step)
        return step.value

    det = take(detect(env, facts, user))
    nnodes = take(decide_nnodes(env, det, user))
    place = take(decide_node(det, user, nnodes))
    backend = take(decide_backend(det, user))
    if backend == "static" and place.node_rank is None:
        raise InputError(
            "the static rendezvous backend needs this node's rank and none was found; "
            "expected --node-rank N (or PET_NODE_RANK); use c10d to let nodes pick ranks"
        )
    rdzv = take(decide_endpoint(det, user, nnodes, backend))
    local_addr = take(decide_local_addr(det, user, place, rdzv))
    rdzv_id = take(decide_rdzv_id(det, user, rdzv.endpoint))
    topology = take(decide_topology(det, facts))
    ranks = take(decide_ranks(user, backend, nnodes, place.node_rank, topology))
    conf = take(decide_conf(env, det, user, backend, place.node_rank, ranks.order, nnodes.hi))
    max_restarts = take(decide_restarts(det, user))
    nproc = take(decide_nproc(env, det, user, facts))
    signals = take(decide_signals(user, facts))
    added = take(decide_env(env, facts, backend, max_restarts))
    if place.node_rank is not None and ranks.group_rank != place.node_rank:
        # torch's GROUP_RANK will not be the node the plan names (a topology order): the
        # workers get that number too, to name nodes as the plan does (torchpod.preflight)
        added += ((ENV_NODE_RANK, str(place.node_rank)),)
    return LaunchPlan(
        scheduler=det.scheduler,
        nnodes=nnodes,
        node_rank=place.node_rank,
        group_rank=ranks.group_rank,
        rank_order=ranks.how,
        domains=topology.domains,
        nproc_per_node=nproc,
        rdzv_backend=backend,
        rdzv_endpoint=rdzv.endpoint,
        rdzv_id=rdzv_id,
        rdzv_conf=conf,
        local_addr=local_addr,
        max_restarts=max_restarts,
        signals_to_handle=signals,
        passthrough=inv.passthrough,
        env=added,
        notes=facts.notes + tuple(n for s in steps for n in s.notes),
        hosts=det.hosts,
        hostname=facts.hostname,
        script=inv.script,
        script_args=inv.script_args,
    )
