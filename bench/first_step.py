"""From `kubectl apply` (or `sbatch`) to the first training step, on the real control plane
and the real Slurm cluster, part by part.

    python bench/first_step.py [--kinds kubeflow,jobset,volcano,slurm] [--nodes 2,4,8] [--repeats 3] [--add]

For each kind, one control plane (torchpod_toolkit.kube.plane) with the kubelet stand-in's
nodes and the kind's real operator, as `invoke demo --kube` starts them. On it, the job
`invoke manifests --scheduler KIND` renders (examples/ddp_resnet.py, one step, gloo on CPU)
is applied as written ``--repeats`` times at each node count, each in a namespace of its
own, and followed to its success. Every job's time from just before `kubectl apply` to the
last rank's first optimizer step is cut at the moment the *last* node passed each mark
(a job waits for its slowest node):

- ``bound``: the last pod's Scheduled event (the scheduler's, its eventTime to the
  microsecond; the PodScheduled condition's second when a scheduler writes no event);
- ``started``: the last training container's start (Docker's State.StartedAt: the stand-in
  creates and starts the pod's containers; the image is on the machine, nothing is pulled);
- ``worker``: the last worker process's first line (``t_start``): the launcher read the pod
  and the fabric, torchrun's agent ran the c10d rendezvous and spawned the worker;
- ``imported``: torch and torchvision imported in the worker (``t_imported``);
- ``group``: init_process_group returned (``t_init``);
- ``all-reduce``: the first collective done (``t_first_allreduce``);
- ``step``: the first optimizer step done (``t_first_step``).

Two arms run side by side, alternating job by job on the same plane: ``now``, the kubelet
stand-in as it is, and ``dockershim-names``, its sandboxes named as the dockershim names
them (``k8s_POD_<pod>_<namespace>_<uid>_<attempt>``, over one DNS label, which Docker's
DNS cannot answer a reverse lookup for: torchpod_toolkit.kube.podargs.sandbox_name says
why), the stand-in before that was found to be the largest part.

``slurm``: the Slurm cluster in containers (torchpod_toolkit.cluster.slurm, real slurmctld,
slurmd and srun) with as many nodes, the script `invoke manifests --scheduler slurm
--runtime none` writes submitted by `sbatch`; Slurm binds and starts a job at once, so its
``bound`` and ``started`` are both the job's StartTime (whole seconds).

The containers share this host's clock, so the workers' stamps and Docker's and the
scheduler's times are comparable. ``--add`` measures some kinds into an existing result
(each kind's date, duration and load average are kept beside its figures: two cores,
shared). Each part is reported as the median of the repeats in seconds and as its share of
the median whole. Writes bench/results/first_step.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))
sys.path.insert(0, str(ROOT / "toolkit"))

from _options import MOST_CONTAINERS, node_counts, whole_number  # noqa: E402  (bench/ is on sys.path: run by path)

from torchpod import readers  # noqa: E402
from torchpod.errors import InputError  # noqa: E402
from torchpod_toolkit.cluster import slurm  # noqa: E402
from torchpod_toolkit.cluster.runner import EXAMPLES, parse_results  # noqa: E402
from torchpod_toolkit.imagebuild.definitions import DEFAULT_IMAGE, load_definitions  # noqa: E402
from torchpod_toolkit.kube import build, demo, operators, planestart, podargs  # noqa: E402
from torchpod_toolkit.kube import kubelet as kubelet_mod  # noqa: E402
from torchpod_toolkit.manifests import jobs, podsecurity  # noqa: E402
from torchpod_toolkit.manifests.render import render  # noqa: E402
from torchpod_toolkit.manifests.spec import JobSpec  # noqa: E402

COMMAND = (f"{EXAMPLES}/ddp_resnet.py", "--steps", "1")
MARKS = ("bound", "started", "worker", "imported", "group", "all-reduce", "step")
STAMPS = {"worker": "t_start", "imported": "t_imported", "group": "t_init", "all-reduce": "t_first_allreduce",
          "step": "t_first_step"}
WAIT = 600.0  # seconds one job has to succeed


def _dockershim_sandbox(uid: str) -> str:
    """A sandbox name of the dockershim's form, ``k8s_POD_<pod>_<namespace>_<uid>_<attempt>``,
    over one DNS label as the dockershim's name of every pod of this bench's jobs is (the
    stand-in hands only the UID here: the pod and namespace words stand for any)."""
    return podargs.container_name("bench", "a-pod-of-this-job", uid, podargs.SANDBOX, 0)


ARMS = {"now": podargs.sandbox_name, "dockershim-names": _dockershim_sandbox}


def epoch(text: str) -> float:
    """An RFC 3339 time as Kubernetes and Docker write it (Docker: nanoseconds) as epoch seconds."""
    head, dot, frac = text.rstrip("Z").partition(".")
    whole = datetime.datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return whole.timestamp() + (float(f"0.{frac}") if dot and frac.isdigit() else 0.0)


def bound_times(kubectl: operators.Kubectl, namespace: str) -> dict[str, float]:
    """Each pod's binding: its Scheduled event's eventTime, else its PodScheduled condition."""
    found: dict[str, float] = {}
    for event in json.loads(kubectl("-n", namespace, "get", "events", "-o", "json"))["items"]:
        obj = event.get("involvedObject") or {}
        if event.get("reason") == "Scheduled" and obj.get("kind") == "Pod" and event.get("eventTime"):
            found[obj["name"]] = min(found.get(obj["name"], float("inf")), epoch(event["eventTime"]))
    for pod in json.loads(kubectl("-n", namespace, "get", "pods", "-o", "json"))["items"]:
        name = pod["metadata"]["name"]
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "True" and name not in found:
                found[name] = epoch(cond["lastTransitionTime"])
    return found


def started_times(client: Any, stand_in: kubelet_mod.Kubelet, namespace: str, logs: Path | None) -> dict[str, float]:
    """Each pod's training container's first start, from Docker (nanoseconds); with ``logs``,
    every container's log with Docker's time on each line is kept there."""
    found: dict[str, float] = {}
    for container in client.containers.list(all=True, filters={"label": [
            f"{kubelet_mod.LABEL}={stand_in.id}", f"io.kubernetes.pod.namespace={namespace}"]}):
        labels = container.labels
        if logs is not None:
            logs.mkdir(parents=True, exist_ok=True)
            (logs / f"{container.name}.log").write_bytes(container.logs(timestamps=True))
        if labels.get("io.kubernetes.container.name") in ("POD", podsecurity.PYTORCH_INIT_NAME):
            continue
        pod = labels.get("io.kubernetes.pod.name", "?")
        found[pod] = min(found.get(pod, float("inf")), epoch(container.attrs["State"]["StartedAt"]))
    return found


def one_job(ctx: dict[str, Any], kind: str, nodes: int, attempt: int, arm: str) -> dict[str, Any]:
    """One job applied and followed to success, its sandboxes named as ``arm`` names them; the
    epoch time of each mark, last node's."""
    name = f"fs-{kind.replace('-', '')}-{nodes}-{attempt}-{arm[0]}"
    spec = JobSpec(kind, nodes, ctx["image"], COMMAND, name=name, namespace=name, gpus_per_node=0)
    (out,) = [o for o in render(spec) if o.name.endswith(".yaml")]
    path = ctx["folder"] / out.name
    path.write_text(out.text)
    manifest = demo.read_manifest(path)
    kubectl = ctx["kubectl"]
    kubectl("create", "namespace", name)
    kubectl("label", "namespace", name, f"pod-security.kubernetes.io/enforce={manifest.level}")
    _service_account(kubectl, name)
    t_apply = time.time()
    podargs.sandbox_name = ARMS[arm]  # read by each PodWorker the stand-in makes for the job's pods
    try:
        kubectl("apply", "--server-side", "-f", str(path))
        ended = demo.follow(kubectl, manifest, WAIT, lambda _text: None)
    finally:
        podargs.sandbox_name = ARMS["now"]
    if ended != "succeeded":
        raise RuntimeError(f"{kind} job of {nodes} nodes: {ended}")
    results = [r for a in ctx["kubelet"].attempts(name) if a.code == 0 for r in parse_results(a.log)
               if r.get("workload") == "ddp_resnet"]
    if len(results) != nodes:
        raise RuntimeError(f"{kind} job of {nodes} nodes: {len(results)} ranks reported")
    times = {"apply": t_apply, "bound": max(bound_times(kubectl, name).values()),
             "started": max(started_times(ctx["client"], ctx["kubelet"], name,
                                          ctx["logs"] / name if ctx["logs"] else None).values())}
    times.update({mark: max(r[key] for r in results) for mark, key in STAMPS.items()})
    kubectl("delete", "namespace", name, "--wait=false")
    return times


