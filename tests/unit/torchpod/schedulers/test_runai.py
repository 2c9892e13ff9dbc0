"""torchpod.schedulers.runai: Run:ai (a RUNAI_* marker with a distributed job's WORLD_SIZE, MASTER_ADDR
or PET_NNODES). The checks every detector runs (launcher_cases.DetectorCases) take this file's table
of cases."""

from __future__ import annotations

import pytest

from torchpod.schedulers import runai

from launcher_cases import DetectorCases, user_options


class TestRunai(DetectorCases):
    detector = runai
    claims = [
        {'RUNAI_JOB_NAME': 'j', 'WORLD_SIZE': '2'},
        {'RUNAI_JOB_UUID': 'u', 'MASTER_ADDR': 'm'},
        {'RUNAI_PROJECT': 'p', 'PET_NNODES': '2'},
    ]
    not_claims = [
        {},
        {'RUNAI_JOB_NAME': 'j'},
        {'RUNAI_NUM_OF_GPUS': '1'},
        {'WORLD_SIZE': '2'},
    ]


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
