"""torchpod.schedulers.volcano: Volcano (VC_TASK_INDEX, VK_TASK_INDEX, VC_<TASK>_HOSTS). Its
own ``claims()`` and ``detect()`` called directly, on the shared fixtures
(tests/unit/fixtures/schedulers.yaml) that resolve to it and on the broken ones that reach
it; tests/unit/torchpod/test_schedulers.py runs the same fixtures through the whole of
``resolve()``."""

from __future__ import annotations

import pytest

from torchpod.schedulers import volcano

from launcher_cases import (
    detector_tests,
    user_options,
)

# Broken fixtures that reach this detector but are refused by a later step of resolve()
# (tests/unit/torchpod/test_schedulers.py checks their messages there).
REFUSED_LATER = {}

# the shared fixtures through this detector alone (launcher_cases.detector_tests)
(test_it_has_fixtures_of_both_kinds, test_detect_alone_gives_the_fixtures_plan,
 test_detect_refuses_a_broken_environment_in_one_line) = detector_tests(volcano, REFUSED_LATER)


@pytest.mark.parametrize("env", [
    {'VC_TASK_INDEX': '0'},
    {'VK_TASK_INDEX': '1'},
    {'VC_WORKER_HOSTS': 'w-0.j,w-1.j'},
    {'VC_MASTER_HOSTS': 'm-0.j'},
])
def test_claims_on_its_markers(env):
    assert volcano.claims(env, user_options(env))


@pytest.mark.parametrize("env", [
    {},
    {'VC_WORKER_NUM': '2'},
    {'MASTER_ADDR': 'm', 'WORLD_SIZE': '2', 'RANK': '0'},
])
def test_does_not_claim_without_them(env):
    assert not volcano.claims(env, user_options(env))


# Volcano's pytorch plugin alone (pytorch.go; the webhook adds svc, nothing adds env): the
# master pod is node 0 whatever the pod's host name, and RANK is refused outside WORLD_SIZE.
_PYTORCH_ALONE = {
    "VC_MASTER_HOSTS": "pj-master-0.pj", "VC_WORKER_HOSTS": "pj-worker-0.pj,pj-worker-1.pj",
    "MASTER_ADDR": "pj-master-0.pj", "MASTER_PORT": "23456", "WORLD_SIZE": "3",
}


@pytest.mark.parametrize("hostname, rank", [("pj-master-0", "0"), ("pj-worker-0", "1"), ("oke-gpu-node-7", "2")])
def test_pytorch_plugin_alone_takes_the_node_from_rank(hostname, rank):
    from torchpod.schedulers.common import Facts

    env = {**_PYTORCH_ALONE, "RANK": rank}
    det = volcano.detect(env, Facts(hostname=hostname), user_options(env))
    assert (det.node_rank, str(det.nnodes), str(det.rdzv_endpoint)) == (int(rank), "3", "pj-master-0.pj:23456")
    assert det.local_addr == ["pj-master-0.pj", "pj-worker-0.pj", "pj-worker-1.pj"][int(rank)]


@pytest.mark.parametrize("rank, needle", [("3", "RANK='3' is outside WORLD_SIZE=3"), ("x", "RANK='x'")])
def test_pytorch_plugin_alone_refuses_a_bad_rank_in_one_line(rank, needle):
    from torchpod.errors import InputError
    from torchpod.schedulers.common import Facts

    env = {**_PYTORCH_ALONE, "RANK": rank}
    with pytest.raises(InputError, match=needle):
        volcano.detect(env, Facts(hostname="pj-worker-0"), user_options(env))


def test_without_env_plugin_or_pytorch_rank_the_index_is_still_asked_for():
    from torchpod.errors import InputError
    from torchpod.schedulers.common import Facts

    env = {"VC_WORKER_HOSTS": "j-worker-0.j,j-worker-1.j"}
    with pytest.raises(InputError, match="VC_TASK_INDEX is not set"):
        volcano.detect(env, Facts(hostname="j-worker-0"), user_options(env))


def test_pytorch_plugin_alone_refuses_a_rank_that_is_not_this_pods():
    from torchpod.errors import InputError
    from torchpod.schedulers.common import Facts

    env = {**_PYTORCH_ALONE, "RANK": "2"}
    with pytest.raises(InputError, match="RANK=2 but this pod is 'pj-worker-0.pj', node 1"):
        volcano.detect(env, Facts(hostname="pj-worker-0"), user_options(env))
