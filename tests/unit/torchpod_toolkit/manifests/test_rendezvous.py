"""The rendezvous a job's nodes meet at (manifests.rendezvous)."""

import pytest

from torchpod.contract import ETCD_PORT
from torchpod.errors import InputError
from torchpod_toolkit.manifests import rendezvous
from torchpod_toolkit.manifests.jobspec import JobSpec

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"


def test_an_etcd_server_fills_in_its_endpoint():
    spec = rendezvous.check_rdzv(JobSpec("kubeflow", 2, IMAGE, ("t.py",), rdzv="etcd", etcd_server=True))
    assert spec.etcd_endpoint == f"train-etcd:{ETCD_PORT}"


def test_endpoints():
    rendezvous.check_endpoint("etcd.infra:2379")
    rendezvous.check_endpoint("[fd00::1]:2379")
    with pytest.raises(InputError, match=r"^--etcd-endpoint='etcd' has no port"):
        rendezvous.check_endpoint("etcd")


def test_c10d_takes_no_etcd():
    with pytest.raises(InputError, match=r"^--etcd-endpoint/--etcd-server are for --rdzv etcd"):
        rendezvous.check_rdzv(JobSpec("slurm", 2, IMAGE, ("t.py",), etcd_endpoint="e:1"))


@pytest.mark.parametrize("value", ["e:0", "e:99999", "e:\u0661", "[zz]:1", "a b:1", None])
def test_hostile_endpoint_is_refused_in_one_line(value):
    with pytest.raises(InputError) as err:
        rendezvous.check_endpoint(value)
    assert str(err.value).startswith(f"--etcd-endpoint={value!r}") and "\n" not in str(err.value)