def _service_account(kubectl: operators.Kubectl, namespace: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if kubectl("-n", namespace, "get", "serviceaccount", "--ignore-not-found", "-o", "name", "default").strip():
            return
        time.sleep(0.5)
    raise RuntimeError(f"namespace {namespace}: no default service account within 60 s")


def parts(times: dict[str, float]) -> dict[str, float]:
    """Seconds from one mark to the next (``apply`` first), and the whole."""
    order = ("apply", *MARKS)
    out = {f"{a}→{b}": round(times[b] - times[a], 3) for a, b in zip(order, order[1:])}
    out["whole"] = round(times["step"] - times["apply"], 3)
    return out


def run_kind(client: Any, kind: str, counts: list[int], repeats: int, image: str, arms: list[str],
             logs: Path | None = None) -> dict[str, Any]:
    """A plane with max(counts) nodes and the kind's operator; every job of the kind on it."""
    spec = JobSpec(kind, max(counts), image, COMMAND, name="probe", namespace="probe", gpus_per_node=0)
    with tempfile.TemporaryDirectory(prefix="torchpod-first-step-") as tmp:
        folder = Path(tmp)
        (out,) = [o for o in render(spec) if o.name.endswith(".yaml")]
        (folder / "probe.yaml").write_text(out.text)
        names = demo.read_manifest(folder / "probe.yaml").kind.operators
        base = build.plan_for(ROOT, os.environ)
        started = demo.Started(folder / "run")
        started.folder.mkdir()
        try:
            started.plane = planestart.start(base.bindir, started.folder / "plane")
            started.kubelet = kubelet_mod.Kubelet(started.plane, client, nodes=max(counts), prefix="node",
                                                  version=base.kubernetes).start()
            kubectl = operators.Kubectl(base.bindir / "kubectl", started.plane.kubeconfig)
            for name in names:
                started.running.append(operators.install(
                    operators.operator(name), build.operator_plan_for(ROOT, os.environ, name), kubectl,
                    started.plane, started.folder / f"operator-{name}", os.environ, init_image=image))
            ctx = {"client": client, "kubelet": started.kubelet, "kubectl": kubectl, "image": image,
                   "folder": folder, "logs": logs}
            runs: dict[str, dict[str, list[dict[str, float]]]] = {arm: {} for arm in arms}
            for nodes in counts:
                for attempt in range(repeats):
                    for arm in arms if attempt % 2 == 0 else arms[::-1]:  # alternating which goes first
                        times = parts(one_job(ctx, kind, nodes, attempt, arm))
                        runs[arm].setdefault(str(nodes), []).append(times)
                        print(f"  {kind} {nodes} nodes #{attempt + 1} {arm}: {times['whole']:.1f} s", flush=True)
            return runs
        finally:
            started.stop(client)


def slurm_job(cluster: slurm.SlurmCluster, kind: str, nodes: int, image: str) -> dict[str, float]:
    """One `sbatch` of the script `invoke manifests --scheduler KIND --runtime none` writes,
    followed to COMPLETED; the epoch time of each mark, last node's. Slurm binds and starts a
    job in one step: ``bound`` and ``started`` are both its StartTime (whole seconds, UTC as
    the nodes keep it)."""
    (script,) = render(JobSpec(kind, nodes, image, COMMAND, name="first", gpus_per_node=0, runtime="none",
                               walltime="00:10:00"))
    t_submit = time.time()
    jobid = cluster.submit(script.text, script.name)
    state = cluster.wait(jobid, WAIT)
    out = cluster.read(f"{slurm.SHARED}/first-{jobid}.out")
    results = [r for r in parse_results(out) if r.get("workload") == "ddp_resnet"]
    if state != "COMPLETED" or len(results) != nodes:
        raise RuntimeError(f"{kind} job of {nodes} nodes: {state}, {len(results)} ranks reported\n{out[-3000:]}")
    start = re.search(r"\bStartTime=(\S+)", cluster.show_job(jobid))
    if start is None:
        raise RuntimeError(f"slurm job {jobid}: scontrol shows no StartTime")
    times = {"apply": t_submit, "bound": epoch(start.group(1)), "started": epoch(start.group(1))}
    times.update({mark: max(r[key] for r in results) for mark, key in STAMPS.items()})
    return times


def run_slurm(client: Any, kind: str, counts: list[int], repeats: int, image: str) -> dict[str, Any]:
    """The real Slurm cluster in containers (torchpod_toolkit.cluster.slurm) with max(counts)
    nodes; every job of every size of ``kind`` (a batch kind whose system runs here for real)
    on it, ``sbatch`` to the first step."""
    runs: dict[str, list[dict[str, float]]] = {}
    labels = {"torchpod.bench": f"first-step-{os.urandom(3).hex()}"}
    env = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    with slurm.SlurmCluster(client, slurm.node_image(client, image), max(counts), labels, env=env) as cluster:
        cluster.start()
        for nodes in counts:
            for attempt in range(repeats):
                times = parts(slurm_job(cluster, kind, nodes, image))
                runs.setdefault(str(nodes), []).append(times)
                print(f"  {kind} {nodes} nodes #{attempt + 1}: {times['whole']:.1f} s", flush=True)
    return {"now": runs}


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(r[key] for r in runs), 2) for key in runs[0]}


