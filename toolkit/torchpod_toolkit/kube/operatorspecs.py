"""The operators the harness installs, one record each (the Kubeflow training operator,
JobSet, LeaderWorkerSet, Kubeflow Trainer v2, Volcano, Kueue): the overlay upstream
installs it from, its namespace, the name its cert rotator gives its CA, and how each of
its programs is started on this host in the place of its Deployment's pod: its command
line, the environment it adds, the files its pod would mount (its Configuration, with this
host's ports and certificate folder) written before it starts, and its readiness check.
Each function cites the upstream file its flags and fields come from. ``OPERATORS`` is the
table by name; ``Install`` (what one install's programs are started with) and ``Running``
(an installed operator) are the records ``operators`` passes between its steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from torchpod import readers
from torchpod_toolkit.kube import plane
from torchpod_toolkit.kube.operatorprobes import ready


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
    # Kinds of the overlay not applied, besides operatormanifests.STAND_INS: what needs a pod's network (an
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

