"""Volcano Job (batch.volcano.sh/v1alpha1) with the env and svc job plugins.

Upstream (volcano-sh/volcano, pkg/controllers/job/plugins/): the env plugin sets
VC_TASK_INDEX (and the older VK_TASK_INDEX), the pod's index within its task; the svc
plugin sets, for every task, VC_<TASK>_HOSTS (comma-separated ``<job>-<task>-<i>.<job>``)
and VC_<TASK>_NUM, with the task name upper-cased and ``-`` turned into ``_``, and
mounts the same lists one per line as /etc/volcano/<task>.host. The pytorch plugin
(distributed-framework/pytorch/pytorch.go) adds MASTER_ADDR (master pod 0),
MASTER_PORT (contract.PYTORCHJOB_PORT unless configured), WORLD_SIZE (master + worker pods) and RANK
(master 0, worker i -> i + 1).

The pytorch plugin alone (``plugins: {pytorch: [...]}``, Volcano's own example in
docs/user-guide/how_to_use_pytorch_plugin.md): the admission webhook adds the svc plugin
(pkg/webhooks/admission/jobs/mutate/mutate_job.go, patchDefaultPlugins) but not env, so
the pod has the host lists and no VC_TASK_INDEX; its node index is then RANK (master pod 0
is node 0, worker i node i + 1), the count WORLD_SIZE (checked against the master and
worker hosts) and the endpoint MASTER_ADDR:MASTER_PORT (``<job>-master-0.<job>``, port
23456 unless --port). RANK and WORLD_SIZE count pods here (one container each), not
processes. Read at volcano-sh/volcano ed72c7c8.

Tasks (``plan_order``): a job of one task is planned over that task's pods; a job of several
tasks only when they are exactly master and worker, the pytorch plugin's pair, in its RANK
order (master pod 0 is node 0, worker i node i + 1). Any other set of tasks, such as
Volcano's own TensorFlow example (example/integrations/tensorflow/dist-mnist: a `ps` task
and a `worker` task with the env and svc plugins), is refused in one line that names the
tasks and says how to run them. Every pod gives the same answer, since it is decided from
the host lists alone, which the svc plugin hands every pod alike. Planning all the tasks as
one group would make a parameter server or helper pod that never starts torchpod a node
every launcher waits for; keeping only master and worker would let the other pods, when
they do start torchpod, take a worker's place (the ps pod, VC_TASK_INDEX=0, as worker 0).
The pytorch plugin's renamed tasks (`--master=`/`--worker=`) are refused by the same rule.

This pod's task: its POD_NAME, else its hostname, in exactly one task's list (a name in two
lists is refused). Under hostNetwork the pod carries the node's hostname (OCI OKE's RDMA
recipe runs pods that way) and is in no list: its node is then the pytorch plugin's RANK,
else the one task's VC_TASK_INDEX; with several tasks and no RANK it is refused.
"""

from __future__ import annotations

import re
from pathlib import Path

from .. import readers
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
    digest,
    get,
    master_endpoint,
    parse_int,
    parse_port,
    rdzv_port,
    short,
    stable_id,
)

NAME = "volcano"
STRONG = True
# VC_<TASK>_HOSTS too, whatever the task is called (claims() matches the pattern).
MARKERS = ("VC_TASK_INDEX", "VK_TASK_INDEX")

_HOSTS_RE = re.compile(r"^VC_(.+)_HOSTS$")


def claims(env: Env, user: UserOptions) -> bool:
    return get(env, *MARKERS) is not None or any(_HOSTS_RE.match(k) for k in env)


HOSTFILE_EXPECTED = "the Volcano svc plugin's host list, one pod host name per line"


def _checked(source: str, names) -> tuple[str, ...]:
    return tuple(check_host(source, h) for h in names)


def read_hostfile(path: Path) -> tuple[str, ...]:
    """The hosts of one /etc/volcano/<task>.host file, through the bounded reader."""
    what = f"Volcano host file {str(path)!r}"
    text = readers.read_text(path, what=what, expected=HOSTFILE_EXPECTED, cap=readers.NODE_FILE_CAP)
    lines = [(n, line.strip()) for n, line in enumerate(text.split("\n"), 1)]
    return tuple(check_host(f"{what} line {n}", line) for n, line in lines if line)