def table(results: dict[str, dict[str, dict[str, list[dict[str, float]]]]]) -> list[str]:
    keys = [*(f"{a}→{b}" for a, b in zip(("apply", *MARKS), MARKS)), "whole"]
    rows = [("kind", "arm", "nodes", *keys)]
    for kind, by_arm in results.items():
        for arm, by_nodes in by_arm.items():
            for nodes, runs in by_nodes.items():
                med = medians(runs)
                whole = med["whole"] or 1.0
                rows.append((kind, arm, nodes, *(f"{med[k]:.1f}" + (
                    "" if k == "whole" else f" ({100 * med[k] / whole:.0f}%)") for k in keys)))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(c).rjust(w) for c, w in zip(r, widths)) for r in rows]


def largest(results: dict[str, dict[str, dict[str, list[dict[str, float]]]]]) -> dict[str, str]:
    """Per kind, arm and node count, the part with the largest median."""
    out = {}
    for kind, by_arm in results.items():
        for arm, by_nodes in by_arm.items():
            for nodes, runs in by_nodes.items():
                med = medians(runs)
                out[f"{kind}/{arm}/{nodes}"] = max((k for k in med if k != "whole"), key=lambda k: med[k])
    return out


def main(argv: list[str] | None = None) -> int:
    import docker

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default="kubeflow,jobset,volcano,slurm",
                        help="Kubernetes kinds, run on the control plane, and slurm, run on the Slurm cluster")
    parser.add_argument("--nodes", type=node_counts(MOST_CONTAINERS), default="2,4,8")
    parser.add_argument("--repeats", type=whole_number(100), default=3)
    parser.add_argument("--arms", default=",".join(ARMS), help=f"of {', '.join(ARMS)}")
    defn = load_definitions(ROOT / "images")[DEFAULT_IMAGE]
    parser.add_argument("--image", default=defn.ref(defn.arch("x86_64")))
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "first_step.json"))
    parser.add_argument("--logs", type=Path, default=None, help="keep every container's timed log in this folder")
    parser.add_argument("--add", action="store_true",
                        help="keep the other kinds already in --out (same image, command, sizes and repeats): "
                             "a busy host can measure one kind at a time")
    args = parser.parse_args(argv)
    kinds, counts, arms = _checked(parser, args)
    report = _earlier(parser, args, counts) if args.add else {
        "image": args.image, "command": list(COMMAND), "repeats": args.repeats, "nodes": counts,
        "host": {"cpus": os.cpu_count(), "machine": platform.machine()}, "marks": list(MARKS), "arms": arms,
        "measured": {}, "runs": {}, "medians": {}, "largest": {}}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop what it started, as on ^C
    client = docker.from_env(timeout=600)
    for kind in kinds:
        load_before, t0 = os.getloadavg(), time.time()
        runs = (run_slurm(client, kind, counts, args.repeats, args.image) if jobs.kind(kind).real_batch_system
                else run_kind(client, kind, counts, args.repeats, args.image, arms, args.logs))
        report["measured"][kind] = {"date": time.strftime("%Y-%m-%d", time.gmtime()), "seconds": round(
            time.time() - t0, 1), "load_average": [round(load_before[0], 2), round(os.getloadavg()[0], 2)]}
        report["runs"][kind] = runs
        report["medians"][kind] = {a: {n: medians(r) for n, r in by_n.items()} for a, by_n in runs.items()}
        report["largest"].update(largest({kind: runs}))
    print("\n".join(table({kind: report["runs"][kind] for kind in kinds})))
    print("largest part:", json.dumps(report["largest"], ensure_ascii=False))
    Path(args.out).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    return 0


