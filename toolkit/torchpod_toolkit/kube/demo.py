"""`invoke demo --kube --manifest FILE`: a manifest `invoke manifests` wrote, applied as written
to a Kubernetes control plane started for the run, on one machine.

The plane is the one `invoke kube.build` built (torchpod_toolkit.kube.plane); the operator the
job's kind needs is the real one, built from its module and installed with its own CRDs,
RBAC and webhooks (torchpod_toolkit.kube.operators); the real scheduler binds the pods it
makes to the kubelet stand-in's nodes (torchpod_toolkit.kube.kubelet), which runs them as
containers of the image under test: the manifest's training image is tagged as that image
for the run (the stand-in pulls nothing) and untagged after. The namespace enforces the
Pod Security level the manifest's header states. Progress is printed as the pods move; a
table closes the run, and everything started is stopped on every exit path.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from torchpod import readers
from torchpod.errors import InputError, RuntimeFailure
from torchpod_toolkit.cluster.runner import parse_results
from torchpod_toolkit.manifests import jobs as job_kinds
from torchpod_toolkit.manifests import podsecurity

from . import build, operators, operatorspecs, plane, planestart
from . import kubelet as kubelet_mod
from .podruntime import Ended

Obj = dict[str, Any]
HEADER = re.compile(r"^# torchpod ([a-z0-9-]+) job '([^']+)': (\d+) nodes", re.MULTILINE)
LEVEL = re.compile(r"^# Pod Security: namespace level '(restricted|baseline|privileged)'", re.MULTILINE)
MAX_BYTES = 4 << 20  # a rendered manifest is kilobytes


@dataclass(frozen=True)
class Kind:
    """How one job object is run and followed: the operators it needs (in install order),
    kubectl's resource name, and how its status says it ended."""

    resource: str
    operators: tuple[str, ...]
    ended: Callable[[Obj, list[Obj]], str | None]  # "succeeded", "failed" or None (still running)


def _conditions(success: str, failure: str) -> Callable[[Obj, list[Obj]], str | None]:
    def ended(job: Obj, _pods: list[Obj]) -> str | None:
        true = {c.get("type") for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}
        return "succeeded" if success in true else "failed" if failure in true else None
    return ended


def _volcano(job: Obj, _pods: list[Obj]) -> str | None:
    phase = ((job.get("status") or {}).get("state") or {}).get("phase")
    return "succeeded" if phase == "Completed" else "failed" if phase in ("Failed", "Aborted", "Terminated") else None


def _exited_zero(container: Obj) -> bool:
    return any(((container.get(key) or {}).get("terminated") or {}).get("exitCode") == 0
               for key in ("state", "lastState"))


def _every_pod_exited_zero(_job: Obj, pods: list[Obj]) -> str | None:
    """A LeaderWorkerSet has no success condition (its pods restart Always): it has done its
    work when each of its pods' containers has exited 0 once."""
    statuses = [c for pod in pods for c in (pod.get("status") or {}).get("containerStatuses") or []]
    return "succeeded" if pods and statuses and all(_exited_zero(c) for c in statuses) else None


# by (API group, kind): training-operator v1.8.1, JobSet v0.12.0, LWS v0.9.0, Trainer v2.3.0
# (whose TrainJob runs as a JobSet) and Volcano v1.10.0, each with its own success condition
KINDS: Mapping[tuple[str, str], Kind] = {
    ("kubeflow.org", "PyTorchJob"): Kind("pytorchjobs.kubeflow.org", ("training-operator",),
                                         _conditions("Succeeded", "Failed")),
    ("jobset.x-k8s.io", "JobSet"): Kind("jobsets.jobset.x-k8s.io", ("jobset",), _conditions("Completed", "Failed")),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): Kind("leaderworkersets.leaderworkerset.x-k8s.io", ("lws",),
                                                          _every_pod_exited_zero),
    ("trainer.kubeflow.org", "TrainJob"): Kind("trainjobs.trainer.kubeflow.org", ("jobset", "trainer"),
                                               _conditions("Complete", "Failed")),
    ("batch.volcano.sh", "Job"): Kind("jobs.batch.volcano.sh", ("volcano",), _volcano),
}


@dataclass(frozen=True)
class Manifest:
    """What the run needs from a rendered manifest, every part checked."""

    path: Path
    scheduler: str  # the header's kind word
    nodes: int
    level: str
    namespace: str
    job: Obj
    kind: Kind
    images: dict[str, str]  # image -> where (an object's pod template) it is named first


