"""torchpod.schedulers.flux: Flux (FLUX_JOB_ID, FLUX_JOB_NNODES, FLUX_TASK_RANK). Its own
``claims()`` and ``detect()`` called directly, on the shared fixtures
(tests/unit/fixtures/schedulers.yaml) that resolve to it and on the broken ones that reach
it; tests/unit/torchpod/test_schedulers.py runs the same fixtures through the whole of
``resolve()``."""

from __future__ import annotations

import pytest

from torchpod.schedulers import flux

from launcher_cases import (
    detector_tests,
    user_options,
)

# Broken fixtures that reach this detector but are refused by a later step of resolve()
# (tests/unit/torchpod/test_schedulers.py checks their messages there).
REFUSED_LATER = {
    'flux_without_an_endpoint': "resolve's decide_endpoint, with flux.ENDPOINT_HINT",
}

# the shared fixtures through this detector alone (launcher_cases.detector_tests)
(test_it_has_fixtures_of_both_kinds, test_detect_alone_gives_the_fixtures_plan,
 test_detect_refuses_a_broken_environment_in_one_line) = detector_tests(flux, REFUSED_LATER)


@pytest.mark.parametrize("env", [
    {'FLUX_JOB_ID': 'f1'},
    {'FLUX_JOB_NNODES': '2'},
    {'FLUX_TASK_RANK': '0'},
])
def test_claims_on_its_markers(env):
    assert flux.claims(env, user_options(env))


@pytest.mark.parametrize("env", [
    {},
    {'FLUX_URI': 'local:///tmp/f'},
    {'FLUX_TASK_LOCAL_ID': '0'},
])
def test_does_not_claim_without_them(env):
    assert not flux.claims(env, user_options(env))
