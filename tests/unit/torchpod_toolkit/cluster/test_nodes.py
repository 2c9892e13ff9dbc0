"""The harness's nodes: the address placeholders the runner fills in, and a manifest pod's
securityContext as the harness applies it to the container."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpod_toolkit.cluster import nodes, topology


def test_an_address_for_a_node_the_runner_has_none_for_is_refused():
    with pytest.raises(ValueError, match=r"\{node2_ip\} names node 2; only 2 addresses"):
        nodes.fill_ips("{node0_ip} {node2_ip}", ["10.0.0.1", "10.0.0.2"])


@given(text=st.text())
def test_text_without_placeholders_is_left_as_it_is(text):
    if not re.search(r"\{node\d+_ip\}", text, re.ASCII):
        assert nodes.fill_ips(text, []) == text


# --- a manifest's securityContext, as the harness applies it to the containers ---------------
def _rendered_pod(**extra):
    import yaml

    from torchpod_toolkit.manifests.podsecurity import pod_specs
    from torchpod_toolkit.manifests.render import render
    from torchpod_toolkit.manifests.spec import JobSpec

    (out,) = [o for o in render(JobSpec("volcano", 2, "registry.example.com/t/p:1", ("t.py",), gpus_per_node=0,
                                        **extra)) if o.name.endswith(".yaml")]
    docs = [d for d in yaml.safe_load_all(out.text) if d]
    return docs, next(pod for _, pod in pod_specs(docs[0]))


def test_a_restricted_pods_security_becomes_the_containers():
    docs, pod = _rendered_pod(run_as_user=4242, run_as_group=0, fs_group=77)
    sec = nodes.security_of(pod)
    assert sec == nodes.Security(user="4242:0", groups=("77",), read_only=True, tmpfs=("/tmp",),
                                 cap_drop=("ALL",), cap_add=(), no_new_privileges=True)
    assert all(n.security == sec for n in topology.from_manifest(docs).nodes)


def test_an_rdma_pod_stays_root_with_ipc_lock_and_a_read_only_root():
    _, pod = _rendered_pod(rdma="device-plugin", rdma_resource="rdma/x")
    sec = nodes.security_of(pod)
    assert sec.user is None and sec.cap_add == ("IPC_LOCK",) and sec.cap_drop == () and sec.read_only
