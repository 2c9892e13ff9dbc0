"""torchpod.schedulers.kubeflow: training-operator / Trainer pods (PET_NNODES, PET_MASTER_ADDR,
PET_RDZV_ENDPOINT). The checks every detector runs (launcher_cases.DetectorCases) take this
file's table of cases; broken pods are this file's own examples, as no broken fixture reaches it."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod.schedulers import kubeflow

from launcher_cases import DetectorCases, bad_cases_of, good_cases_of, user_options


class TestKubeflow(DetectorCases):
    detector = kubeflow
    claims = [
        {'PET_NNODES': '2'},
        {'PET_MASTER_ADDR': 'job-master-0'},
        {'PET_RDZV_ENDPOINT': 'job-master-0:29400'},
    ]
    not_claims = [
        {},
        {'PET_NPROC_PER_NODE': '2'},
        {'MASTER_ADDR': 'm', 'WORLD_SIZE': '2', 'RANK': '0'},
    ]
    # no broken fixture reaches it: test_it_has_fixtures and
    # test_detect_refuses_a_broken_pod_in_one_line below take their place
    test_it_has_fixtures_of_both_kinds = None
    test_detect_refuses_a_broken_environment_in_one_line = None


def test_it_has_fixtures():
    assert good_cases_of(kubeflow.NAME), "add a fixture this detector resolves"
    # the broken Kubeflow fixture is a torchrun worker, refused before any detector:
    # the examples below stand in for broken pods
    assert bad_cases_of(kubeflow.NAME) == []


@pytest.mark.parametrize("env, needle", [
    ({"PET_MASTER_ADDR": "job-master-0", "PET_NODE_RANK": "0"}, "PET_NNODES is not set"),
    ({"PET_NNODES": "2", "PET_NODE_RANK": "0"}, "neither PET_RDZV_ENDPOINT nor PET_MASTER_ADDR"),
    # RANK and JOB_COMPLETION_INDEX are the operators' (PET_NODE_RANK is also the user's
    # torchrun option, refused before detection by torchpod.options)
    ({"PET_NNODES": "2", "PET_RDZV_ENDPOINT": "job-worker-0:29400", "RANK": "1\n0"}, "RANK='1\\n0'"),
    ({"PET_NNODES": "2", "PET_RDZV_ENDPOINT": "job-worker-0:29400", "JOB_COMPLETION_INDEX": "\u0663"},
     "JOB_COMPLETION_INDEX='\u0663'"),
])
def test_detect_refuses_a_broken_pod_in_one_line(env, needle, tmp_path):
    from torchpod.schedulers.common import Facts

    user = user_options(env)
    assert kubeflow.claims(env, user)
    with pytest.raises(InputError) as info:
        kubeflow.detect(env, Facts(hostname="job-worker-0", root=tmp_path, sysfs_root=tmp_path / "sys"), user)
    assert needle in str(info.value)
    assert "\n" not in str(info.value)