def task_hosts(env: Env, facts: Facts) -> tuple[dict[str, tuple[str, ...]], str]:
    """Task key -> host list, from VC_<TASK>_HOSTS or else /etc/volcano/<task>.host."""
    tasks: dict[str, tuple[str, ...]] = {}
    for key, value in env.items():
        m = _HOSTS_RE.match(key)
        if m:
            hosts = _checked(key, (h.strip() for h in value.split(",") if h.strip()))
            if not hosts:
                raise InputError(
                    f"{key}={value!r} is empty; expected comma-separated pod host names; "
                    "check the Volcano svc plugin"
                )
            num = get(env, f"VC_{m.group(1)}_NUM")
            if num is not None and parse_int(*num) != len(hosts):
                raise InputError(
                    f"{num[0]}={num[1]!r} does not match the {plural(len(hosts), 'host')} in {key}; "
                    "expected equal counts; were these set by the same Volcano job?"
                )
            tasks[m.group(1)] = hosts
    if tasks:
        return tasks, "VC_<TASK>_HOSTS"
    folder = facts.root / "etc" / "volcano"
    try:
        entries = sorted(folder.glob("*.host")) if folder.is_dir() else []
    except OSError as exc:
        raise readers.Unreadable(f"{str(folder)!r} cannot be listed ({exc.strerror or exc}); "
                                 f"expected a folder of {HOSTFILE_EXPECTED}s", exc.errno) from None
    for path in entries:
        hosts = read_hostfile(path)
        if hosts:
            tasks[path.stem.upper().replace("-", "_")] = hosts
    return tasks, f"{folder}/*.host"


PYTORCH_TASKS = ("MASTER", "WORKER")  # the pytorch plugin's two tasks, in its RANK order


def plan_order(tasks: dict[str, tuple[str, ...]], source: str) -> list[str]:
    """The tasks planned, in node order: one task, or master then worker; any other set of
    tasks is refused from the host lists alone, so every pod of the job refuses alike."""
    if len(tasks) == 1:
        return list(tasks)
    if set(tasks) == set(PYTORCH_TASKS):
        return list(PYTORCH_TASKS)
    found = ", ".join(f"{t} ({plural(len(tasks[t]), 'pod')})" for t in sorted(tasks))
    raise InputError(
        f"{source} names the tasks {found}; expected one task, or the two tasks master and worker "
        "(the pytorch plugin's, planned master first), since torchpod cannot tell which other "
        "tasks start it; run the training as one task, or as tasks master and worker with "
        "`plugins: {pytorch: [], svc: []}`, and give any other task a Job of its own"
    )


def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    index_var = get(env, "VC_TASK_INDEX", "VK_TASK_INDEX")
    tasks, source = task_hosts(env, facts)
    notes: list[str] = []
    if not tasks:
        raise InputError(
            (f"{index_var[0]}={index_var[1]!r} is set but no " if index_var else "a Volcano job has no ")
            + "VC_<TASK>_HOSTS variables or /etc/volcano/*.host files; expected the "
            "Volcano svc plugin's host lists; add `plugins: {env: [], svc: []}` to the Job"
        )
    order = plan_order(tasks, source)
    offsets: dict[str, int] = {}
    hosts: list[str] = []
    for task in order:
        offsets[task] = len(hosts)
        hosts.extend(tasks[task])
    hosts_t = tuple(hosts)

    node, note = _node(env, facts, tasks, order, offsets, source)
    notes.append(note)

    port, port_notes = rdzv_port(env)
    master = get(env, "MASTER_ADDR")
    master_port = get(env, "MASTER_PORT")
    if master is not None and master_port is not None:
        # The pytorch plugin opened MASTER_PORT on every container; reuse it, on the first
        # listed host (the master task's pod 0: the plugin's MASTER_ADDR).
        port = parse_port(*master_port)
        notes.append(f"port {port} from MASTER_PORT (Volcano pytorch plugin)")
        port_notes = ()
    endpoint = Endpoint(hosts_t[0], port)
    if index_var is None:  # the pytorch plugin alone: its master address, as its pods use it
        endpoint, ep_notes = master_endpoint(env, ("MASTER_ADDR",), ("MASTER_PORT",))  # type: ignore[misc]  # _node checked
        notes.extend(ep_notes)
        port_notes = ()
    world = get(env, "WORLD_SIZE")
    if world is not None and world[1] != str(len(hosts_t)):
        notes.append(
            f"WORLD_SIZE={world[1]} differs from the {plural(len(hosts_t), 'host')} listed; using the host lists"
        )
    job = hosts_t[0].split(".", 1)[1] if "." in hosts_t[0] else short(hosts_t[0])
    return Detection(
        scheduler=NAME,
        nnodes=NodeCount.exactly(len(hosts_t)),
        node_rank=node,
        rdzv_endpoint=endpoint,
        rdzv_id=stable_id("volcano", job, digest(",".join(hosts_t))),
        hosts=hosts_t,
        local_addr=hosts_t[node],
        notes=tuple(notes) + port_notes,
    )


