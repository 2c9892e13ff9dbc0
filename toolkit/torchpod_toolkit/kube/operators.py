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
"""

from __future__ import annotations

import base64
import datetime
import http.client
import ipaddress
import json
import os
import ssl
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from torchpod import readers
from torchpod.errors import InputError, RuntimeFailure, one_line
from torchpod_toolkit.kube import build, plane

RENDER_CAP = 64 << 20  # what `kubectl kustomize` prints: Volcano's CRDs are a few MiB
# A rotator that runs refreshes a certificate valid for under 90 days (module docstring).
CERT_DAYS = 365
TOKEN_SECONDS = 24 * 3600
WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
# Kinds of the overlay the host processes replace (module docstring).
# Volcano's admission-init Job makes its webhook Secret with a script; here the harness does.
STAND_INS = ("Deployment", "Job")
KUBECTL_TIMEOUT = 120.0


@dataclass(frozen=True)
class Ports:
    """One operator's free ports: its webhook server's, its health probes' and one more for
    a server of its own (Trainer's status server)."""

    webhook: int
    health: int
    status: int = 0
    extra: tuple[int, ...] = ()  # more, for an operator of several programs (Volcano)


@dataclass(frozen=True)
class Install:
    """What one operator's programs are started with (paths inside ``folder``)."""

    folder: Path
    bindir: Path
    kubeconfig: Path
    certs: Path  # tls.crt, tls.key and ca.crt
    ports: Ports
    namespace: str
    config: Mapping[str, str] = field(default_factory=dict)  # ConfigMap files of the overlay, by key
    kubeconfigs: Mapping[str, Path] = field(default_factory=dict)  # by program, where each has its own account
    init_image: str = ""  # training-operator's init-pytorch image, where the site names its own


Argv = Callable[[Install], list[str]]
Env = Callable[[Install], dict[str, str]]


@dataclass(frozen=True)
class Operator:
    """One operator: its module folder under kube/operators/, the overlay upstream installs
    from, its namespace, the name its cert rotator gives its CA, and its programs (name ->
    argv) with the environment they add."""

    name: str
    overlay: str
    namespace: str
    rotator_ca: str
    programs: Mapping[str, Argv]
    env: Env = lambda install: {}
    prepare: Callable[[Install], None] = lambda install: None
    # Resources of the overlay left out (what it fetches from the network); the rest is
    # rendered from a copy of its kustomization.yaml whose paths point into the module source.
    drop: tuple[str, ...] = ()
    extras: tuple[str, ...] = ()  # overlays applied once the operator is ready (Trainer's runtimes)
    needs: tuple[str, ...] = ()  # operators installed first (Trainer's JobSet)
    # program -> the Deployment whose ServiceAccount it runs as, where there are several
    # (Volcano); else the one Deployment's.
    accounts: Mapping[str, str] = field(default_factory=dict)
    extra_ports: int = 0
    # Whether every program is ready; by default controller-runtime's /readyz on the health port.
    ready: Callable[[Install], bool] = lambda install: ready(install.ports.health)
    # Kinds of the overlay not applied, besides STAND_INS: what needs a pod's network (an
    # aggregated API's APIService, which the API server would call through a Service).
    leave_out: tuple[str, ...] = ()


@dataclass(frozen=True)
class Running:
    """An installed operator: its folder, ports and processes."""

    name: str
    folder: Path
    ports: Ports
    pids: Mapping[str, int]
    binaries: Mapping[str, str]
    seconds: float  # from the first program started to its readiness check answered


# --- the operators -------------------------------------------------------------------------

def _training_operator_argv(install: Install) -> list[str]:
    # Flags of cmd/training-operator.v1/main.go (training-operator v1.8.1).
    site = [f"--pytorch-init-container-image={install.init_image}",
            f"--pytorch-init-container-template-file={install.folder / INIT_TEMPLATE}"] if install.init_image else []
    return [str(install.bindir / "training-operator"), f"--webhook-server-port={install.ports.webhook}",
            f"--health-probe-bind-address={plane.LOOPBACK}:{install.ports.health}",
            "--metrics-bind-address=0", "--leader-elect=false", *site]


# training-operator v1.8.1 gives every Worker pod of a job with a Master an init container
# that waits until the Master's name resolves (pkg/controller.v1/pytorch/initcontainer.go):
# by default `nslookup` in alpine:3.10, pulled from Docker Hub. A site without that image
# names its own with --pytorch-init-container-image and --pytorch-init-container-template-file,
# a Go template of the container list with .InitContainerImage, .MasterAddr and .MaxTries.
# This one keeps the default's name, pull policy, resources and retry loop, and no
# securityContext (what Pod Security admission judges is the operator's default), and asks
# glibc's `getent hosts` instead of nslookup, which an image of Debian's has without dnsutils.
INIT_TEMPLATE = "init-pytorch.yaml"
INIT_CONTAINERS = [{
    "name": "init-pytorch", "image": "{{.InitContainerImage}}", "imagePullPolicy": "IfNotPresent",
    "resources": {"limits": {"cpu": "100m", "memory": "20Mi"}, "requests": {"cpu": "50m", "memory": "10Mi"}},
    "command": ["sh", "-c", "err=1; for i in $(seq {{.MaxTries}}); do if getent hosts {{.MasterAddr}}; "
                "then err=0 && break; fi; echo waiting for master; sleep 2; done; exit $err"]}]


def _training_operator_env(install: Install) -> dict[str, str]:
    # The namespace of its Secret (pkg/cert/cert.go, MY_POD_NAMESPACE); the webhook server
    # reads its certificate under $TMPDIR (controller-runtime v0.17, pkg/webhook/server.go).
    return {"MY_POD_NAMESPACE": install.namespace, "TMPDIR": str(install.folder / "tmp")}


# training-operator v1.8.1, pkg/cert/cert.go: the rotator waits until a file exists at this
# fixed path (cert-controller v0.10.1, rotator.go, ensureCertsMounted, a stat only) before
# the operator starts its controllers; in a pod the Secret's volume is mounted there.
ROTATOR_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")


CERT_CAP = 64 << 10  # a key or certificate make_certs writes: under 2 KiB


def _cert(install: Install, name: str) -> bytes:
    """A file of ``install.certs``, through the bounded reader (it outlives the run that wrote it)."""
    path = install.certs / name
    return readers.read_bytes(path, what=str(path), expected="a certificate or key make_certs wrote", cap=CERT_CAP)


def _training_operator_prepare(install: Install) -> None:
    if install.init_image:
        (install.folder / INIT_TEMPLATE).write_text(yaml.safe_dump(INIT_CONTAINERS, sort_keys=False))
    served = install.folder / "tmp" / "k8s-webhook-server" / "serving-certs"
    served.mkdir(parents=True, exist_ok=True)
    for name in ("tls.crt", "tls.key"):
        (served / name).write_bytes(_cert(install, name))
    marker = ROTATOR_CERT_DIR / "tls.crt"
    if not marker.exists():
        ROTATOR_CERT_DIR.mkdir(parents=True, exist_ok=True)
        marker.write_bytes(_cert(install, "tls.crt"))


def _kubebuilder_argv(program: str) -> Argv:
    """The command line of a controller whose Configuration file says the rest (flags of
    main.go, jobset v0.12.0; cmd/main.go, lws v0.9.0: a flag given overrides the file)."""
    def argv(install: Install) -> list[str]:
        return [str(install.bindir / program), f"--config={install.folder / f'{program}-config.yaml'}",
                f"--health-probe-bind-address={plane.LOOPBACK}:{install.ports.health}",
                "--metrics-bind-address=0", "--leader-elect=false"]
    return argv


def _kubebuilder_prepare(program: str) -> Callable[[Install], None]:
    """The overlay's Configuration (the ConfigMap's ``controller_manager_config.yaml``) with
    this host's webhook server and the certificate made here instead of the rotator's
    (api/config/v1alpha1/configuration_types.go of jobset v0.12.0 and lws v0.9.0 alike:
    ``internalCertManagement.enable``, ``webhook.port``, ``webhook.host``, ``webhook.certDir``)."""
    def prepare(install: Install) -> None:
        config = yaml.safe_load(install.config.get("controller_manager_config.yaml", "")) or {}
        config["internalCertManagement"] = {"enable": False}
        config["webhook"] = {"port": install.ports.webhook, "host": plane.LOOPBACK, "certDir": str(install.certs)}
        config["leaderElection"] = {"leaderElect": False}
        (install.folder / f"{program}-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return prepare


def _trainer_argv(install: Install) -> list[str]:
    # Its one flag besides the feature gates (cmd/trainer-controller-manager/main.go, trainer v2.3.0).
    return [str(install.bindir / "trainer-controller-manager"), f"--config={install.folder / 'trainer-config.yaml'}"]


def _trainer_env(install: Install) -> dict[str, str]:
    # Its Configuration has no certificate folder: the webhook server reads its certificate
    # under $TMPDIR (controller-runtime's default, pkg/webhook/server.go).
    return {"TMPDIR": str(install.folder / "tmp")}


def _trainer_prepare(install: Install) -> None:
    """The overlay's Configuration (manifests/base/manager/controller_manager_config.yaml,
    trainer v2.3.0; pkg/apis/config/v1alpha1) with this host's ports, no rotator, no leader
    election, and the certificate made here where the webhook server looks for it."""
    config = yaml.safe_load(install.config.get("controller_manager_config.yaml", "")) or {}
    config["certManagement"] = {**(config.get("certManagement") or {}), "enable": False}
    config["webhook"] = {"port": install.ports.webhook, "host": plane.LOOPBACK}
    config["health"] = {**(config.get("health") or {}),
                        "healthProbeBindAddress": f"{plane.LOOPBACK}:{install.ports.health}"}
    config["metrics"] = {"bindAddress": "0"}
    config["leaderElection"] = {**(config.get("leaderElection") or {}), "leaderElect": False}
    config["statusServer"] = {**(config.get("statusServer") or {}), "port": install.ports.status}
    (install.folder / "trainer-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    served = install.folder / "tmp" / "k8s-webhook-server" / "serving-certs"
    served.mkdir(parents=True, exist_ok=True)
    for name in ("tls.crt", "tls.key"):
        (served / name).write_bytes(_cert(install, name))


# The integrations Kueue manages here: the kinds whose operators the tests install beside it
# (Configuration.integrations.frameworks, apis/config/v1beta2, kueue v0.17.0).
KUEUE_FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/pytorchjob")


def _kueue_argv(install: Install) -> list[str]:
    # cmd/kueue/main.go, kueue v0.17.0: --config, --feature-gates and the visibility server's
    # port are its flags. The visibility server is an aggregated API behind a Service no node
    # runs here: off, and its APIServices left out (Operator.leave_out).
    return [str(install.bindir / "kueue"), f"--config={install.folder / 'kueue-config.yaml'}",
            "--feature-gates=VisibilityOnDemand=false", f"--visibility-server-port={install.ports.status}"]


def _kueue_prepare(install: Install) -> None:
    """The overlay's Configuration (config/components/manager/controller_manager_config.yaml,
    kueue v0.17.0; apis/config/v1beta2) with this host's ports, no leader election and the
    integrations of KUEUE_FRAMEWORKS. Its cert rotator stays on: without it Kueue reads its
    metrics certificate from a fixed path, /etc/kueue/metrics/certs (cmd/kueue/main.go); on,
    it finds the webhook Secret the harness filled with its CA (cert.go: CAName kueue-ca, the
    Service kueue-webhook-service), keeps it, injects the same CA into the webhooks and the
    CRDs' conversion, and waits for the Secret's files in the webhook's certificate folder,
    where the kubelet would mount them (open-policy-agent cert-controller v0.16.0,
    ensureCertsMounted): the harness's certificate folder, which holds the same files."""
    config = yaml.safe_load(install.config.get("controller_manager_config.yaml", "")) or {}
    config["internalCertManagement"] = {"enable": True, "webhookServiceName": "kueue-webhook-service",
                                        "webhookSecretName": "kueue-webhook-server-cert"}
    config["webhook"] = {"port": install.ports.webhook, "host": plane.LOOPBACK, "certDir": str(install.certs)}
    config["health"] = {**(config.get("health") or {}),
                        "healthProbeBindAddress": f"{plane.LOOPBACK}:{install.ports.health}"}
    config["metrics"] = {"bindAddress": "0"}
    config["leaderElection"] = {"leaderElect": False}
    config["integrations"] = {**(config.get("integrations") or {}), "frameworks": list(KUEUE_FRAMEWORKS)}
    (install.folder / "kueue-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


# Volcano v1.10.0: three programs, each with the flags of its Deployment in
# installer/volcano-development.yaml and of cmd/<program>/app/options/options.go, its ports
# on loopback: the webhook server (Ports.webhook) and its TLS health server (extra[0]), the
# controller manager's health server (health), the scheduler's (status) and its metrics
# (extra[1]).
VOLCANO_ADMISSIONS = "/jobs/mutate,/jobs/validate,/podgroups/mutate,/pods/validate,/pods/mutate,/queues/mutate," \
                     "/queues/validate"


def _volcano_common(install: Install, program: str) -> list[str]:
    return [str(install.bindir / program), f"--kubeconfig={install.kubeconfigs[program]}", "--logtostderr", "-v=2"]


def _volcano_webhook_argv(install: Install) -> list[str]:
    certs = install.certs
    return [*_volcano_common(install, "vc-webhook-manager"), f"--enabled-admission={VOLCANO_ADMISSIONS}",
            f"--tls-cert-file={certs / 'tls.crt'}", f"--tls-private-key-file={certs / 'tls.key'}",
            f"--ca-cert-file={certs / 'ca.crt'}", f"--admission-conf={install.folder / 'volcano-admission.conf'}",
            f"--webhook-namespace={install.namespace}", "--webhook-service-name=volcano-admission-service",
            f"--listen-address={plane.LOOPBACK}", f"--port={install.ports.webhook}", "--enable-healthz=true",
            f"--healthz-address={plane.LOOPBACK}:{install.ports.extra[0]}"]


def _volcano_controller_argv(install: Install) -> list[str]:
    return [*_volcano_common(install, "vc-controller-manager"), "--leader-elect=false", "--enable-healthz=true",
            f"--healthz-address={plane.LOOPBACK}:{install.ports.health}"]


def _volcano_scheduler_argv(install: Install) -> list[str]:
    return [*_volcano_common(install, "vc-scheduler"), "--leader-elect=false",
            f"--scheduler-conf={install.folder / 'volcano-scheduler.conf'}", "--enable-healthz=true",
            f"--healthz-address={plane.LOOPBACK}:{install.ports.status}",
            f"--listen-address={plane.LOOPBACK}:{install.ports.extra[1]}"]


def _volcano_prepare(install: Install) -> None:
    """The scheduler's and the admission's configuration files, from their ConfigMaps."""
    for key in ("volcano-scheduler.conf", "volcano-admission.conf"):
        (install.folder / key).write_text(install.config.get(key, ""))


def _volcano_ready(install: Install) -> bool:
    return (ready(install.ports.health, "/healthz") and ready(install.ports.status, "/healthz")
            and ready(install.ports.extra[0], "/healthz", ca=install.certs / "ca.crt"))


OPERATORS: Mapping[str, Operator] = {o.name: o for o in (
    # manifests/overlays/standalone: namespace kubeflow and the empty webhook Secret its
    # rotator fills (training-operator v1.8.1).
    Operator("training-operator", "manifests/overlays/standalone", "kubeflow", "training-operator-ca",
             {"training-operator": _training_operator_argv}, _training_operator_env, _training_operator_prepare),
    # config/default: namespace jobset-system, names prefixed jobset- (jobset v0.12.0).
    Operator("jobset", "config/default", "jobset-system", "jobset-ca", {"jobset": _kubebuilder_argv("jobset")},
             prepare=_kubebuilder_prepare("jobset")),
    # config/default: namespace lws-system, names prefixed lws- (lws v0.9.0).
    Operator("lws", "config/default", "lws-system", "lws-ca", {"lws": _kubebuilder_argv("lws")},
             prepare=_kubebuilder_prepare("lws")),
    # manifests/overlays/manager: namespace kubeflow-system; its third-party/jobset resource
    # fetches JobSet's release manifests from GitHub, which the jobset operator here stands in
    # for (the same release, v0.12.0). Its ClusterTrainingRuntimes: manifests/overlays/runtimes.
    Operator("trainer", "manifests/overlays/manager", "kubeflow-system", "kubeflow-trainer-ca",
             {"trainer-controller-manager": _trainer_argv}, _trainer_env, _trainer_prepare,
             drop=("../../third-party/jobset",), extras=("manifests/overlays/runtimes",), needs=("jobset",)),
    # installer/volcano-development.yaml: one file of objects, namespace volcano-system, a
    # ServiceAccount per program; the webhook Secret its admission-init Job would make is
    # the harness's certificate, passed to the webhook manager by its flags.
    Operator("volcano", "installer/volcano-development.yaml", "volcano-system", "volcano-ca",
             {"vc-webhook-manager": _volcano_webhook_argv, "vc-controller-manager": _volcano_controller_argv,
              "vc-scheduler": _volcano_scheduler_argv}, prepare=_volcano_prepare,
             accounts={"vc-webhook-manager": "volcano-admission", "vc-controller-manager": "volcano-controllers",
                       "vc-scheduler": "volcano-scheduler"}, extra_ports=2, ready=_volcano_ready),
    # config/default: namespace kueue-system, names prefixed kueue- (kueue v0.17.0); its
    # internalcert Secret is the harness's certificate, its rotator off.
    Operator("kueue", "config/default", "kueue-system", "kueue-ca", {"kueue": _kueue_argv},
             prepare=_kueue_prepare, leave_out=("APIService",)),
)}


def operator(name: str) -> Operator:
    """The operator called ``name``; another name is refused with the known ones."""
    if name not in OPERATORS:
        raise InputError(f"operator {name!r}; expected one of: {', '.join(OPERATORS)}")
    return OPERATORS[name]


# --- the upstream manifests, read and rewritten (pure) ---------------------------------------

def parse_download(text: str, module: str) -> Path:
    """The ``Dir`` of ``go mod download -json``'s answer: the module's source in Go's cache."""
    try:
        found = json.loads(text)
    except ValueError as exc:
        raise RuntimeFailure(f"go mod download -json {module}: not JSON ({one_line(exc)})") from None
    if not isinstance(found, dict) or found.get("Error") or not isinstance(found.get("Dir"), str):
        reason = found.get("Error") if isinstance(found, dict) else None
        raise RuntimeFailure(f"go mod download -json {module}: {reason or 'no Dir in its answer'}; expected the "
                             "module's source in Go's module cache (is the Go module proxy reachable?)")
    return Path(found["Dir"])


def parse_objects(text: str, where: str) -> list[dict[str, Any]]:
    """The objects of a multi-document YAML stream; anything but mappings with a kind and a
    name is one error naming ``where``."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise RuntimeFailure(f"{where}: not YAML ({one_line(exc)})") from None
    for doc in docs:
        if not isinstance(doc, dict) or not doc.get("kind") or not (doc.get("metadata") or {}).get("name"):
            raise RuntimeFailure(f"{where}: {str(doc)[:200]!r}; expected Kubernetes objects with a kind and a name")
    return docs


@dataclass(frozen=True)
class Manifests:
    """An overlay's objects sorted by what the install does with each."""

    crds: list[dict[str, Any]]
    objects: list[dict[str, Any]]  # namespaces, RBAC, ConfigMaps, Secrets, Services
    webhooks: list[dict[str, Any]]
    deployments: list[dict[str, Any]]  # stood in for by host processes; read for what they mount


def sort_manifests(docs: Iterable[dict[str, Any]]) -> Manifests:
    """:class:`Manifests` of ``docs``, namespaces first among the objects."""
    docs = list(docs)
    objects = [d for d in docs if d["kind"] not in ("CustomResourceDefinition", *WEBHOOK_KINDS, *STAND_INS)]
    objects.sort(key=lambda d: d["kind"] != "Namespace")
    return Manifests(crds=[d for d in docs if d["kind"] == "CustomResourceDefinition"], objects=objects,
                     webhooks=[d for d in docs if d["kind"] in WEBHOOK_KINDS],
                     deployments=[d for d in docs if d["kind"] in STAND_INS])


def _pod_specs(deployments: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [((d.get("spec") or {}).get("template") or {}).get("spec") or {} for d in deployments]


def service_account(deployments: Sequence[Mapping[str, Any]], where: str) -> str:
    """The one ServiceAccount the operator's pod runs as."""
    # ``serviceAccount`` is the field's older name, which Volcano's installer still writes.
    names = {spec.get("serviceAccountName") or spec.get("serviceAccount") or "" for spec in _pod_specs(deployments)}
    if len(names) != 1 or "" in names:
        raise RuntimeFailure(f"{where}: service accounts {sorted(names)}; expected one Deployment naming one")
    return names.pop()


def mounted(deployments: Sequence[Mapping[str, Any]], source: str) -> list[str]:
    """The names of the ``source`` volumes (``secret``: ``secretName``, ``configMap``: ``name``)."""
    key = "secretName" if source == "secret" else "name"
    return [volume[source][key] for spec in _pod_specs(deployments) for volume in spec.get("volumes") or []
            if isinstance(volume.get(source), dict) and volume[source].get(key)]


def service_hosts(webhooks: Iterable[Mapping[str, Any]]) -> list[str]:
    """``<service>.<namespace>.svc`` of each Service the webhooks name, sorted, once each."""
    hosts = {f"{c['service']['name']}.{c['service'].get('namespace', 'default')}.svc"
             for config in webhooks for hook in config.get("webhooks") or []
             for c in [hook.get("clientConfig") or {}] if isinstance(c.get("service"), dict)}
    return sorted(hosts)


def rewrite_webhooks(configs: Iterable[Mapping[str, Any]], port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    """Each configuration with every ``clientConfig.service`` (and its ``path``) replaced by
    ``url: https://127.0.0.1:<port><path>`` and ``caBundle``: the API server calls the host
    process (module docstring). Rules, policies and selectors are kept as shipped."""
    bundle = base64.b64encode(ca_pem).decode("ascii")
    rewritten = []
    for config in configs:
        hooks = []
        for hook in config.get("webhooks") or []:
            service = (hook.get("clientConfig") or {}).get("service") or {}
            path = service.get("path") or "/"
            if not path.startswith("/"):
                raise RuntimeFailure(f"webhook {hook.get('name')}: path {path!r}; expected one starting with /")
            hooks.append({**hook, "clientConfig": {"url": f"https://{plane.LOOPBACK}:{port}{path}",
                                                   "caBundle": bundle}})
        rewritten.append({**config, "webhooks": hooks})
    return rewritten


def prefill_secrets(objects: Iterable[Mapping[str, Any]], names: Sequence[str],
                 files: Mapping[str, bytes]) -> list[dict[str, Any]]:
    """``objects`` with each Secret called one of ``names`` holding ``files`` (base64)."""
    data = {key: base64.b64encode(value).decode("ascii") for key, value in files.items()}
    return [{**obj, "data": data} if obj["kind"] == "Secret" and obj["metadata"]["name"] in names else dict(obj)
            for obj in objects]


def config_files(objects: Iterable[Mapping[str, Any]], names: Sequence[str]) -> dict[str, str]:
    """The files of the ConfigMaps called one of ``names``, by key."""
    return {key: str(value) for obj in objects if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] in names
            for key, value in (obj.get("data") or {}).items()}


def token_kubeconfig(server: str, ca: Path, token: str, user: str) -> str:
    """A kubeconfig that calls ``server`` with a ServiceAccount's bearer token."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "torchpod",
        "clusters": [{"name": "torchpod", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "torchpod", "context": {"cluster": "torchpod", "user": user}}],
    }, sort_keys=False)


# --- the webhook CA and serving certificate ----------------------------------------------------

def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: rsa.RSAPrivateKey) -> bytes:
    # PKCS #1: the rotator parses the CA key of its Secret with x509.ParsePKCS1PrivateKey
    # before it injects the CA (cert-controller v0.10.1, rotator.go, buildArtifactsFromSecret).
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _certificate(subject: str, names: Sequence[x509.GeneralName], key: rsa.RSAPrivateKey,
                 issuer: tuple[x509.Certificate, rsa.RSAPrivateKey] | None,
                 now: datetime.datetime) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    signer_name, signer_key = (name, key) if issuer is None else (issuer[0].subject, issuer[1])
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(signer_name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
               .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
               .add_extension(x509.SubjectAlternativeName(list(names)), critical=False))
    if issuer is None:
        builder = builder.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                      content_commitment=False, key_encipherment=False,
                                                      data_encipherment=False, key_agreement=False,
                                                      encipher_only=False, decipher_only=False), critical=True)
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    return builder.sign(signer_key, hashes.SHA256())


def make_certs(folder: Path, ca_name: str, hosts: Sequence[str], now: datetime.datetime) -> dict[str, bytes]:
    """A CA (named ``ca_name``, also as a DNS name: what a rotator checks) and a serving
    certificate it signs for 127.0.0.1 and ``hosts``, written to ``folder`` as ``ca.crt``,
    ``ca.key``, ``tls.crt`` and ``tls.key`` (the keys a webhook Secret holds); returns them."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, key = _new_key(), _new_key()
    ca = _certificate(ca_name, [x509.DNSName(ca_name)], ca_key, None, now)
    names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.IPv4Address(plane.LOOPBACK)),
                                     *(x509.DNSName(h) for h in hosts)]
    served = _certificate(hosts[0] if hosts else plane.LOOPBACK, names, key, (ca, ca_key), now)
    files = {"ca.crt": _pem(ca), "ca.key": _key_pem(ca_key), "tls.crt": _pem(served), "tls.key": _key_pem(key)}
    for name, data in files.items():
        (folder / name).write_bytes(data)
        (folder / name).chmod(0o600)
    return files


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


def _status(port: int, method: str, path: str, ca: Path | None, timeout: float, body: bytes | None = None,
            headers: Mapping[str, str] | None = None) -> int | None:
    """The status a server on loopback ``port`` answers ``method path`` with (over TLS verified
    against ``ca`` where one is given), or None when it does not answer."""
    conn: http.client.HTTPConnection
    if ca is None:
        conn = http.client.HTTPConnection(plane.LOOPBACK, port, timeout=timeout)
    else:
        conn = http.client.HTTPSConnection(plane.LOOPBACK, port, timeout=timeout,
                                           context=ssl.create_default_context(cafile=str(ca)))
    try:
        conn.request(method, path, body=body, headers=dict(headers or {}))
        return conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def ready(port: int, path: str = "/readyz", timeout: float = 2.0, ca: Path | None = None) -> bool:
    """Whether the health server on ``port`` answers ``path`` with 200; over TLS, verified
    against ``ca``, where one is given."""
    return _status(port, "GET", path, ca, timeout) == 200


def webhook_paths(webhooks: Iterable[Mapping[str, Any]]) -> list[str]:
    """The path of each webhook the configurations name (as :func:`rewrite_webhooks` reads
    them), sorted, once each."""
    return sorted({((hook.get("clientConfig") or {}).get("service") or {}).get("path") or "/"
                   for config in webhooks for hook in config.get("webhooks") or []})


def webhook_served(port: int, path: str, ca: Path, timeout: float = 2.0) -> bool:
    """Whether the webhook server on ``port`` has a handler at ``path``: an empty request that
    is not JSON gets any answer but 404, over TLS verified against ``ca`` (not JSON: Volcano
    v1.10.0's handler returns at once on one, and panics on an empty JSON review, whose
    request is nil: pkg/webhooks/router/server.go, ``Serve``). A controller-runtime
    manager answers its readiness check once its webhook server listens, and JobSet v0.12.0 and
    LWS v0.9.0 register their webhooks' paths later, from a goroutine that waits for the
    certificates (main.go and cmd/main.go, ``go setupControllers``): until then the server
    answers 404, and the API server refuses every object the webhook admits ("failed calling
    webhook ...: the server could not find the requested resource")."""
    status = _status(port, "POST", path, ca, timeout, body=b"", headers={"Content-Type": "text/plain"})
    return status is not None and status != 404


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