def read_manifest(path: Path) -> Manifest:
    """The manifest at ``path``, or one InputError naming --manifest and what it expected."""
    where = f"--manifest={str(path)!r}"
    # bounded, regular files only: a FIFO or a device is refused before it could block or never end
    text = readers.read_text(path, what=where, expected="a file `invoke manifests` wrote", cap=MAX_BYTES)
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{where} cannot be read as YAML ({reason}); expected a file `invoke manifests` wrote") \
            from None
    header, level = HEADER.search(text), LEVEL.search(text)
    if header is None or level is None:
        raise InputError(f"{where} has no torchpod header (its '# torchpod ... job' and '# Pod Security:' lines); "
                         "expected a file `invoke manifests` wrote")
    kind = job_kinds.BY_NAME.get(header.group(1))
    if kind is not None and kind.no_kube_harness:  # a kind whose pods this harness cannot run
        runs = job_kinds.choices(tuple(k.name for k in job_kinds.KINDS if k.kube and not k.no_kube_harness))
        raise InputError(f"{where} is {kind.no_kube_harness}; expected a {runs} manifest")
    if not all(isinstance(d, dict) for d in docs):
        raise InputError(f"{where} holds a document that is not an object; expected Kubernetes objects")
    jobs = [d for d in docs if (_group(d), d.get("kind")) in KINDS]
    if len(jobs) != 1:
        raise InputError(f"{where} holds {len(jobs)} job objects; expected one of "
                         f"{', '.join(k for _, k in KINDS)}")
    (job,) = jobs
    namespace = (job.get("metadata") or {}).get("namespace") or "default"
    return Manifest(path, header.group(1), int(header.group(3)), level.group(1), str(namespace), job,
                    KINDS[(_group(job), job["kind"])], _images(docs))


def _group(doc: Obj) -> str:
    api = str(doc.get("apiVersion") or "")
    return api.split("/", 1)[0] if "/" in api else ""


def _images(docs: list[Obj]) -> dict[str, str]:
    found: dict[str, str] = {}
    for doc in docs:
        for where, pod in podsecurity.pod_specs(doc):
            for container in [*(pod.get("initContainers") or ()), *(pod.get("containers") or ())]:
                if container.get("name") != podsecurity.PYTORCH_INIT_NAME and container.get("image"):
                    found.setdefault(str(container["image"]), where)
    return found


@dataclass(frozen=True)
class Request:
    manifest: Path
    image: str  # the image under test: it stands in for the manifest's training image
    timeout: float = 600.0
    root: Path = Path(".")  # the checkout: kube/'s modules name the programs


def stand_ins(client: Any, manifest: Manifest, image: str) -> list[str]:
    """The references to tag as ``image`` for the run: each image the job's pods name that is
    not on this machine (one that is, the user's own, is used as it is and never retagged).
    Any other image the manifest names must be on this machine: the stand-in pulls nothing."""
    import docker

    def present(ref: str) -> bool:
        try:
            client.images.get(ref)
            return True
        except docker.errors.ImageNotFound:
            return False

    job_images = set(_images([manifest.job]))
    others = [(ref, where) for ref, where in manifest.images.items() if ref not in job_images and not present(ref)]
    if others:
        ref, where = others[0]
        raise InputError(f"--manifest={str(manifest.path)!r}: image {ref} ({where}) is not on this machine; the "
                         "kubelet stand-in pulls nothing: expected it loaded first (docker load or docker pull)")
    if not present(image):
        raise InputError(f"the image under test {image} is not on this machine; run `invoke build --arch x86_64`")
    return sorted(ref for ref in job_images if not present(ref))


@dataclass
class Started:
    """What one run started, stopped in reverse on every exit path."""

    folder: Path
    plane: plane.Plane | None = None
    kubelet: kubelet_mod.Kubelet | None = None
    running: list[operatorspecs.Running] = field(default_factory=list)
    tagged: list[str] = field(default_factory=list)

    def stop(self, client: Any) -> None:
        if self.kubelet is not None:
            self.kubelet.stop()
        for done in reversed(self.running):
            operators.stop(done)
        if self.plane is not None:
            plane.stop(self.plane)
        for ref in self.tagged:
            client.images.remove(ref, noprune=True)  # the tag alone: the image under test stays
        shutil.rmtree(self.folder, ignore_errors=True)


def _plans(root: Path, env: Mapping[str, str], names: tuple[str, ...]) -> tuple[build.Plan, list[build.Plan]]:
    """The plane's and each operator's built programs, or one RuntimeFailure naming
    `invoke kube.build`."""
    found = [build.plan_for(root, env), *(build.operator_plan_for(root, env, name) for name in names)]
    absent = [f"{p.bindir / m.name}" for p in found for m in p.missing()]
    if absent:
        raise RuntimeFailure(f"{absent[0]} is not built (nor {len(absent) - 1} more); run `invoke kube.build` first")
    return found[0], found[1:]


