"""The real operators on a running control plane: their CRDs, RBAC and webhooks as each
release ships them, their programs built by ``build`` from ``kube/operators/<name>/``
(the Kubeflow training operator, JobSet, LeaderWorkerSet, Kubeflow Trainer v2, Volcano, Kueue).

What is real: the binaries (each operator's own main packages at the release its module
pins), the CRDs with their schemas, the ServiceAccounts, Roles, ClusterRoles and bindings,
and the Validating/MutatingWebhookConfigurations with every rule, path and failure policy.
All of it is read at install time from the operator's module source in Go's module cache
(``go mod download -json MODULE@VERSION``, its ``Dir``): the overlay upstream installs
from, rendered by the kustomize built into the plane's kubectl (``kubectl kustomize``), or
the release's one file of objects (Volcano's installer). Nothing is copied into the
checkout. Each object is applied with ``kubectl apply --server-side``. An overlay resource
fetched from the network (Trainer's ``third-party/jobset``, JobSet's release manifests from
GitHub) is left out, from a copy of the kustomization in the install folder; the JobSet
installed here from its own module stands in for it.

What stands in: each program runs as a process on this host instead of as the pod of its
Deployment (Deployments and Jobs are not applied: no node runs pods yet). In the pod's place:

- identity: a token of the program's own ServiceAccount, the one its Deployment names
  (``kubectl create token``, the TokenRequest API), in a kubeconfig of its own, so every
  call it makes passes through the RBAC it ships (no administrator's kubeconfig);
- webhooks: each configuration's ``clientConfig.service`` becomes ``clientConfig.url``
  ``https://127.0.0.1:<port><path>`` with a ``caBundle`` of a CA made here, and the
  operator serves a certificate from that CA (for 127.0.0.1 and the Service's DNS names);
- the webhook Secret an in-cluster cert rotator reads (open-policy-agent cert-controller
  v0.10.1, pkg/rotator/rotator.go: ``ValidCert`` checks the CA against the rotator's
  ``CAName`` and the serving certificate against ``<service>.<namespace>.svc``, 90 days
  ahead; the CA key is parsed as PKCS #1) holds the same CA and certificate, so a rotator
  that runs keeps them and injects the same ``caBundle``. Where an operator can turn its
  rotator off (JobSet, LWS, Trainer) it is off and its Configuration names the certificate;
  the training operator v1.8.1 cannot, and its rotator waits for a file at a fixed path
  (``ROTATOR_CERT_DIR``, the one thing written outside the install folder, and only where
  absent);
- configuration the pod mounts from a ConfigMap is written to the install folder with the
  ports and certificate folder of this host.

Every port is a free port, bound to 127.0.0.1 where the program takes an address (the
training operator v1.8.1's webhook server and Trainer's status server take only a port and
listen on every interface). ``install`` returns once the operator answers its readiness
check (controller-runtime's ``/readyz``, which upstream makes wait for its webhook server;
Volcano's three ``/healthz``) and its webhook server has a handler at every webhook's path
(``webhook_served``); ``stop`` ends its processes through
``plane.stop_processes`` (by the ids recorded, each checked to still run its binary). It
never writes into the checkout or ``~/.kube``, and leaves no process behind.

Where each part lives: ``operatorspecs`` (each operator's record: its overlay, namespace,
programs and how each is started), ``operatormanifests`` (its upstream manifests read and
rewritten, pure), ``webhookcerts`` (the webhook CA and serving certificate),
``operatorprobes`` (the readiness checks); this module applies the manifests to the plane,
starts the programs, waits for them and stops them.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from torchpod import readers
from torchpod.errors import InputError, RuntimeFailure, one_line
from torchpod_toolkit.kube import build, plane
from torchpod_toolkit.kube.operatormanifests import (
    Manifests,
    config_files,
    mounted,
    parse_download,
    parse_objects,
    prefill_secrets,
    rewrite_webhooks,
    service_account,
    service_hosts,
    sort_manifests,
    token_kubeconfig,
)
from torchpod_toolkit.kube.operatorprobes import webhook_paths, webhook_served
from torchpod_toolkit.kube.operatorspecs import OPERATORS, Install, Operator, Ports, Running
from torchpod_toolkit.kube.webhookcerts import make_certs

RENDER_CAP = 64 << 20  # what `kubectl kustomize` prints: Volcano's CRDs are a few MiB
TOKEN_SECONDS = 24 * 3600
KUBECTL_TIMEOUT = 120.0


def operator(name: str) -> Operator:
    """The operator called ``name``; another name is refused with the known ones."""
    if name not in OPERATORS:
        raise InputError(f"operator {name!r}; expected one of: {', '.join(OPERATORS)}")
    return OPERATORS[name]


# --- kubectl, go, processes ------------------------------------------------------------------

@dataclass(frozen=True)
class Kubectl:
    """The plane's kubectl with its administrator's kubeconfig."""

    binary: Path
    kubeconfig: Path

    def __call__(self, *args: str, stdin: str = "", cap: int = RENDER_CAP) -> str:
        # the discovery cache beside the kubeconfig, in the plane's folder: never ~/.kube
        argv = [str(self.binary), f"--kubeconfig={self.kubeconfig}",
                f"--cache-dir={self.kubeconfig.parent / 'kubectl'}", "--request-timeout=60s", *args]
        try:
            done = subprocess.run(argv, input=stdin.encode("utf-8"), capture_output=True, timeout=KUBECTL_TIMEOUT)
        except (OSError, subprocess.SubprocessError) as exc:
            raise RuntimeFailure(f"kubectl {' '.join(args[:3])}: {one_line(exc)}") from None
        if done.returncode != 0 or len(done.stdout) > cap:
            why = done.stderr.decode("utf-8", "replace")[-2000:] or f"over {cap} bytes of output"
            raise RuntimeFailure(f"kubectl {' '.join(args[:3])}: exit {done.returncode}: {one_line(why)}")
        return done.stdout.decode("utf-8", "replace")

    def apply(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """``kubectl apply --server-side`` of ``objects`` (YAML from the library, on stdin)."""
        if objects:
            self("apply", "--server-side", "--force-conflicts", "--field-manager=torchpod", "-f", "-",
                 stdin=yaml.safe_dump_all(list(objects), sort_keys=False))


def module_source(plan: build.Plan, env: Mapping[str, str]) -> Path:
    """Where Go's module cache holds ``plan``'s upstream module at its pinned version."""
    wanted = f"{plan.upstream}@{plan.version}"
    try:
        done = subprocess.run([plan.go, "mod", "download", "-json", wanted], cwd=plan.module, env=dict(env),
                              capture_output=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeFailure(f"go mod download -json {wanted}: {one_line(exc)}") from None
    return parse_download(done.stdout.decode("utf-8", "replace")[:1 << 20], wanted)


def _spawn(argv: Sequence[str], env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    """One program in a process group of its own (start_new_session), as plane.py starts the
    plane's components."""
    with log.open("ab") as out:
        return subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=dict(env), start_new_session=True, cwd=log.parent)


