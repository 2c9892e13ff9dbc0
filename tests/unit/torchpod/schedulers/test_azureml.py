"""torchpod.schedulers.azureml: AzureML's PyTorch distribution (an AZUREML_* marker
with MASTER_ADDR/NODE_RANK/WORLD_SIZE). Its own ``claims()`` and ``detect()`` called directly, on the shared fixtures
(tests/unit/fixtures/schedulers.yaml) that resolve to it and on the broken ones that reach
it; tests/unit/torchpod/test_schedulers.py runs the same fixtures through the whole of
``resolve()``."""

from __future__ import annotations

import pytest

from torchpod.schedulers import azureml

from launcher_cases import (
    detector_tests,
    user_options,
)

# Broken fixtures that reach this detector but are refused by a later step of resolve()
# (tests/unit/torchpod/test_schedulers.py checks their messages there).
REFUSED_LATER = {}

# the shared fixtures through this detector alone (launcher_cases.detector_tests)
(test_it_has_fixtures_of_both_kinds, test_detect_alone_gives_the_fixtures_plan,
 test_detect_refuses_a_broken_environment_in_one_line) = detector_tests(azureml, REFUSED_LATER)


@pytest.mark.parametrize("env", [
    {'AZUREML_RUN_ID': 'r', 'MASTER_ADDR': '10.0.0.4'},
    {'AZUREML_RUN_ID': 'r', 'NODE_RANK': '0'},
    {'AZUREML_NODE_COUNT': '2'},
])
def test_claims_on_its_markers(env):
    assert azureml.claims(env, user_options(env))


@pytest.mark.parametrize("env", [
    {},
    {'AZUREML_RUN_ID': 'r'},  # a single-node AzureML job stays standalone
    {'AZUREML_RUN_ID': 'r', 'AZUREML_NODE_COUNT': '1'},
    {'MASTER_ADDR': 'm', 'WORLD_SIZE': '2', 'NODE_RANK': '0'},
])
def test_does_not_claim_without_them(env):
    assert not azureml.claims(env, user_options(env))
