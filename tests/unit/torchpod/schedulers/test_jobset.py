"""torchpod.schedulers.jobset: JobSet used directly (its labels passed by the
downward API, JOB_COMPLETION_INDEX). Its own ``claims()`` and ``detect()`` called directly, on the shared fixtures
(tests/unit/fixtures/schedulers.yaml) that resolve to it and on the broken ones that reach
it; tests/unit/torchpod/test_schedulers.py runs the same fixtures through the whole of
``resolve()``."""

from __future__ import annotations

import pytest

from torchpod.schedulers import jobset

from launcher_cases import (
    detector_tests,
    user_options,
)

# Broken fixtures that reach this detector but are refused by a later step of resolve()
# (tests/unit/torchpod/test_schedulers.py checks their messages there).
REFUSED_LATER = {}

# the shared fixtures through this detector alone (launcher_cases.detector_tests)
(test_it_has_fixtures_of_both_kinds, test_detect_alone_gives_the_fixtures_plan,
 test_detect_refuses_a_broken_environment_in_one_line) = detector_tests(jobset, REFUSED_LATER)


@pytest.mark.parametrize("env", [
    {'JOBSET_NAME': 'js'},
    {'GLOBAL_REPLICAS': '2'},
    {'JOB_GLOBAL_INDEX': '0'},
    {'JOB_COMPLETION_INDEX': '0'},
])
def test_claims_on_its_markers(env):
    assert jobset.claims(env, user_options(env))


@pytest.mark.parametrize("env", [
    {},
    # an Indexed Job described by the env:// variables stays with the env convention
    {'JOB_COMPLETION_INDEX': '1', 'MASTER_ADDR': 'm', 'WORLD_SIZE': '2', 'RANK': '1'},
    {'REPLICA_INDEX': '0'},
])
def test_does_not_claim_without_them(env):
    assert not jobset.claims(env, user_options(env))