def _node(env: Env, facts: Facts, tasks, order, offsets, source: str) -> tuple[int, str]:
    """This pod's node index among every task's hosts, and a note on how it was found: its
    own task (by name) and VC_TASK_INDEX, else the pytorch plugin's RANK."""
    index_var = get(env, "VC_TASK_INDEX", "VK_TASK_INDEX")
    total = sum(len(tasks[t]) for t in order)
    mine = _own_task(env, facts, tasks, order)
    rank_var = get(env, "RANK")
    if index_var is None:
        node, note = _pytorch_plugin_node(env, order, total)
        if mine is not None:  # this pod's own host name says where it stands: RANK must agree
            names = {short(n).lower() for n in (facts.hostname, (get(env, "POD_NAME") or ("", ""))[1]) if n}
            listed = [offsets[mine] + i for i, h in enumerate(tasks[mine]) if short(h).lower() in names]
            if listed and node not in listed:
                raise InputError(
                    f"RANK={node} but this pod is {tasks[mine][listed[0] - offsets[mine]]!r}, node "
                    f"{listed[0]} (master pod 0 first, worker i at i + 1); expected RANK={listed[0]}; "
                    "were the variables copied from another pod?"
                )
        return node, note
    task_index = parse_int(*index_var, hint="Volcano's env plugin sets it to the pod's index")
    if mine is not None:
        if task_index >= len(tasks[mine]):
            raise InputError(
                f"{index_var[0]}={index_var[1]!r} is outside VC_{mine}_HOSTS "
                f"({plural(len(tasks[mine]), 'host')}); expected 0-{len(tasks[mine]) - 1}; "
                "were the variables copied from another pod?"
            )
        node = offsets[mine] + task_index
        note = f"task {mine} index {task_index} -> node {node} of {total} ({source})"
    elif rank_var is not None:
        node = parse_int("RANK", rank_var[1], hint="the Volcano pytorch plugin sets the pod rank")
        note = f"node {node} from RANK (Volcano pytorch plugin)"
    else:
        raise InputError(
            f"cannot tell which Volcano task this pod belongs to: hostname "
            f"{facts.hostname!r} is not in {', '.join('VC_%s_HOSTS' % t for t in order)}; "
            "expected a pod of this job; under hostNetwork expose the pod name as POD_NAME "
            "(fieldRef metadata.name)"
        )
    if node >= total:
        raise InputError(
            f"node index {node} (from {index_var[0]}={index_var[1]!r}) is outside the "
            f"{plural(total, 'host')} of tasks {', '.join(order)}; expected 0-{total - 1}"
        )
    return node, note


def _pytorch_plugin_node(env: Env, order, total: int) -> tuple[int, str]:
    """The node index the pytorch plugin alone gives (no env plugin, so no VC_TASK_INDEX):
    its RANK, master pod 0 first, worker i -> i + 1 (pytorch.go OnPodCreate), counted
    against its WORLD_SIZE (master + worker replicas, getTotalReplicas) and the svc
    plugin's host lists, which the admission webhook forces on beside it
    (pkg/webhooks/admission/jobs/mutate/mutate_job.go, patchDefaultPlugins)."""
    rank_var, world = get(env, "RANK"), get(env, "WORLD_SIZE")
    if rank_var is None or world is None or get(env, "MASTER_ADDR") is None:
        raise InputError(
            "VC_TASK_INDEX is not set; expected this pod's index within its task (0, 1, ...), or "
            "the pytorch plugin's RANK, WORLD_SIZE and MASTER_ADDR; add the env plugin: "
            "`plugins: {env: [], svc: []}`"
        )
    hint = "the Volcano pytorch plugin sets it"
    node = parse_int("RANK", rank_var[1], hint=hint)
    pods = parse_int("WORLD_SIZE", world[1], minimum=1, hint=hint)
    if pods != total:
        raise InputError(
            f"WORLD_SIZE={world[1]!r} differs from the {plural(total, 'host')} of tasks {', '.join(order)}; expected "
            "equal counts (the pytorch plugin counts its master and worker tasks); name the tasks "
            "master and worker, or add the env plugin: `plugins: {env: [], svc: []}`"
        )
    if node >= total:
        raise InputError(
            f"RANK={rank_var[1]!r} is outside WORLD_SIZE={pods}; expected 0-{total - 1} (the pytorch "
            "plugin's pod rank); were the variables copied from another pod?"
        )
    return node, (f"node {node} of {total} from RANK (Volcano pytorch plugin, no env plugin: "
                  "master pod 0 is node 0, worker i is node i + 1)")


def _own_task(env: Env, facts: Facts, tasks, order) -> str | None:
    names = [facts.hostname]
    pod = get(env, "POD_NAME")
    if pod:
        names.insert(0, pod[1])
    for name in names:
        wanted = short(name).lower()
        found = [task for task in order if any(short(h).lower() == wanted for h in tasks[task])]
        if len(found) > 1:  # one name in two tasks (hostNetwork pods share the node's name)
            raise InputError(
                f"{name!r} is listed in {' and '.join('VC_%s_HOSTS' % t for t in found)}; expected this "
                "pod's name in one task; expose the pod name as POD_NAME (fieldRef metadata.name)"
            )
        if found:
            return found[0]
    if len(order) == 1:
        return order[0]
    return None

