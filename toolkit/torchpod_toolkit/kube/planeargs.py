"""The command lines of a control plane's four programs (``plane``), and the scheduler's
configuration file one of them names: lists of words, never a shell line, every address on
loopback and every file one ``planestart.prepare`` wrote.

The flags follow what kubeadm gives a control plane (kubernetes v1.37.2,
cmd/kubeadm/app/phases/controlplane/manifests.go): Node and RBAC authorization, the default
admission chain plus NodeRestriction and PodSecurity named explicitly (both are in it by
default: pkg/kubeapiserver/options/plugins.go), service-account tokens signed by a key made
here, a front-proxy CA for the aggregation layer, the controller manager signing CSRs with
the cluster CA and using a service account per controller. As the API server's own
integration tests run them (kubernetes, test/integration/framework/etcd.go and
controlplane_utils.go), etcd serves plain HTTP on loopback, here without fsync since the
data is thrown away, and the endpoint reconciler is off: the `kubernetes` Service has no
endpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import yaml

from .plane import LOOPBACK, SERVICE_CIDR, Ports
from .planecerts import FRONT_PROXY_CLIENT, KUBELET_CLIENT

ISSUER = "https://kubernetes.default.svc.cluster.local"
ADMISSION = "NodeRestriction,PodSecurity"


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