def start(client: Any, req: Request, manifest: Manifest, env: Mapping[str, str], say: Callable[[str], None]) -> Started:
    """The control plane, the kubelet stand-in's nodes, the operators and the namespace, with
    the manifest applied as written. The caller stops what it returns."""
    base, plans = _plans(req.root, env, manifest.kind.operators)
    tags = stand_ins(client, manifest, req.image)
    started = Started(Path(tempfile.mkdtemp(prefix="torchpod-kube-demo-")))
    try:
        for ref in tags:
            if "@" in ref:
                raise InputError(f"--manifest={str(manifest.path)!r}: image {ref} is named by digest, which no local "
                                 "tag can stand for; expected NAME:TAG")
            repo, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "latest")
            client.images.get(req.image).tag(repo, tag)
            started.tagged.append(ref)
            say(f"image {ref}: the image under test {req.image}, tagged for the run")
        t0 = time.monotonic()
        started.plane = planestart.start(base.bindir, started.folder / "plane")
        say(f"control plane {base.kubernetes}: started in {time.monotonic() - t0:.0f} s")
        started.kubelet = kubelet_mod.Kubelet(started.plane, client, nodes=manifest.nodes, prefix="node",
                                              version=base.kubernetes).start()
        say(f"{manifest.nodes} nodes: the kubelet stand-in's, its containers labelled "
            f"{kubelet_mod.LABEL}={started.kubelet.id}")
        kubectl = operators.Kubectl(base.bindir / "kubectl", started.plane.kubeconfig)
        for name, plan in zip(manifest.kind.operators, plans):
            t0 = time.monotonic()
            started.running.append(operators.install(operators.operator(name), plan, kubectl, started.plane,
                                                     started.folder / f"operator-{name}", env, init_image=req.image))
            say(f"operator {name}: installed in {time.monotonic() - t0:.0f} s")
        _namespace(kubectl, manifest)
        # --force-conflicts: an object the manifest brings that an operator's install already
        # applied (Trainer's example brings its own ClusterTrainingRuntime) is the manifest's
        kubectl("apply", "--server-side", "--force-conflicts", "-f", str(manifest.path))
        say(f"applied {manifest.path} as written, in namespace {manifest.namespace} "
            f"(Pod Security enforce={manifest.level}), on {manifest.nodes} nodes")
    except BaseException:
        started.stop(client)
        raise
    return started


def _exists(kubectl: Callable[..., str], kind: str, name: str) -> bool:
    return bool(kubectl("get", kind, "--ignore-not-found", "-o", "name", name).strip())


def _namespace(kubectl: operators.Kubectl, manifest: Manifest) -> None:
    """The manifest's namespace, labelled to enforce the level its header states, with its
    default service account (the controller manager makes it) before any pod is made."""
    if manifest.namespace != "default" and not _exists(kubectl, "namespace", manifest.namespace):
        kubectl("create", "namespace", manifest.namespace)  # an operator's own (kubeflow) is there already
    kubectl("label", "--overwrite", "namespace", manifest.namespace,
            f"pod-security.kubernetes.io/enforce={manifest.level}")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            kubectl("-n", manifest.namespace, "get", "serviceaccount", "default")
            return
        except RuntimeFailure:
            time.sleep(0.5)
    raise RuntimeFailure(f"namespace {manifest.namespace}: no default service account within 60 s")


# --- following the job -----------------------------------------------------------------------------

def pod_line(pod: Obj) -> str:
    """One pod as the run shows it: its phase, node and each container's state."""
    status, name = pod.get("status") or {}, pod["metadata"]["name"]
    parts = []
    for c in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        state = c.get("state") or {}
        if "terminated" in state:
            parts.append(f"{c['name']} exited {state['terminated'].get('exitCode')}")
        elif "waiting" in state and (state["waiting"] or {}).get("reason") not in (None, "PodInitializing"):
            parts.append(f"{c['name']} waiting: {state['waiting'].get('reason')} {state['waiting'].get('message', '')}")
        elif "running" in state:
            parts.append(f"{c['name']} running")
    node = pod.get("spec", {}).get("nodeName") or "no node yet"
    return f"pod {name}: {status.get('phase', 'Pending')} on {node}" + (f" ({'; '.join(parts)})" if parts else "")


def _get(kubectl: operators.Kubectl, *args: str) -> Obj:
    try:
        return json.loads(kubectl(*args, "-o", "json"))
    except RuntimeFailure:
        return {}


