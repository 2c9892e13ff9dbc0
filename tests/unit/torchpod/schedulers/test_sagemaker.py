"""torchpod.schedulers.sagemaker: Amazon SageMaker (SM_HOSTS, SM_CURRENT_HOST). Its own
``claims()`` and ``detect()`` called directly, on the shared fixtures
(tests/unit/fixtures/schedulers.yaml) that resolve to it and on the broken ones that reach
it; tests/unit/torchpod/test_schedulers.py runs the same fixtures through the whole of
``resolve()``."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod.schedulers import sagemaker
from torchpod.schedulers.common import Facts

from launcher_cases import (
    assert_detect_refuses,
    assert_detection_matches,
    bad_cases_of,
    detect_directly,
    good_cases_of,
    materialise,
    user_options,
)

# Cases that choose SageMaker by TORCHPOD_SCHEDULER (no SM_* marker: only resourceconfig.json)
# are not claimed; they are run through detect() below without claims().
FORCED = [c for c in good_cases_of(sagemaker.NAME) + bad_cases_of(sagemaker.NAME) if "TORCHPOD_SCHEDULER" in c.env]
GOOD = [c for c in good_cases_of(sagemaker.NAME) if c not in FORCED]
BAD = [c for c in bad_cases_of(sagemaker.NAME) if c not in FORCED]
# Broken fixtures that reach this detector but are refused by a later step of resolve()
# (tests/unit/torchpod/test_schedulers.py checks their messages there).
REFUSED_LATER = {}


def test_it_has_fixtures_of_both_kinds():
    assert GOOD, "add a fixture this detector resolves"
    assert BAD, "add a broken fixture that reaches this detector"
    assert set(REFUSED_LATER) <= {c.name for c in BAD}


@pytest.mark.parametrize("case", GOOD, ids=[c.name for c in GOOD])
def test_detect_alone_gives_the_fixtures_plan(case, tmp_path):
    det, user = detect_directly(sagemaker, case, tmp_path)
    assert_detection_matches(det, user, case)


@pytest.mark.parametrize("case", BAD, ids=[c.name for c in BAD])
def test_detect_refuses_a_broken_environment_in_one_line(case, tmp_path):
    assert_detect_refuses(sagemaker, case, tmp_path, REFUSED_LATER)


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


@pytest.mark.parametrize("env", [
    {'SM_HOSTS': '["algo-1"]'},
    {'SM_CURRENT_HOST': 'algo-1'},
])
def test_claims_on_its_markers(env):
    assert sagemaker.claims(env, user_options(env))


@pytest.mark.parametrize("env", [
    {},
    {'SM_NUM_GPUS': '8'},
    {'SM_MODEL_DIR': '/opt/ml/model'},
])
def test_does_not_claim_without_them(env):
    assert not sagemaker.claims(env, user_options(env))