def _await_ready(name: str, processes: Mapping[str, subprocess.Popen[bytes]], probe: Callable[[], bool],
                 logs: Path, deadline: float, clock: Callable[[], float]) -> None:
    """Until ``probe()`` is true; a program that exits, or no answer by the deadline, is one
    error carrying the end of each program's log."""
    while not probe():
        ended = {program: p.poll() for program, p in processes.items() if p.poll() is not None}
        if ended or clock() > deadline:
            what = (", ".join(f"{p} exited with {code}" for p, code in ended.items()) if ended
                    else f"{name} did not answer its readiness check in time")
            tails = "; ".join(f"the end of {logs / f'{p}.log'}: {plane.log_tail(logs / f'{p}.log')}"
                              for p in processes)
            raise RuntimeFailure(f"{what}; {tails}")
        time.sleep(0.2)


def start(spec: Operator, install: Install, env: Mapping[str, str], timeout: float = 180.0,
          clock: Callable[[], float] = time.monotonic, paths: Sequence[str] = ()) -> Running:
    """Start ``spec``'s programs and wait for their readiness check and for a handler at each
    webhook path in ``paths`` (:func:`webhook_served`); on any failure every program started is
    stopped before the error is raised (the folder and its logs stay)."""
    logs = install.folder / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    base = {"PATH": env.get("PATH", "/usr/bin:/bin"), "HOME": str(install.folder),
            "KUBECONFIG": str(install.kubeconfig), **spec.env(install)}
    began, deadline = clock(), clock() + timeout
    started: dict[str, subprocess.Popen[bytes]] = {}
    binaries = {program: str(install.bindir / program) for program in spec.programs}
    try:
        for program, argv in spec.programs.items():
            own = {"KUBECONFIG": str(install.kubeconfigs[program])} if program in install.kubeconfigs else {}
            started[program] = _spawn(argv(install), {**base, **own}, logs / f"{program}.log")
        ca = install.certs / "ca.crt"
        _await_ready(spec.name, started, lambda: spec.ready(install) and all(
            webhook_served(install.ports.webhook, path, ca) for path in paths), logs, deadline, clock)
    except BaseException:
        plane.stop_processes({p: s.pid for p, s in started.items()}, binaries)
        raise
    return Running(name=spec.name, folder=install.folder, ports=install.ports,
                   pids={p: s.pid for p, s in started.items()}, binaries=binaries, seconds=clock() - began)


