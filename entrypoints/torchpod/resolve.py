"""Turn (environment, facts, command line) into a LaunchPlan. Pure: no I/O besides the
files the environment names (PBS_NODEFILE, /etc/volcano under ``facts.root``, sysfs
under ``facts.sysfs_root``); never reads ``os.environ``.

Precedence for every field: torchrun flag on the command line > PET_<FIELD> variable
(torchrun's own environment spelling) > the scheduler's answer > default.
"""

from __future__ import annotations

import re
from typing import Mapping

from . import schedulers
from .errors import InputError
from .fabric import detect_fabric
from .gpus import default_nproc
from .plan import DEFAULT_SIGNALS, TORCHRUN_BUILTIN_SIGNALS, LaunchPlan
from .schedulers import explicit, standalone
from .schedulers.common import (
    LOOPBACK,
    LOOPBACK_ENDPOINT,
    Facts,
    check_host,
    endpoint,
    get,
    parse_int,
    split_endpoint,
    stable_id,
)
from .torchrun_flags import RESOLVED_OPTIONS, Invocation

NPROC_WORDS = ("auto", "cpu", "gpu", "xpu")


def user_options(env: Mapping[str, str], inv: Invocation) -> dict[str, tuple[str, str]]:
    """dest -> (value, where it came from), flags over PET_* variables."""
    out: dict[str, tuple[str, str]] = {}
    for dest in RESOLVED_OPTIONS:
        if dest in inv.options:
            flag = f"--{dest.replace('_', '-')}"
            if inv.options[dest].strip() == "":
                raise InputError(f"{flag} is empty; expected a value, e.g. {flag}=VALUE")
            out[dest] = (inv.options[dest].strip(), flag)
        else:
            name = f"PET_{dest.upper()}"
            found = get(env, name)
            if found is not None:
                out[dest] = (found[1], name)
    return out


