"""The rendezvous a job's nodes meet at: c10d (the job's first node) or an etcd serving the
v2 API, given (--etcd-endpoint) or rendered beside the job (--etcd-server). Pure.
"""

from __future__ import annotations

from dataclasses import replace

from torchpod.contract import ETCD_PORT
from torchpod.errors import InputError

from .. import grammars
from .jobspec import ETCD_IMAGE, JobSpec
from .names import image_problem

RDZV = ("c10d", "etcd")



def check_endpoint(value) -> None:
    """HOST:PORT (or [IPv6]:PORT) with a port of 1-65535, as torch's etcd-v2 rendezvous
    parses it (parse_rendezvous_endpoint, torch/distributed/elastic/rendezvous/utils.py)."""
    form = f"expected HOST:PORT with a port of 1-65535, e.g. etcd.infra:{ETCD_PORT}"
    if not isinstance(value, str):
        raise InputError(f"--etcd-endpoint={value!r}; {form}")
    if value.startswith("["):
        host, close, port = value[1:].partition("]:")
        ok_host = bool(close) and grammars.IPV6_HOST.fullmatch(host) is not None
    else:
        host, colon, port = value.rpartition(":")
        ok_host = bool(colon) and ":" not in host and grammars.QUALIFIED_NAME.fullmatch(host) is not None
    if ":" not in value:
        raise InputError(f"--etcd-endpoint={value!r} has no port; {form}")
    if not ok_host or len(host) > 253:
        raise InputError(f"--etcd-endpoint={value!r}; {form} (host: letters, digits, '.', '-', '_')")
    if not grammars.DIGITS.fullmatch(port) or not 1 <= int(port) <= 65535:
        raise InputError(f"--etcd-endpoint={value!r} has port {port!r}; {form}")


def check_rdzv(spec: JobSpec) -> JobSpec:
    """--rdzv known; with etcd, one endpoint (given, or the etcd Pod's that --etcd-server
    renders, filled in here); --etcd-image only with --etcd-server, and pinned."""
    if spec.rdzv not in RDZV:
        raise InputError(f"--rdzv={spec.rdzv!r} is unknown; expected one of {', '.join(RDZV)}")
    if spec.etcd_image != ETCD_IMAGE and not spec.etcd_server:
        raise InputError(f"--etcd-image={spec.etcd_image!r} names the image of the etcd Pod --etcd-server renders; "
                         "expected --rdzv etcd --etcd-server with it")
    if spec.etcd_server and (problem := image_problem(spec.etcd_image)):
        raise InputError(f"--etcd-image={spec.etcd_image!r} {problem}".replace("REGISTRY/torchpod/pytorch",
                                                                                "REGISTRY/etcd"))
    if spec.rdzv != "etcd":
        if spec.etcd_endpoint or spec.etcd_server:
            raise InputError("--etcd-endpoint/--etcd-server are for --rdzv etcd; got --rdzv c10d")
        return spec
    if spec.etcd_server and spec.etcd_endpoint:
        raise InputError(f"--etcd-server with --etcd-endpoint={spec.etcd_endpoint!r}: the job would use the "
                         "endpoint and never the etcd Pod; expected one of them")
    if spec.etcd_server and not spec.kube:
        raise InputError("--etcd-server renders a Kubernetes Pod; for an HPC job give --etcd-endpoint HOST:PORT")
    if not spec.etcd_endpoint and not spec.etcd_server:
        raise InputError("--rdzv etcd needs an etcd endpoint; expected --etcd-endpoint HOST:PORT (an etcd "
                         "serving the v2 API) or --etcd-server (render one next to the job)")
    if spec.etcd_endpoint:
        check_endpoint(spec.etcd_endpoint)
        return spec
    return replace(spec, etcd_endpoint=f"{spec.etcd_service}:{ETCD_PORT}")