def established(crds: Mapping[str, Any]) -> set[str]:
    """The names of the CRDs of a ``kubectl get -o json`` list whose Established condition is True."""
    return {item["metadata"]["name"] for item in crds.get("items") or []
            if any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in (item.get("status") or {}).get("conditions") or [])}


def await_established(kubectl: Kubectl, names: Sequence[str], timeout: float = 60.0) -> None:
    """Until every CRD in ``names`` is Established (``kubectl wait`` fails on a CRD whose
    status has no conditions yet, so this polls)."""
    deadline = time.monotonic() + timeout
    while names:
        listed = json.loads(kubectl("get", "customresourcedefinitions", "-o", "json", *names))
        missing = sorted(set(names) - established(listed if "items" in listed else {"items": [listed]}))
        if not missing:
            return
        if time.monotonic() > deadline:
            raise RuntimeFailure(f"CRDs {', '.join(missing)} not Established within {timeout:.0f} s")
        time.sleep(0.2)


def local_overlay(kustomization: Mapping[str, Any], overlay: Path, drop: Sequence[str],
                  scratch: Path) -> dict[str, Any]:
    """Upstream's ``kustomization`` of the folder ``overlay`` without the resources in
    ``drop``, for a copy in ``scratch``: every other resource a path from there into
    ``overlay``'s module source (relative: kustomize refuses an absolute root). A
    kustomization that names files by other fields (patches) is refused, not half rewritten."""
    unknown = sorted(set(kustomization) - {"apiVersion", "kind", "namespace", "namePrefix", "resources", "images",
                                           "labels", "commonLabels", "secretGenerator", "configMapGenerator"})
    if unknown:
        raise RuntimeFailure(f"{overlay}/kustomization.yaml: fields {unknown}; expected resources, images, labels, "
                             "namespace and generators of literals only")
    for generator in (*kustomization.get("secretGenerator", []), *kustomization.get("configMapGenerator", [])):
        if set(generator) - {"name", "namespace", "literals", "options", "type"}:
            raise RuntimeFailure(f"{overlay}/kustomization.yaml: generator {generator.get('name')} reads files; "
                                 "expected literals only")
    resources = [os.path.relpath(os.path.normpath(overlay / r), scratch) for r in kustomization.get("resources") or []
                 if r not in drop]
    return {**kustomization, "resources": resources}


def render_overlay(kubectl: Kubectl, overlay: Path, scratch: Path, drop: Sequence[str]) -> list[dict[str, Any]]:
    """The objects of upstream's ``overlay``, rendered by the plane's kubectl (kustomize);
    with ``drop``, from a copy in ``scratch`` that leaves those resources out."""
    if overlay.suffix == ".yaml":  # a release's one file of objects, not a kustomization
        return parse_objects(readers.read_text(overlay, what=str(overlay), expected="Kubernetes objects",
                                               cap=RENDER_CAP), str(overlay))
    if not drop:
        return parse_objects(kubectl("kustomize", str(overlay)), str(overlay))
    where = overlay / "kustomization.yaml"
    upstream = yaml.safe_load(readers.read_text(where, what=str(where), expected="a kustomization",
                                                cap=readers.DATA_CAP))
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "kustomization.yaml").write_text(yaml.safe_dump(local_overlay(upstream, overlay, drop, scratch)))
    return parse_objects(kubectl("kustomize", "--load-restrictor=LoadRestrictionsNone", str(scratch)), str(overlay))


def apply_manifests(kubectl: Kubectl, manifests: Manifests, objects: Sequence[Mapping[str, Any]],
                    webhooks: Sequence[Mapping[str, Any]]) -> None:
    """CRDs first, until each is Established; then the objects; then the webhook configurations."""
    kubectl.apply(manifests.crds)
    await_established(kubectl, [crd["metadata"]["name"] for crd in manifests.crds])
    kubectl.apply(objects)
    kubectl.apply(webhooks)


