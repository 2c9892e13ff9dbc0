"""torchpod.schedulers.sagemaker: Amazon SageMaker (SM_HOSTS, SM_CURRENT_HOST). The checks every
detector runs (launcher_cases.DetectorCases) take this file's table of cases; fixtures that
choose it by TORCHPOD_SCHEDULER are run through detect() alone here."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod.schedulers import sagemaker
from torchpod.schedulers.common import Facts

from launcher_cases import (
    DetectorCases,
    assert_detection_matches,
    bad_cases_of,
    good_cases_of,
    materialise,
    user_options,
)

# Cases that choose SageMaker by TORCHPOD_SCHEDULER (no SM_* marker: only resourceconfig.json)
# are not claimed; they are run through detect() below without claims().
FORCED = [c for c in good_cases_of(sagemaker.NAME) + bad_cases_of(sagemaker.NAME) if "TORCHPOD_SCHEDULER" in c.env]


class TestSagemaker(DetectorCases):
    detector = sagemaker
    claims = [
        {'SM_HOSTS': '["algo-1"]'},
        {'SM_CURRENT_HOST': 'algo-1'},
    ]
    not_claims = [
        {},
        {'SM_NUM_GPUS': '8'},
        {'SM_MODEL_DIR': '/opt/ml/model'},
    ]

    @classmethod
    def fixtures(cls):
        good, bad = super().fixtures()
        return [c for c in good if c not in FORCED], [c for c in bad if c not in FORCED]


@pytest.mark.parametrize("case", FORCED, ids=[c.name for c in FORCED])
def test_forced_detect_reads_resourceconfig_json(case, tmp_path):
    env, facts = materialise(case, tmp_path)
    user = user_options(env, case.argv)
    assert not sagemaker.claims(env, user)
    if case.error is None:
        assert_detection_matches(sagemaker.detect(env, facts, user), user, case)
        return
    with pytest.raises(InputError) as info:
        sagemaker.detect(env, facts, user)
    assert case.error in str(info.value) and "\n" not in str(info.value)


def test_forced_without_resourceconfig_json_is_one_line(tmp_path):
    with pytest.raises(InputError) as info:
        sagemaker.detect({}, Facts(hostname="h", root=tmp_path), user_options({}))
    assert "resourceconfig.json" in str(info.value) and "\n" not in str(info.value)