def _checked(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[list[str], list[int], list[str]]:
    """The kinds, node counts and arms asked for, each checked (parser.error: one line, exit 2)."""
    kinds = [k for k in args.kinds.split(",") if k]
    # the Kubernetes kinds the control plane runs, and the batch kinds whose system runs here for real
    runnable = [k.name for k in jobs.KINDS if (k.kube and not k.no_kube_harness) or k.real_batch_system]
    if not kinds or any(k not in runnable for k in kinds):
        parser.error(f"--kinds={args.kinds!r}: expected some of {', '.join(runnable)}, separated by commas")
    arms = [a for a in args.arms.split(",") if a]
    if not arms or any(a not in ARMS for a in arms):
        parser.error(f"--arms={args.arms!r}: expected names of {', '.join(ARMS)}, separated by commas")
    return kinds, args.nodes, arms


def _earlier(parser: argparse.ArgumentParser, args: argparse.Namespace, counts: list[int]) -> dict[str, Any]:
    """--out as an earlier run wrote it, when it measured what this run measures."""
    expected = "first_step.json as this bench writes it"
    try:
        report = json.loads(readers.read_text(Path(args.out), what=f"--out={args.out!r}", expected=expected,
                                              cap=readers.DATA_CAP))
    except InputError as exc:
        parser.error(str(exc))
    except json.JSONDecodeError as exc:
        parser.error(f"--out={args.out!r} is not JSON ({exc.msg}, line {exc.lineno}); expected {expected}")
    same = {"image": args.image, "command": list(COMMAND), "repeats": args.repeats, "nodes": counts}
    if not isinstance(report, dict) or any(report.get(k) != v for k, v in same.items()):
        parser.error(f"--add: {args.out} measured another image, command, sizes or repeats; expected {same}")
    report.setdefault("measured", {})  # what each kind's run saw: a file from one run for all kinds has none
    return report

if __name__ == "__main__":
    sys.exit(main())