def write_kubeconfig(kubectl: Kubectl, started: plane.Plane, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig at ``path`` with a fresh token of the ServiceAccount ``namespace/account``."""
    token = kubectl("create", "token", account, "-n", namespace, f"--duration={TOKEN_SECONDS}s").strip()
    path.write_text(token_kubeconfig(started.server, started.root / "pki" / "ca.crt", token,
                                     f"system:serviceaccount:{namespace}:{account}"))
    path.chmod(0o600)
    return path


def _kubeconfigs(spec: Operator, kubectl: Kubectl, started: plane.Plane, manifests: Manifests, where: str,
                 folder: Path) -> dict[str, Path]:
    """One kubeconfig per program: of the ServiceAccount of the Deployment ``spec.accounts``
    names for it, or of the one Deployment's."""
    paths = {}
    for program in spec.programs:
        chosen = [d for d in manifests.deployments if d["metadata"]["name"] == spec.accounts.get(program)]
        account = service_account(chosen if program in spec.accounts else manifests.deployments, where)
        paths[program] = write_kubeconfig(kubectl, started, spec.namespace, account, folder / f"{program}.kubeconfig")
    return paths


def install(spec: Operator, plan: build.Plan, kubectl: Kubectl, started: plane.Plane, folder: Path,
            env: Mapping[str, str], timeout: float = 180.0, now: datetime.datetime | None = None,
            init_image: str = "") -> Running:
    """Install ``spec`` on the plane ``started`` from the binaries ``plan`` names: its CRDs,
    RBAC and webhooks from its module source, a token of its ServiceAccount, and its programs
    as processes in ``folder`` (a new, empty folder), ready when this returns. ``init_image``:
    the image training-operator's init-pytorch container runs (INIT_CONTAINERS), as a site
    without Docker Hub names one."""
    absent = [p.name for p in plan.missing()]
    if absent:
        raise RuntimeFailure(f"{', '.join(absent)} missing in {plan.bindir}; run `invoke kube.build` first")
    folder.mkdir(parents=True, exist_ok=True)
    if any(folder.iterdir()):
        raise RuntimeFailure(f"{folder} is not empty; expected a new folder for the operator {spec.name}")
    source = module_source(plan, env)
    overlay = source / spec.overlay
    manifests = sort_manifests(d for d in render_overlay(kubectl, overlay, folder / "overlay", spec.drop)
                               if d["kind"] not in spec.leave_out)
    free = plane.free_ports(3 + spec.extra_ports)
    ports = Ports(free[0], free[1], free[2], tuple(free[3:]))
    files = make_certs(folder / "certs", spec.rotator_ca, service_hosts(manifests.webhooks),
                       now or datetime.datetime.now(datetime.timezone.utc))
    objects = prefill_secrets(manifests.objects, mounted(manifests.deployments, "secret"), files)
    apply_manifests(kubectl, manifests, objects, rewrite_webhooks(manifests.webhooks, ports.webhook, files["ca.crt"]))
    kubeconfigs = _kubeconfigs(spec, kubectl, started, manifests, str(overlay), folder)
    made = Install(folder=folder, bindir=plan.bindir, kubeconfig=next(iter(kubeconfigs.values())),
                   certs=folder / "certs", ports=ports, namespace=spec.namespace,
                   config=config_files(objects, mounted(manifests.deployments, "configMap")), kubeconfigs=kubeconfigs,
                   init_image=init_image)
    spec.prepare(made)
    running = start(spec, made, env, timeout=timeout, paths=webhook_paths(manifests.webhooks))
    try:
        for extra in spec.extras:
            kubectl.apply(render_overlay(kubectl, source / extra, folder / "extras", ()))
    except BaseException:
        stop(running)
        raise
    return running


def stop(running: Running) -> list[str]:
    """Stop an installed operator's programs (TERM, then KILL after a grace); those that needed KILL."""
    return plane.stop_processes(running.pids, running.binaries)


def alive(running: Running) -> bool:
    """Whether any of the operator's programs still runs its binary (not a reused id)."""
    def runs(pid: int, binary: str) -> bool:
        try:
            return os.readlink(f"/proc/{pid}/exe") == str(Path(binary).resolve())
        except OSError:
            return False
    return any(runs(pid, running.binaries[program]) for program, pid in running.pids.items())
