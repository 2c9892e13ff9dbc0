"""torchpod.schedulers.skypilot: SkyPilot (SKYPILOT_NODE_IPS, SKYPILOT_NODE_RANK, SKYPILOT_NUM_NODES). Its own
``claims()`` and ``detect()`` called directly, on the shared fixtures
(tests/unit/fixtures/schedulers.yaml) that resolve to it and on the broken ones that reach
it; tests/unit/torchpod/test_schedulers.py runs the same fixtures through the whole of
``resolve()``."""

from __future__ import annotations

import pytest

from torchpod.schedulers import skypilot

from launcher_cases import (
    detector_tests,
    user_options,
)

# Broken fixtures that reach this detector but are refused by a later step of resolve()
# (tests/unit/torchpod/test_schedulers.py checks their messages there).
REFUSED_LATER = {}

# the shared fixtures through this detector alone (launcher_cases.detector_tests)
(test_it_has_fixtures_of_both_kinds, test_detect_alone_gives_the_fixtures_plan,
 test_detect_refuses_a_broken_environment_in_one_line) = detector_tests(skypilot, REFUSED_LATER)


@pytest.mark.parametrize("env", [
    {'SKYPILOT_NODE_IPS': '10.0.0.1'},
    {'SKYPILOT_NODE_RANK': '0'},
    {'SKYPILOT_NUM_NODES': '2'},
])
def test_claims_on_its_markers(env):
    assert skypilot.claims(env, user_options(env))


@pytest.mark.parametrize("env", [
    {},
    {'SKYPILOT_NUM_GPUS_PER_NODE': '8'},
    {'SKYPILOT_TASK_ID': 't'},
])
def test_does_not_claim_without_them(env):
    assert not skypilot.claims(env, user_options(env))
