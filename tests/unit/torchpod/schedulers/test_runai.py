"""torchpod.schedulers.runai: Run:ai (a RUNAI_* marker with a distributed job's WORLD_SIZE,
MASTER_ADDR or PET_NNODES). Its own ``claims()`` and ``detect()`` called directly, on the
shared fixtures (tests/unit/fixtures/schedulers.yaml) that resolve to it and on the broken
ones that reach it; tests/unit/torchpod/test_schedulers.py runs the same fixtures through
the whole of ``resolve()``."""

from __future__ import annotations

import pytest

from torchpod.schedulers import runai

from launcher_cases import (
    detector_tests,
    user_options,
)

# Broken fixtures that reach this detector but are refused by a later step of resolve()
# (tests/unit/torchpod/test_schedulers.py checks their messages there).
REFUSED_LATER = {}

# the shared fixtures through this detector alone (launcher_cases.detector_tests)
(test_it_has_fixtures_of_both_kinds, test_detect_alone_gives_the_fixtures_plan,
 test_detect_refuses_a_broken_environment_in_one_line) = detector_tests(runai, REFUSED_LATER)


@pytest.mark.parametrize("env", [
    {'RUNAI_JOB_NAME': 'j', 'WORLD_SIZE': '2'},
    {'RUNAI_JOB_UUID': 'u', 'MASTER_ADDR': 'm'},
    {'RUNAI_PROJECT': 'p', 'PET_NNODES': '2'},
])
def test_claims_on_its_markers(env):
    assert runai.claims(env, user_options(env))


@pytest.mark.parametrize("env", [
    {},
    {'RUNAI_JOB_NAME': 'j'},
    {'RUNAI_NUM_OF_GPUS': '1'},
    {'WORLD_SIZE': '2'},
])
def test_does_not_claim_without_them(env):
    assert not runai.claims(env, user_options(env))


@pytest.mark.parametrize("env, missing", [
    ({"RUNAI_JOB_NAME": "j", "MASTER_ADDR": "m", "RANK": "0"}, "WORLD_SIZE"),
    ({"RUNAI_JOB_NAME": "j", "WORLD_SIZE": "2", "MASTER_ADDR": "m"}, "RANK"),
    ({"RUNAI_JOB_NAME": "j", "WORLD_SIZE": "2", "RANK": "1"}, "MASTER_ADDR"),
])
def test_a_broken_pod_is_told_to_submit_with_the_current_cli(env, missing):
    # the Run:ai CLI the project's job files use (`runai training pytorch submit`), not the retired one
    from torchpod.errors import InputError
    from torchpod.schedulers.common import Facts

    with pytest.raises(InputError) as err:
        runai.detect(env, Facts(), user_options(env))
    assert str(err.value).startswith(f"{missing} is not set") and "`runai training pytorch submit" in str(err.value)
    assert "submit-dist" not in str(err.value)
