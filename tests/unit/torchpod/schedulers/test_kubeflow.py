"""torchpod.schedulers.kubeflow: training-operator / Trainer pods (PET_NNODES, PET_MASTER_ADDR,
PET_RDZV_ENDPOINT). Its own ``claims()`` and ``detect()`` called directly, on the shared
fixtures (tests/unit/fixtures/schedulers.yaml) that resolve to it and on the broken ones
that reach it; tests/unit/torchpod/test_schedulers.py runs the same fixtures through the
whole of ``resolve()``."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod.schedulers import kubeflow

from launcher_cases import (
    assert_detection_matches,
    bad_cases_of,
    detect_directly,
    good_cases_of,
    user_options,
)

GOOD = good_cases_of(kubeflow.NAME)
BAD = bad_cases_of(kubeflow.NAME)
# Broken fixtures that reach this detector but are refused by a later step of resolve()
# (tests/unit/torchpod/test_schedulers.py checks their messages there).
REFUSED_LATER = {}


def test_it_has_fixtures():
    assert GOOD, "add a fixture this detector resolves"
    # the broken Kubeflow fixture is a torchrun worker, refused before any detector:
    # the examples below stand in for broken pods
    assert BAD == []


@pytest.mark.parametrize("case", GOOD, ids=[c.name for c in GOOD])
def test_detect_alone_gives_the_fixtures_plan(case, tmp_path):
    det, user = detect_directly(kubeflow, case, tmp_path)
    assert_detection_matches(det, user, case)


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


@pytest.mark.parametrize("env", [
    {'PET_NNODES': '2'},
    {'PET_MASTER_ADDR': 'job-master-0'},
    {'PET_RDZV_ENDPOINT': 'job-master-0:29400'},
])
def test_claims_on_its_markers(env):
    assert kubeflow.claims(env, user_options(env))


@pytest.mark.parametrize("env", [
    {},
    {'PET_NPROC_PER_NODE': '2'},
    {'MASTER_ADDR': 'm', 'WORLD_SIZE': '2', 'RANK': '0'},
])
def test_does_not_claim_without_them(env):
    assert not kubeflow.claims(env, user_options(env))
