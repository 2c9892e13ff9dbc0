"""torchpod.schedulers.slurm: its parsers (host lists, task and GPU counts) and, as for every
detector, its own ``claims()`` and ``detect()`` called directly on the shared fixtures
(tests/unit/fixtures/schedulers.yaml) that resolve to it and the broken ones that reach it;
tests/unit/torchpod/test_schedulers.py runs the same fixtures through the whole of
``resolve()``."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod.schedulers import slurm
from torchpod.schedulers.slurm import expand_hostlist, expand_tasks_per_node, gpus_from_env

from launcher_cases import (
    detector_tests,
    reads_tests,
    user_options,
)


@pytest.mark.parametrize(
    "text, hosts",
    [
        ("gpu001", ("gpu001",)),
        ("gpu[001-004,010]", ("gpu001", "gpu002", "gpu003", "gpu004", "gpu010")),
        ("a[1-2],b3", ("a1", "a2", "b3")),
        ("r[1-2]-n[08-09]", ("r1-n08", "r1-n09", "r2-n08", "r2-n09")),
        ("n[9-11]", ("n9", "n10", "n11")),
        ("x[1]y", ("x1y",)),
        ("login1.cluster,gpu[1-2]", ("login1.cluster", "gpu1", "gpu2")),
    ],
)
def test_slurm_hostlist_expands_in_order(text, hosts):
    assert expand_hostlist("SLURM_JOB_NODELIST", text) == hosts


@pytest.mark.parametrize("text", ["", "gpu[001-", "gpu]1", "gpu[a-b]", "gpu[3-1]", "a,,b", "g[[1]]", "gpu[1-2] x"])
def test_slurm_hostlist_rejects_garbage(text):
    with pytest.raises(InputError, match="SLURM_JOB_NODELIST"):
        expand_hostlist("SLURM_JOB_NODELIST", text)


def test_slurm_task_counts():
    assert expand_tasks_per_node("V", "4(x2),1") == (4, 4, 1)
    with pytest.raises(InputError):
        expand_tasks_per_node("V", "4(2)")


@pytest.mark.parametrize(
    "env, want",
    [
        ({"SLURM_GPUS_ON_NODE": "8", "SLURM_GPUS_PER_NODE": "a100:4"}, "8"),
        ({"SLURM_GPUS_PER_NODE": "a100:4"}, "4"),
        ({"SLURM_GPUS_PER_NODE": "gpu:h100:2,gpu:a100:2"}, "4"),
        ({"SLURM_GPUS_PER_NODE": "4"}, "4"),
        ({}, None),
    ],
)
def test_slurm_gpu_counts(env, want):
    assert gpus_from_env(env)[0] == want


# Broken fixtures that reach this detector but are refused by a later step of resolve()
# (tests/unit/torchpod/test_schedulers.py checks their messages there).
REFUSED_LATER = {
    'slurm_nnodes_smaller_than_hosts':
        "the user's --nnodes is held against the hosts after detection (resolve.decide_nnodes)",
}

# the shared fixtures through this detector alone (launcher_cases.detector_tests)
(test_it_has_fixtures_of_both_kinds, test_detect_alone_gives_the_fixtures_plan,
 test_detect_refuses_a_broken_environment_in_one_line) = detector_tests(slurm, REFUSED_LATER)


@pytest.mark.parametrize("env", [
    {'SLURM_JOB_ID': '5'},
    {'SLURM_JOBID': '5'},
])
def test_claims_on_its_markers(env):
    assert slurm.claims(env, user_options(env))


@pytest.mark.parametrize("env", [
    {},
    {'SLURM_NODELIST': 'gpu[1-2]'},
    {'PBS_JOBID': '1.s'},
])
def test_does_not_claim_without_them(env):
    assert not slurm.claims(env, user_options(env))


# the variables it reads are exactly the ones job scripts forward into containers
(test_detect_reads_only_the_variables_the_contract_names,
 test_every_variable_named_in_the_module_is_in_reads) = reads_tests(slurm, ('SLURM_',))