def follow(kubectl: operators.Kubectl, manifest: Manifest, timeout: float, say: Callable[[str], None]) -> str:
    """Print each pod's changes and each new warning event until the job ends; its end
    ("succeeded", "failed") or "timed out"."""
    ns, name = manifest.namespace, manifest.job["metadata"]["name"]
    shown: dict[str, str] = {}
    warned: set[str] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = _get(kubectl, "-n", ns, "get", manifest.kind.resource, name)
        pods = _get(kubectl, "-n", ns, "get", "pods").get("items", [])
        for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
            line = pod_line(pod)
            if shown.get(pod["metadata"]["name"]) != line:
                shown[pod["metadata"]["name"]] = line
                say(line)
        for event in _get(kubectl, "-n", ns, "get", "events").get("items", []):
            uid = event.get("metadata", {}).get("uid", "")
            if event.get("type") == "Warning" and uid not in warned:
                warned.add(uid)
                obj = event.get("involvedObject") or {}
                say(f"warning {obj.get('kind')}/{obj.get('name')}: {event.get('reason')}: {event.get('message')}")
        ended = manifest.kind.ended(job, pods) if job else None
        if ended:
            return ended
        time.sleep(2.0)
    return "timed out"


def table(pods: list[Obj], attempts: list[Ended]) -> list[str]:
    """Per pod: its node, phase, restarts, its containers' exit codes in order, and the ranks
    its successful run reported."""
    rows = [("pod", "node", "phase", "restarts", "exits", "ranks")]
    by_name = {pod["metadata"]["name"]: pod for pod in pods}
    gone = {a.pod for a in attempts} - set(by_name)  # a failed job's pods its controller deleted
    for name in sorted(set(by_name) | gone):
        pod = by_name.get(name, {})
        status = pod.get("status") or {}
        mine = [a for a in attempts if a.pod == name and a.container != podsecurity.PYTORCH_INIT_NAME]
        ranks = sorted(r["rank"] for a in mine if a.code == 0 for r in parse_results(a.log) if "rank" in r)
        rows.append((name, pod.get("spec", {}).get("nodeName") or "-", status.get("phase", "deleted"),
                     str(sum(c.get("restartCount", 0) for c in status.get("containerStatuses") or [])) if pod
                     else "-",
                     ",".join("running" if a.code is None else str(a.code) for a in mine) or "-",
                     ",".join(map(str, ranks)) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return [lines[0], "  ".join("-" * w for w in widths), *lines[1:]]


def last_lines(attempts: list[Ended]) -> list[str]:
    """Each failed run's last line of output, by pod and run: what a failed job says first."""
    out = []
    for a in attempts:
        if a.code not in (0, None) and a.container != podsecurity.PYTORCH_INIT_NAME:
            last = next((line for line in reversed(a.log.splitlines()) if line.strip()), "(no output)")
            out.append(f"  {a.pod} (exit {a.code}): {last.strip()[:300]}")
    return out


def _agreement(results: list[Obj]) -> str:
    """Whether the ranks that trained ended with the same parameters (DDP keeps them equal)."""
    sums = {round(float(r["param_checksum"]), 6) for r in results if r.get("param_checksum") is not None}
    if not sums:
        return ""
    loss = [r["final_loss"] for r in results if r.get("final_loss") is not None]
    said = f"; final loss {sum(loss) / len(loss):.4f}" if loss else ""
    return said + ("; the ranks' parameters agree" if len(sums) == 1 else "; the ranks' parameters DIFFER")


def run(client: Any, req: Request, env: Mapping[str, str], out: TextIO = sys.stdout) -> int:
    """Run the manifest's job on a control plane of its own; 0 when it succeeded."""
    manifest = read_manifest(req.manifest)

    def say(text: str) -> None:
        out.write(f"==> {text}\n")
        out.flush()

    started = start(client, req, manifest, env, say)
    try:
        assert started.plane is not None and started.kubelet is not None
        base = build.plan_for(req.root, env)
        kubectl = operators.Kubectl(base.bindir / "kubectl", started.plane.kubeconfig)
        t0 = time.monotonic()
        ended = follow(kubectl, manifest, req.timeout, say)
        pods = _get(kubectl, "-n", manifest.namespace, "get", "pods").get("items", [])
        attempts = started.kubelet.attempts(manifest.namespace)
        results = [r for a in attempts if a.code == 0 for r in parse_results(a.log) if "world_size" in r]
        worlds = ",".join(map(str, sorted({r["world_size"] for r in results}))) or "-"
        out.write("\n" + "\n".join(table(pods, attempts)) + "\n\n")
        failed = last_lines(attempts)
        if failed:
            out.write("the failed runs' last lines:\n" + "\n".join(failed) + "\n\n")
        out.write(f"{manifest.scheduler} job {manifest.job['metadata']['name']} ({manifest.job['kind']}): {ended} "
                  f"after {time.monotonic() - t0:.0f} s; world size {worlds}; {len(results)} ranks reported"
                  f"{_agreement(results)}\n")
        return 0 if ended == "succeeded" else 1
    finally:
        started.stop(client)