def parse_nnodes(source: str, value: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*(?::\s*(\d+)\s*)?", value)
    if not m:
        raise InputError(
            f"{source}={value!r} is not a node count; expected N or MIN:MAX (e.g. 2 or 1:4)"
        )
    lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
    if not 0 < lo <= hi:
        raise InputError(
            f"{source}={value!r} is not a node count; expected 0 < MIN <= MAX (e.g. 2 or 1:4)"
        )
    return lo, hi


def parse_conf(source: str, value: str) -> dict[str, str]:
    conf: dict[str, str] = {}
    for item in value.split(","):
        if not item.strip():
            continue
        key, eq, val = item.partition("=")
        if not key.strip() or not eq or not val.strip():
            raise InputError(
                f"{source}={value!r} is not a rendezvous config; expected key=value,... "
                "(e.g. join_timeout=900,is_host=true)"
            )
        conf[key.strip()] = val.strip()
    return conf


def _check_endpoint(source: str, value: str, *, need_port: bool) -> str:
    host, port = split_endpoint(value)
    check_host(source, host)
    if port is not None:
        number = parse_int(source, port, hint="expected HOST:PORT, e.g. node1:29400")
        if number > 65535:
            raise InputError(f"{source}={value!r} has port {port}; expected 0-65535")
    elif need_port:
        raise InputError(
            f"{source}={value!r} has no port; the static backend needs HOST:PORT; "
            "pass --rdzv-endpoint HOST:PORT or --master-port"
        )
    return endpoint(host, port) if port is not None else (f"[{host}]" if ":" in host else host)


def choose(env: Mapping[str, str], user: dict) -> tuple[object, bool]:
    """The scheduler module, and whether standalone was asked for explicitly."""
    forced = schedulers.forced(env)
    if "standalone" in user:
        if forced not in (None, standalone):
            raise InputError(
                f"--standalone conflicts with TORCHPOD_SCHEDULER={env['TORCHPOD_SCHEDULER']!r}; "
                "expected one of them; drop --standalone or unset TORCHPOD_SCHEDULER"
            )
        return standalone, True
    if forced is not None:
        return forced, forced is standalone
    module = schedulers.claimed(env)
    if module is not None:
        return module, False
    nnodes = user.get("nnodes")
    multi = nnodes is not None and parse_nnodes(nnodes[1], nnodes[0])[1] > 1
    if multi or any(k in user for k in ("rdzv_endpoint", "master_addr")):
        return explicit, False
    return standalone, False


def resolve(env: Mapping[str, str], facts: Facts, inv: Invocation) -> LaunchPlan:
    user = user_options(env, inv)
    module, asked = choose(env, user)
    det = (
        standalone.detect(env, facts, asked=asked)
        if module is standalone
        else module.detect(env, facts)
    )
    notes = [f"scheduler {det.scheduler}" + (" (TORCHPOD_SCHEDULER)" if schedulers.forced(env) else "")]
    notes += det.notes

    def took(dest: str, detected) -> None:
        value, source = user[dest]
        if detected is not None and str(detected) != value:
            notes.append(f"{source}={value} overrides {det.scheduler}'s {dest}={detected}")

    # nnodes
    nnodes = det.nnodes
    if "nnodes" in user:
        took("nnodes", det.nnodes if det.scheduler != "explicit" else None)
        nnodes = user["nnodes"][0]
    nsource = user["nnodes"][1] if "nnodes" in user else f"{det.scheduler} nnodes"
    lo, hi = parse_nnodes(nsource, nnodes)
    nnodes = f"{lo}:{hi}" if lo != hi else str(lo)
    if det.scheduler == "standalone" and hi > 1:
        raise InputError(
            f"{nsource}={nnodes!r} contradicts standalone (one node); expected 1; drop "
            "--standalone / TORCHPOD_SCHEDULER=standalone, or give a rendezvous endpoint"
        )
    if det.hosts is not None and (hi < len(det.hosts) or lo > len(det.hosts)):
        raise InputError(
            f"{nsource}={nnodes!r} does not fit the {len(det.hosts)} hosts {det.scheduler} "
            f"lists; expected {len(det.hosts)} (or MIN:MAX around it); drop the override or "
            "fix the allocation"
        )

    # node index
    node = det.node_rank
    local_addr = det.local_addr
    if "node_rank" in user:
        took("node_rank", det.node_rank)
        node = parse_int(user["node_rank"][1], user["node_rank"][0], hint="this node's index")
        if det.hosts is not None and node != det.node_rank:
            if node >= len(det.hosts):
                raise InputError(
                    f"{user['node_rank'][1]}={node} is outside the {len(det.hosts)} hosts "
                    f"{det.scheduler} lists; expected 0-{len(det.hosts) - 1}"
                )
            local_addr = det.hosts[node]
    if node is not None and node >= hi:
        raise InputError(
            f"node index {node} is outside nnodes={nnodes}; expected 0-{hi - 1}; check "
            "the rank variables and --nnodes"
        )

    # backend and endpoint
    backend = user["rdzv_backend"][0] if "rdzv_backend" in user else det.rdzv_backend or "c10d"
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", backend):
        raise InputError(
            f"{user['rdzv_backend'][1]}={backend!r} is not a rendezvous backend; expected "
            "c10d, etcd-v2, etcd or static"
        )
    static = backend == "static"
    ep, ep_source = det.rdzv_endpoint, f"{det.scheduler} rendezvous endpoint"
    if "rdzv_endpoint" in user:
        took("rdzv_endpoint", det.rdzv_endpoint)
        ep, ep_source = user["rdzv_endpoint"][0], user["rdzv_endpoint"][1]
    elif "master_addr" in user or "master_port" in user:
        host = user["master_addr"][0] if "master_addr" in user else None
        port = user["master_port"][0] if "master_port" in user else None
        old_host, old_port = split_endpoint(ep) if ep else (None, None)
        host = host or old_host
        port = port or old_port or "29500"  # torchrun's own --master-port default
        if host is None:
            raise InputError(
                f"{user['master_port'][1]} given without a master address; expected "
                "--master-addr HOST too (or --rdzv-endpoint HOST:PORT)"
            )
        check_host("--master-addr", host)
        ep, ep_source = endpoint(host, port), "--master-addr/--master-port"
        notes.append(f"rendezvous endpoint {ep} from {ep_source}")
    if ep is None:
        if hi > 1:
            raise InputError(
                f"nnodes={nnodes} needs a rendezvous endpoint and none was found; expected "
                "HOST:PORT of the first node; "
                + (det.endpoint_hint or "pass --rdzv-endpoint HOST:PORT")
            )
        ep, ep_source = LOOPBACK_ENDPOINT, "single node"
        if local_addr is None and "local_addr" not in user:
            local_addr = LOOPBACK
    ep = _check_endpoint(ep_source, ep, need_port=static)
    if static and node is None:
        raise InputError(
            "the static rendezvous backend needs this node's rank and none was found; "
            "expected --node-rank N (or PET_NODE_RANK); use c10d to let nodes pick ranks"
        )

    # rendezvous id
    rdzv_id = det.rdzv_id or stable_id("torchpod", ep)
    if "rdzv_id" in user:
        if user["rdzv_id"][0].strip().lower() == "none":
            notes.append(f"{user['rdzv_id'][1]}=none ignored: using {rdzv_id}, stable per job")
        else:
            took("rdzv_id", det.rdzv_id)
            rdzv_id = user["rdzv_id"][0]

    # rendezvous config: detection's, is_host from the node index, timeout, then the user's
    conf = dict(det.rdzv_conf)
    if backend == "c10d" and node is not None:
        conf["is_host"] = "true" if node == 0 else "false"
    timeout = get(env, "TORCHPOD_RDZV_TIMEOUT")
    if timeout is not None:
        seconds = parse_int(*timeout, minimum=1, hint="seconds to wait for all nodes")
        conf["timeout" if backend in ("static", "etcd") else "join_timeout"] = str(seconds)
    if "rdzv_conf" in user:
        given = parse_conf(user["rdzv_conf"][1], user["rdzv_conf"][0])
        if "is_host" in given and conf.get("is_host") not in (None, given["is_host"]):
            notes.append(f"{user['rdzv_conf'][1]} sets is_host={given['is_host']} over the node index")
        conf.update(given)
    if backend == "c10d" and "is_host" not in conf:
        notes.append("c10d store host unknown: torch decides by matching the endpoint to this hostname")

    if "local_addr" in user:
        took("local_addr", local_addr)
        local_addr = user["local_addr"][0]
    if local_addr is not None:
        check_host("local_addr", local_addr)

    max_restarts = det.max_restarts or 0
    if "max_restarts" in user:
        max_restarts = parse_int(user["max_restarts"][1], user["max_restarts"][0], hint="e.g. 3")

    # processes per node
    if "nproc_per_node" in user:
        nproc, source = user["nproc_per_node"]
        notes.append(f"nproc_per_node {nproc} from {source}")
    elif det.nproc_per_node is not None:
        nproc, source = det.nproc_per_node, f"{det.scheduler}"
    else:
        nproc, why = default_nproc(env, facts.gpu_count)
        source = "nproc_per_node"
        notes.append(f"nproc_per_node {nproc}: {why}")
    if nproc not in NPROC_WORDS:
        nproc = str(parse_int(source, nproc, minimum=1, hint="or one of " + ", ".join(NPROC_WORDS)))

    if "signals_to_handle" in user:
        signals = user["signals_to_handle"][0]
    elif facts.torchrun_signals:
        signals = DEFAULT_SIGNALS
    else:
        signals = None
        notes.append(
            "this torch's torchrun has no --signals-to-handle (torch < 2.10): it passes only "
            f"{TORCHRUN_BUILTIN_SIGNALS} to workers; torchpod ignores SIGUSR1/SIGUSR2 rather "
            "than let them kill torchrun"
        )

    fabric = detect_fabric(env, facts.sysfs_root)
    suggested = list(fabric.env)
    if max_restarts > 0 and backend == "c10d":
        # torch >= 2.4 shares the rendezvous TCPStore with the workers and publishes rank 0's
        # MASTER_ADDR only in the first round (dynamic_rendezvous.py, next_rendezvous caches
        # _bootstrap_store_info). A node whose agent restarts fresh (its pod/container was
        # replaced) then waits for that key in the new round until read_timeout, and the
        # group never re-forms. The opt-out republishes it every round.
        suggested.append(("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1"))
        notes.append("max_restarts > 0: TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 so a replaced node can rejoin")
    added = tuple((k, v) for k, v in suggested if k not in env)
    kept = [k for k, _ in suggested if k in env]
    notes += list(fabric.notes)
    if kept:
        notes.append(f"kept user-set {', '.join(kept)} over the fabric's suggestion")

    return LaunchPlan(
        scheduler=det.scheduler,
        nnodes=nnodes,
        node_rank=node,
        nproc_per_node=nproc,
        rdzv_backend=backend,
        rdzv_endpoint=ep,
        rdzv_id=rdzv_id,
        rdzv_conf=tuple(conf.items()),
        local_addr=local_addr,
        max_restarts=max_restarts,
        signals_to_handle=signals,
        passthrough=inv.passthrough,
        env=added,
        notes=tuple(notes),
        hosts=det.hosts,
        hostname=facts.hostname,
        script=inv.script,
        script_args=inv.script_args,
    )
