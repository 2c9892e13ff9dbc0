"""A Kubernetes control plane on this machine for the tests: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler from the binaries ``build`` made, in one
throwaway folder, with certificates made at start and a kubeconfig for an administrator.

The flags follow what kubeadm gives a control plane (kubernetes v1.37.2,
cmd/kubeadm/app/phases/controlplane/manifests.go): Node and RBAC authorization, the default
admission chain plus NodeRestriction and PodSecurity named explicitly (both are in it by
default: pkg/kubeapiserver/options/plugins.go), service-account tokens signed by a key made
here, a front-proxy CA for the aggregation layer, the controller manager signing CSRs with
the cluster CA and using a service account per controller. As the API server's own
integration tests run them (kubernetes, test/integration/framework/etcd.go and
controlplane_utils.go), etcd serves plain HTTP on loopback, here without fsync since the
data is thrown away, and the endpoint reconciler is off: the `kubernetes` Service has no
endpoints. Every port is on 127.0.0.1.

``start`` returns once every component answers its health check; ``stop`` ends the processes
it started (by the ids it recorded, each checked to still run the binary it started) and
removes the folder. It never touches ``~/.kube``, listens beyond loopback, or leaves a process
behind.
"""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import json
import os
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from torchpod import readers
from torchpod.errors import InputError, RuntimeFailure, one_line

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
LOOPBACK = "127.0.0.1"
SERVICE_CIDR = "10.0.0.0/24"
API_SERVICE_IP = next(ipaddress.IPv4Network(SERVICE_CIDR).hosts())  # the API's own Service: the first address
API_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
             "kubernetes.default.svc.cluster.local")
ISSUER = "https://kubernetes.default.svc.cluster.local"
ADMISSION = "NodeRestriction,PodSecurity"
FRONT_PROXY_CLIENT = "front-proxy-client"
STATE = "plane.json"
STATE_CAP = 64 << 10  # the record `start` writes is a few hundred bytes
POINTER_CAP = 4096  # the cache's pointer to the running plane: one folder name (PATH_MAX)
STATUS_CAP = 16 << 10  # /proc/PID/status: about 1.5 KiB; VmRSS is in its first half
LOG_TAIL = 4000  # characters of a failed component's log in the error
CERT_DAYS = 30
PEM_CAP = 64 << 10  # a key or certificate make_pki writes: under 1 KiB


@dataclass(frozen=True)
class Ports:
    """The loopback ports of one plane."""

    etcd: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int


@dataclass(frozen=True)
class Plane:
    """A started plane: its folder, ports, processes and the administrator's kubeconfig."""

    root: Path
    ports: Ports
    pids: Mapping[str, int]
    binaries: Mapping[str, str]
    seconds: float  # from the first process started to every health check answered

    @property
    def kubeconfig(self) -> Path:
        return self.root / "admin.kubeconfig"

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.ports.apiserver}"


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports the kernel hands out (closed again before use)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind((LOOPBACK, 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


# --- certificates ------------------------------------------------------------------------

def _name(common: str, organization: str = "") -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    if organization:
        parts.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(parts)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


Issuer = tuple[x509.Certificate, ec.EllipticCurvePrivateKey]


def _issue(pki: Path, stem: str, subject: x509.Name, now: datetime.datetime,
           issuer: Issuer | None, server: bool = False, ips: Sequence[str] = ()) -> Issuer:
    """``<stem>.crt`` and ``<stem>.key`` under ``pki``: a CA when ``issuer`` is None, else a
    certificate the CA signs, for clients and, with ``server``, for loopback servers too (or,
    with ``ips``, for those addresses alone)."""
    key = ec.generate_private_key(ec.SECP256R1())
    signer_name, signer_key = (subject, key) if issuer is None else (issuer[0].subject, issuer[1])
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(signer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
               .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True))
    if issuer is not None:
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server and ips:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]), critical=False)
    elif server:
        names: list[x509.GeneralName] = [x509.DNSName(n) for n in API_NAMES]
        names += [x509.IPAddress(ipaddress.IPv4Address(LOOPBACK)), x509.IPAddress(API_SERVICE_IP)]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(signer_key, hashes.SHA256())
    (pki / f"{stem}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pki / f"{stem}.key", key)
    return cert, key


# Each client's certificate: (file stem, user, group). The users and groups are those the
# API server's bootstrap RBAC binds (kubernetes, plugin/pkg/auth/authorizer/rbac/bootstrappolicy).
KUBELET_CLIENT = "apiserver-kubelet-client"
CLIENTS = (("admin", "torchpod-admin", "system:masters"),
           ("controller-manager", "system:kube-controller-manager", ""),
           ("scheduler", "system:kube-scheduler", ""))


def make_pki(pki: Path, now: datetime.datetime) -> None:
    """The cluster CA, the servers' certificates, each client's, the front proxy's CA and
    client (the aggregation layer: kubeadm's set, cmd/kubeadm/app/phases/certs), and the
    service-account key."""
    pki.mkdir(parents=True, exist_ok=True)
    ca = _issue(pki, "ca", _name("torchpod-kube-ca"), now, None)
    _issue(pki, "apiserver", _name("kube-apiserver"), now, ca, server=True)
    for stem, user, group in CLIENTS:
        _issue(pki, stem, _name(user, group), now, ca, server=stem != "admin")
    # the API server's client certificate for kubelets (`kubectl logs` goes through it), as kubeadm's
    _issue(pki, KUBELET_CLIENT, _name("kube-apiserver-kubelet-client", "system:masters"), now, ca)
    front_proxy = _issue(pki, "front-proxy-ca", _name("torchpod-front-proxy-ca"), now, None)
    _issue(pki, "front-proxy-client", _name(FRONT_PROXY_CLIENT), now, front_proxy)
    sa = ec.generate_private_key(ec.SECP256R1())
    _write_key(pki / "sa.key", sa)
    (pki / "sa.pub").write_bytes(sa.public_key().public_bytes(serialization.Encoding.PEM,
                                                              serialization.PublicFormat.SubjectPublicKeyInfo))


def _pem(path: Path) -> bytes:
    return readers.read_bytes(path, what=str(path), expected="a PEM file make_pki wrote", cap=PEM_CAP)


def _ca(pki: Path) -> Issuer:
    ca_key = serialization.load_pem_private_key(_pem(pki / "ca.key"), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise RuntimeFailure(f"{pki / 'ca.key'}: not the EC key make_pki writes")
    return x509.load_pem_x509_certificate(_pem(pki / "ca.crt")), ca_key


def issue_server(pki: Path, stem: str, common: str, ips: Sequence[str]) -> Path:
    """A serving certificate of the cluster CA for ``ips`` (a kubelet's endpoint on its
    Node's address), ``<stem>.crt`` and ``.key`` under ``pki``."""
    _issue(pki, stem, _name(common), datetime.datetime.now(datetime.timezone.utc), _ca(pki), server=True, ips=ips)
    return pki / f"{stem}.crt"


def issue_client(pki: Path, stem: str, user: str, group: str, now: datetime.datetime | None = None) -> Path:
    """A client certificate of the cluster CA ``make_pki`` made (``<stem>.crt`` and ``.key``
    under ``pki``) for ``user`` in ``group``: a node's is system:node:<name> in system:nodes,
    the identity the Node authorizer and NodeRestriction admission recognise."""
    _issue(pki, stem, _name(user, group), now or datetime.datetime.now(datetime.timezone.utc), _ca(pki))
    return pki / f"{stem}.crt"


def kubeconfig(server: str, pki: Path, stem: str) -> str:
    """A kubeconfig for one client certificate, from the YAML library."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "torchpod",
        "clusters": [{"name": "torchpod", "cluster": {"server": server,
                                                      "certificate-authority": str(pki / "ca.crt")}}],
        "users": [{"name": stem, "user": {"client-certificate": str(pki / f"{stem}.crt"),
                                          "client-key": str(pki / f"{stem}.key")}}],
        "contexts": [{"name": "torchpod", "context": {"cluster": "torchpod", "user": stem}}],
    }, sort_keys=False)


# --- the programs' command lines -----------------------------------------------------------

def etcd_argv(bindir: Path, root: Path, ports: Ports) -> list[str]:
    client, peer = f"http://{LOOPBACK}:{ports.etcd}", f"http://{LOOPBACK}:{ports.etcd_peer}"
    return [str(bindir / "etcd"), "--name=torchpod", f"--data-dir={root / 'etcd'}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=torchpod={peer}", "--unsafe-no-fsync=true", "--log-level=warn"]


def apiserver_argv(bindir: Path, root: Path, ports: Ports) -> list[str]:
    pki = root / "pki"
    return [str(bindir / "kube-apiserver"), f"--etcd-servers=http://{LOOPBACK}:{ports.etcd}",
            f"--bind-address={LOOPBACK}", f"--advertise-address={LOOPBACK}", f"--secure-port={ports.apiserver}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}", "--authorization-mode=Node,RBAC",
            f"--enable-admission-plugins={ADMISSION}", "--allow-privileged=true",
            f"--service-cluster-ip-range={SERVICE_CIDR}", f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={pki / 'sa.pub'}", f"--service-account-signing-key-file={pki / 'sa.key'}",
            # the aggregation layer's front proxy, as kubeadm sets it
            f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}", "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group", "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
            # `kubectl logs`: the kubelet's endpoint on its Node's InternalIP, its certificate of the
            # cluster CA checked, the API server's own client certificate shown
            f"--kubelet-certificate-authority={pki / 'ca.crt'}", "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-client-certificate={pki / (KUBELET_CLIENT + '.crt')}",
            f"--kubelet-client-key={pki / (KUBELET_CLIENT + '.key')}",
            # the endpoint reconciler refuses a loopback address for the `kubernetes` Service, so
            # upstream's own tests turn it off (test/integration/framework/controlplane_utils.go)
            "--endpoint-reconciler-type=none"]


def _served(stem: str, root: Path, port: int) -> list[str]:
    """The flags of a component that serves its health on loopback with a certificate of the
    cluster CA and asks the API server who its callers are."""
    pki, config = root / "pki", str(root / f"{stem}.kubeconfig")
    return [f"--authentication-kubeconfig={config}", f"--authorization-kubeconfig={config}",
            f"--bind-address={LOOPBACK}", f"--secure-port={port}", f"--client-ca-file={pki / 'ca.crt'}",
            f"--tls-cert-file={pki / f'{stem}.crt'}", f"--tls-private-key-file={pki / f'{stem}.key'}"]


def controller_manager_argv(bindir: Path, root: Path, ports: Ports) -> list[str]:
    pki = root / "pki"
    return [str(bindir / "kube-controller-manager"), f"--kubeconfig={root / 'controller-manager.kubeconfig'}",
            *_served("controller-manager", root, ports.controller_manager),
            "--leader-elect=false", "--controllers=*,bootstrapsigner,tokencleaner", "--cluster-name=torchpod",
            "--use-service-account-credentials=true", f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}", f"--cluster-signing-cert-file={pki / 'ca.crt'}",
            f"--cluster-signing-key-file={pki / 'ca.key'}", f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}"]


def scheduler_config(root: Path) -> str:
    """KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1): flags for the client
    connection are deprecated in favour of it."""
    return yaml.safe_dump({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                           "clientConnection": {"kubeconfig": str(root / "scheduler.kubeconfig")},
                           "leaderElection": {"leaderElect": False}}, sort_keys=False)


def scheduler_argv(bindir: Path, root: Path, ports: Ports) -> list[str]:
    return [str(bindir / "kube-scheduler"), f"--config={root / 'scheduler.yaml'}",
            *_served("scheduler", root, ports.scheduler)]


ARGV: Mapping[str, Callable[[Path, Path, Ports], list[str]]] = {
    "etcd": etcd_argv, "kube-apiserver": apiserver_argv,
    "kube-controller-manager": controller_manager_argv, "kube-scheduler": scheduler_argv}


# --- health --------------------------------------------------------------------------------

def _tls(pki: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    return context


def probe(component: str, ports: Ports, pki: Path, timeout: float = 2.0) -> bool:
    """Whether ``component`` answers its health check with 200 ``ok`` (etcd: ``"health":"true"``)."""
    path, port = {"etcd": ("/health", ports.etcd), "kube-apiserver": ("/readyz", ports.apiserver),
                  "kube-controller-manager": ("/healthz", ports.controller_manager),
                  "kube-scheduler": ("/healthz", ports.scheduler)}[component]
    if component == "etcd":
        conn: http.client.HTTPConnection = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout)
    else:
        conn = http.client.HTTPSConnection(LOOPBACK, port, timeout=timeout, context=_tls(pki))
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read(4096).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()
    return response.status == 200 and (body.strip() == "ok" or '"health":"true"' in body)


def log_tail(path: Path, limit: int = LOG_TAIL) -> str:
    """The last ``limit`` characters of a component's log, undecodable bytes replaced; what
    stood in the way of reading it (no log, a FIFO in its place) in parentheses instead."""
    try:
        return readers.tail_text(path, what=str(path), expected="a component's log", chars=limit)
    except InputError as exc:
        return f"(no log: {exc})"


# --- processes -------------------------------------------------------------------------------

def prepare(root: Path, ports: Ports, now: datetime.datetime) -> None:
    """The folder's certificates, kubeconfigs and scheduler configuration."""
    pki = root / "pki"
    make_pki(pki, now)
    server = f"https://{LOOPBACK}:{ports.apiserver}"
    for stem, _, _ in CLIENTS:
        (root / f"{stem}.kubeconfig").write_text(kubeconfig(server, pki, stem))
    (root / "scheduler.yaml").write_text(scheduler_config(root))
    (root / "logs").mkdir()


def _spawn(argv: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    """One component in a process group of its own (start_new_session): an interrupted task
    does not stop it; ``stop`` does."""
    with log.open("ab") as out:
        return subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=log.parent)


def _await(component: str, process: subprocess.Popen[bytes], ports: Ports, root: Path, deadline: float,
           clock: Callable[[], float]) -> None:
    """Until ``component`` is healthy; a component that exits or stays unhealthy past the
    deadline is one error carrying the end of its log."""
    log = root / "logs" / f"{component}.log"
    while not probe(component, ports, root / "pki"):
        code = process.poll()
        if code is not None or clock() > deadline:
            what = f"exited with {code}" if code is not None else "did not answer its health check in time"
            raise RuntimeFailure(f"{component} {what}; the end of {log}: {log_tail(log)}")
        time.sleep(0.2)


def start(bindir: Path, root: Path, timeout: float = 180.0, now: datetime.datetime | None = None,
          clock: Callable[[], float] = time.monotonic) -> Plane:
    """Start the four components in ``root`` (a new, empty folder) and wait until each is healthy.

    etcd first, then the API server, then the controller manager and the scheduler side by
    side. On any failure every process started is stopped before the error is raised; the
    folder and its logs stay."""
    absent = [c for c in COMPONENTS if not (bindir / c).is_file()]
    if absent:
        raise RuntimeFailure(f"{', '.join(absent)} missing in {bindir}; run `invoke kube.build` first")
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise RuntimeFailure(f"{root} is not empty; expected a new folder for the control plane")
    ports = Ports(*free_ports(5))
    prepare(root, ports, now or datetime.datetime.now(datetime.timezone.utc))
    began, deadline = clock(), clock() + timeout
    started: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for group in (("etcd",), ("kube-apiserver",), ("kube-controller-manager", "kube-scheduler")):
            for component in group:
                started[component] = _spawn(ARGV[component](bindir, root, ports), root / "logs" / f"{component}.log")
            for component in group:
                _await(component, started[component], ports, root, deadline, clock)
    except BaseException:
        stop_processes({c: p.pid for c, p in started.items()}, {c: str(bindir / c) for c in started})
        raise
    plane = Plane(root=root, ports=ports, pids={c: p.pid for c, p in started.items()},
                  binaries={c: str(bindir / c) for c in COMPONENTS}, seconds=clock() - began)
    (root / STATE).write_text(json.dumps({**asdict(plane), "root": str(root)}, indent=2))
    return plane


def _runs(pid: int, binary: str) -> bool:
    """Whether ``pid`` is alive and runs ``binary`` (not a reused id, not a zombie)."""
    try:
        return os.readlink(f"/proc/{pid}/exe") == str(Path(binary).resolve())
    except OSError:
        return False


def _reap(pid: int) -> None:
    """Collect the exit status of a process that has ended, if it is this process's child
    (``start`` in the same process, as the tests do); another's is its parent's to collect."""
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def stop_processes(pids: Mapping[str, int], binaries: Mapping[str, str], grace: float = 15.0) -> list[str]:
    """TERM, then KILL after ``grace`` seconds, each process still running its binary, last
    started first; the components that needed KILL."""
    killed = []
    for component in reversed(list(pids)):
        pid, binary = pids[component], binaries[component]
        if not _runs(pid, binary):
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _runs(pid, binary) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _runs(pid, binary):
            os.kill(pid, signal.SIGKILL)
            killed.append(component)
        _reap(pid)
    return killed


def load(root: Path) -> Plane:
    """The plane ``start`` recorded in ``root``."""
    path = root / STATE
    if path.is_symlink():  # `start` writes a file; the reader would follow a link
        raise RuntimeFailure(f"{path}: no control plane recorded there (a symbolic link)")
    try:  # read once, checked on the descriptor it is read from
        text = readers.read_text(path, what=str(path), expected="the record `start` writes", cap=STATE_CAP)
    except InputError as exc:
        raise RuntimeFailure(f"no control plane recorded in {root}: {exc}") from None
    try:
        data = json.loads(text)
        found = Plane(root=Path(data["root"]), ports=Ports(**data["ports"]), pids=dict(data["pids"]),
                      binaries=dict(data["binaries"]), seconds=float(data["seconds"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise RuntimeFailure(f"{path}: not the record `start` writes ({one_line(exc)})") from None
    if set(found.pids) - set(found.binaries) or not all(isinstance(p, int) for p in found.pids.values()):
        raise RuntimeFailure(f"{path}: not the record `start` writes (process ids without their binaries)")
    return found


def stop(plane: Plane, keep: bool = False) -> list[str]:
    """Stop every component of ``plane``; remove its folder unless ``keep``."""
    killed = stop_processes(plane.pids, plane.binaries)
    if not keep:
        shutil.rmtree(plane.root)
    return killed


def rss_bytes(pids: Mapping[str, int]) -> dict[str, int]:
    """Each process's resident memory (``VmRSS`` of /proc/PID/status), 0 for one gone."""
    found = {}
    for component, pid in pids.items():
        try:  # the process's name, on the first line, may be any bytes
            status = readers.read_head(f"/proc/{pid}/status", what=f"/proc/{pid}/status", expected="procfs's status",
                                       limit=STATUS_CAP).decode("utf-8", "replace")
        except InputError:  # gone
            found[component] = 0
            continue
        kib = [line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")]
        found[component] = int(kib[0]) * 1024 if kib and kib[0].isdigit() else 0
    return found


# --- the plane `invoke kube.up` leaves running -------------------------------------------------

CURRENT = "current-plane"  # in the build cache: the folder of the plane kube.up started


def running(plane: Plane) -> bool:
    """Whether any component of ``plane`` still runs."""
    return any(_runs(pid, plane.binaries[c]) for c, pid in plane.pids.items())


def up(bindir: Path, cache: Path, timeout: float = 180.0) -> Plane:
    """Start a plane in a new folder under the system's temporary directory and remember it
    in ``cache``; refuse while the one remembered there still runs."""
    pointer = cache / CURRENT
    if pointer.is_file():
        folder = _remembered(pointer)
        if (folder / STATE).is_file() and running(load(folder)):
            raise RuntimeFailure(f"a control plane already runs in {folder}; `invoke kube.down` stops it")
    root = Path(tempfile.mkdtemp(prefix="torchpod-kube-"))
    started = start(bindir, root, timeout=timeout)
    cache.mkdir(parents=True, exist_ok=True)
    pointer.write_text(f"{root}\n", encoding="utf-8")
    return started


def _remembered(pointer: Path) -> Path:
    """The folder ``up`` wrote into ``pointer``, read through the bounded reader."""
    try:
        text = readers.read_text(pointer, what=str(pointer), expected="the folder `invoke kube.up` wrote there",
                                 cap=POINTER_CAP)
    except InputError as exc:
        raise RuntimeFailure(f"no control plane remembered: {exc}") from None
    return Path(text.strip())


def down(cache: Path) -> Plane | None:
    """Stop the plane ``up`` remembered in ``cache`` and remove its folder; None if there is none."""
    pointer = cache / CURRENT
    if not pointer.is_file():
        return None
    folder = _remembered(pointer)
    plane = load(folder) if (folder / STATE).is_file() else None
    if plane is not None:
        stop(plane)
    pointer.unlink()
    return plane


def report(plane: Plane) -> str:
    """What a person needs to use the plane, its start time and the memory each component holds."""
    memory = rss_bytes(plane.pids)
    rows = [f"API server   {plane.server}", f"kubeconfig   {plane.kubeconfig}",
            f"started in   {plane.seconds:.1f} s", f"{'component':<26}{'RSS MiB':>10}"]
    rows += [f"{c:<26}{memory[c] / 2**20:>10.0f}" for c in plane.pids]
    rows += [f"{'total':<26}{sum(memory.values()) / 2**20:>10.0f}",
             f"use it:      export KUBECONFIG={shlex.quote(str(plane.kubeconfig))}"]
    return "\n".join(rows)
